#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/tokenizer.hpp"

namespace mstar::models {

/// The tables of a loaded byte-level BPE tokenizer (see bpe_tokenizer).
struct bpe_tokenizer::state {
  /// How an id decodes.
  enum class kind : std::uint8_t { none, vocab, added, special };

  /// A token matched verbatim in the input before pre-tokenization.
  struct added_token {
    std::string content;
    token_id id = 0;
  };

  std::unordered_map<std::string, token_id> vocab;  ///< byte-level spelling -> id
  /// Rank of merging the pair (left, right), keyed by left + '\0' + right (byte-level
  /// spellings never contain NUL: byte 0 is spelled U+0100).
  std::unordered_map<std::string, std::uint32_t> merge_ranks;
  std::vector<added_token> added;    ///< longest content first
  std::vector<std::string> id_text;  ///< per id: the bytes it decodes to
  std::vector<kind> id_kind;         ///< per id
  std::optional<token_id> unk;       ///< for byte symbols missing from the vocab
  bool add_prefix_space = false;
  bool use_regex = true;
  bool ignore_merges = false;
};

namespace internal {

/// The key of merge_ranks for the pair (left, right).
[[nodiscard]] inline std::string merge_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).push_back('\0');
  key.append(right);
  return key;
}

}  // namespace internal
}  // namespace mstar::models
