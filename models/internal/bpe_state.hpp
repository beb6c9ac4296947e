#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/internal/added_tokens.hpp"
#include "models/internal/bpe_merge.hpp"
#include "models/internal/pretokenize.hpp"
#include "models/internal/unicode_normalize.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {

/// The tables of a loaded byte-level BPE tokenizer (see bpe_tokenizer).
struct bpe_tokenizer::state {
  /// How an id decodes.
  enum class kind : std::uint8_t { none, vocab, added, special };

  /// An added token as tokenizer.json lists it.
  struct added_token {
    std::string content;  ///< what find() looks up
    token_id id = 0;
    std::string decoded;  ///< what decode() gives for it
    bool special = false;
  };

  /// One pre-tokenizer step, applied to every piece the steps before it made:
  /// a Split, or ByteLevel (its prefix space, then its own regex when
  /// `use_regex` is set). ByteLevel is the last step.
  struct pre_tokenize_step {
    bool add_prefix_space = false;
    std::optional<internal::split_rule> split;
  };

  std::unordered_map<std::string, token_id> vocab;  ///< byte-level spelling -> id
  internal::merge_table merges;
  /// Per byte, the id of its byte-level symbol (nullopt: not in the vocab).
  std::array<std::optional<token_id>, 256> byte_ids{};
  std::vector<added_token> added;  ///< in the file's order
  /// Added tokens with `normalized` false, matched in the raw input; those
  /// with `normalized` true, matched in the normalized text between them.
  internal::added_matcher raw_added;
  internal::added_matcher normalized_added;
  std::vector<internal::normal_form> normalizers;  ///< applied in order
  std::vector<pre_tokenize_step> pre_tokenizer;    ///< applied in order
  std::vector<std::string> id_text;                ///< per id: the bytes it decodes to
  std::vector<kind> id_kind;                       ///< per id
  std::optional<token_id> unk;                     ///< for byte symbols missing from the vocab
  bool ignore_merges = false;
};

}  // namespace mstar::models
