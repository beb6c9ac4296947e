#pragma once

// Generation through a model's pools in one process: every request's prompt
// runs in one batched prefill step (less the prefix its cached pages hold),
// then all active requests decode together, one token per step, until each
// reaches its token budget or an end-of-sequence id.

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "core/result.hpp"
#include "models/nemotron_h.hpp"

namespace mstar::models {

/// How one request picks its tokens.
struct sampling_options {
  float temperature = 0.0F;  ///< 0: greedy
  std::int32_t top_k = 0;    ///< 0: all tokens
  float top_p = 1.0F;        ///< nucleus mass in (0, 1]
  std::uint64_t seed = 0;    ///< with the token index, fixes every draw
};

/// One prompt to complete.
struct generation_request {
  std::vector<resources::token_id> prompt;
  std::int32_t max_tokens = 16;
  sampling_options sampling;
  bool stop_at_eos = true;  ///< stop after sampling one of the config's eos ids
};

/// What one request produced, with its timings.
struct generation_result {
  std::vector<resources::token_id> prompt_ids;
  std::vector<resources::token_id> generated_ids;
  std::int64_t matched_tokens = 0;  ///< prompt tokens served from cached pages
  double time_to_first_token_s = 0;
  double decode_time_s = 0;  ///< from the first token to the last
  /// With `keep_logits`: the logits row that chose each generated token.
  std::vector<std::vector<float>> step_logits;
};

/// Completes `requests` together on `model`. Fails, naming the request,
/// when the pools cannot hold a request even alone, or on a bad prompt.
[[nodiscard]] result<std::vector<generation_result>> generate(
    nemotron_h_model& model, std::span<const generation_request> requests,
    bool keep_logits = false);

}  // namespace mstar::models
