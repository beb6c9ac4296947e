#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "models/tokenizer.hpp"

namespace mstar::models::internal {

/// A BPE model's merges as token ids: for a pair of adjacent symbols, the
/// rank of merging them (its place in the merges list) and the id of the
/// result.
class merge_table {
 public:
  /// One merge.
  struct merge {
    std::uint32_t rank = 0;
    token_id result = 0;
  };

  /// Adds the merge of (left, right); a later merge of the same pair replaces
  /// an earlier one, as in `tokenizers`.
  void add(token_id left, token_id right, merge m) { merges_[key(left, right)] = m; }

  /// The merge of (left, right), or nullptr.
  [[nodiscard]] const merge* find(token_id left, token_id right) const {
    const auto it = merges_.find(key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }

 private:
  static std::uint64_t key(token_id left, token_id right) {
    return (std::uint64_t{left} << 32) | right;
  }

  std::unordered_map<std::uint64_t, merge> merges_;
};

/// Merges `symbols` (the ids of one pre-token's bytes) in place as
/// `tokenizers`' BPE does: the lowest-ranked merge of two adjacent symbols
/// first, the leftmost among equal ranks, until no adjacent pair has a
/// merge. O(n log n) in the number of symbols, so a long run of one
/// character (a pre-token of 100,000 spaces) stays cheap.
void apply_merges(const merge_table& merges, std::vector<token_id>& symbols);

}  // namespace mstar::models::internal
