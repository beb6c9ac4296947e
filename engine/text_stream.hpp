#pragma once

// Incremental detokenization for streaming: the text of the tokens
// generated so far, handed out piece by piece so that no piece splits a
// UTF-8 sequence and none shows text a stop string may still claim. The
// stop string itself is never returned.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "models/tokenizer.hpp"

namespace mstar::engine {

/// One sequence's text stream. Relies on the tokenizers' decode being a
/// concatenation of per-token bytes (models/tokenizer.hpp), so a token's
/// bytes can be decoded alone.
class text_stream {
 public:
  /// `tok` may be null (token ids only: no text, stop strings never match).
  text_stream(const models::tokenizer* tok, std::vector<std::string> stop_strings);

  /// What pushing tokens released.
  struct piece {
    std::string text;      ///< safe to show now
    bool stopped = false;  ///< a stop string matched: `text` ends before it
  };

  /// Adds the bytes of `ids` (special tokens skipped) and returns the text
  /// now safe to show. After a stop, further pushes return nothing.
  [[nodiscard]] piece push(std::span<const token_id> ids);
  /// The text held back at the end of the sequence (a partial stop string
  /// that never completed, a cut UTF-8 tail as U+FFFD).
  [[nodiscard]] std::string flush();

  /// All text released so far.
  [[nodiscard]] const std::string& released() const noexcept { return released_; }

 private:
  const models::tokenizer* tok_;
  std::vector<std::string> stops_;
  std::string pending_;   ///< decoded bytes not yet released
  std::string released_;  ///< released text, for stop matches across pieces
  bool stopped_ = false;
};

/// Length of the longest prefix of `bytes` that ends on a UTF-8 sequence
/// boundary (an incomplete trailing sequence is left out; invalid bytes
/// count as single characters).
[[nodiscard]] std::size_t complete_utf8_prefix(std::string_view bytes) noexcept;

}  // namespace mstar::engine
