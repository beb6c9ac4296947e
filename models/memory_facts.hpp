#pragma once

// What a checkpoint will take on a GPU besides its pools, and what one KV
// page and one recurrent slot of its pools cost, read from the folder alone
// (config.json and the safetensors headers; no weight is read or converted).
// The launchers size the pools from it on a device (engine/memory_plan.hpp),
// and `mstar-tool memory-plan` prints the plan where there is no device.

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "models/safetensors.hpp"

namespace mstar::models {

/// Bytes the CUDA backends hold besides the pools, whatever the step, for
/// cuBLAS's workspace, the attention split workspace, captured graphs and the
/// allocator's rounding: an allowance, not a measurement.
inline constexpr std::uint64_t device_fixed_reserve_bytes = std::uint64_t{512} << 20;

/// A checkpoint's device footprint and pool geometry.
struct memory_facts {
  std::string family;                 ///< "nemotron_h" or "qwen3_5"
  std::uint64_t weight_bytes = 0;     ///< the weights as the CUDA backend uploads them
  std::uint64_t workspace_bytes = 0;  ///< work buffers of the largest step, and the fixed reserve
  std::int64_t parameters = 0;        ///< elements of the tensors counted in `weight_bytes`
  std::int64_t max_context = 0;       ///< config.json's max_position_embeddings
  /// The pools under the options given (no fingerprint, no memory factory):
  /// their page and slot bytes, sink and checkpoint slots are the model's own.
  pool_spec pools;
};

/// Device bytes of the checkpoint's weights when uploaded in `dtype`: the
/// GEMM matrices (rank-2 tensors other than embedding tables) in `dtype`,
/// everything else (embeddings, norms, conv filters, per-head vectors) in
/// float32, as both CUDA backends keep them; an LM head tied to the
/// embeddings counts once more in `dtype` (the backends upload it as a
/// matrix); multi-token-prediction tensors (`mtp.`) are not loaded and not
/// counted. `parameters` receives the elements counted.
[[nodiscard]] std::uint64_t device_weight_bytes(const safetensors_checkpoint& checkpoint,
                                                mstar::dtype dtype, std::int64_t& parameters);

/// The facts of the checkpoint in `folder` run in `dtype` (the KV pages'
/// element type on the device) with steps of at most `step_tokens` tokens over
/// `step_rows` rows; the pools sized by `options`. Errors name the file.
[[nodiscard]] result<memory_facts> memory_facts_of(const std::filesystem::path& folder,
                                                   mstar::dtype dtype, const pool_options& options,
                                                   std::int64_t step_tokens,
                                                   std::int64_t step_rows);

}  // namespace mstar::models
