#pragma once

// Host-side token choice for rows whose settings need the logits on the
// host (penalties, log-probabilities, kept logits): penalties applied to
// the row, then kernels::sample's draw, which depends only on (logits,
// settings, seed, counter) so a replayed or preempted request draws the same.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "engine/request.hpp"

namespace mstar::engine {

/// What was drawn for one row.
struct draw_result {
  token_id id = 0;
  token_logprob chosen;            ///< with logprobs: the drawn token's
  std::vector<token_logprob> top;  ///< with logprobs: the `logprobs` most likely
};

/// Applies the presence / frequency / repetition penalties to `logits` in
/// place. `counts`: occurrences of each id in the output so far; `prompt`:
/// the prompt's ids (the repetition penalty covers them too).
void apply_penalties(std::span<float> logits, const sampling_params& p,
                     const std::unordered_map<token_id, std::int32_t>& counts,
                     std::span<const token_id> prompt);

/// Draws one token from `logits` (penalised already) with `p`'s settings,
/// the `counter`-th draw of the request; with `p.logprobs`, the log-softmax
/// of the raw row for the chosen token and the top alternatives.
[[nodiscard]] result<draw_result> draw(std::span<const float> logits, const sampling_params& p,
                                       std::uint64_t counter);

}  // namespace mstar::engine
