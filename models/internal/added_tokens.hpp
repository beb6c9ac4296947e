#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.hpp"

namespace mstar::models::internal {

/// An added token as the matcher sees it.
struct added_token_rule {
  std::string content;  ///< the text it matches (normalized when the token is)
  token_id id = 0;
  bool single_word = false;  ///< only where no word character touches it on either side
  bool lstrip = false;       ///< takes the white space before it
  bool rstrip = false;       ///< takes the white space after it
};

/// A stretch of the input: plain text, or an added token (with the white
/// space it stripped).
struct added_split {
  std::string_view text;
  std::optional<token_id> token;
};

/// Finds added tokens in text as `tokenizers`' AddedVocabulary does: the
/// leftmost match, longest first, then the next from its end; a single_word
/// match touching a word character is dropped (and what it covered stays
/// text); lstrip / rstrip widen a match over adjacent white space.
class added_matcher {
 public:
  added_matcher() = default;
  /// Takes the tokens; an empty content never matches.
  explicit added_matcher(std::vector<added_token_rule> tokens);

  /// `text` cut into text and tokens, in order, covering it; the text pieces
  /// are non-empty.
  [[nodiscard]] std::vector<added_split> split(std::string_view text) const;

  [[nodiscard]] bool empty() const noexcept { return tokens_.empty(); }

 private:
  struct found {
    std::size_t begin;
    const added_token_rule* token;
  };
  [[nodiscard]] std::optional<found> find(std::string_view text, std::size_t from) const;

  std::vector<added_token_rule> tokens_;  // longest content first
  std::array<bool, 256> first_bytes_{};   // bytes some token starts with
};

}  // namespace mstar::models::internal
