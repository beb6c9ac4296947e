#pragma once

// The sequential gated-delta-rule kernel (delta_rule.cu) as the chunked
// prefill path (delta_rule_chunked.cu) launches it for the rows it leaves.

#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/delta_rule.hpp"

namespace mstar::kernels::cuda::detail {

/// `gated_delta_rule_varlen`'s sequential scan over every row r whose
/// `chunked_rows[r]` is negative (every row when `chunked_rows` is null, a
/// device array of R entries); the others are left alone: output and slot.
/// `decode_variant` >= 0 launches decode rows with that entry of
/// delta_rule.cu's decode table (`gated_delta_rule_decode_variant`).
[[nodiscard]] cudaError_t launch_gated_delta_scan(const gated_delta_rule_params& p,
                                                  const std::int32_t* chunked_rows,
                                                  cudaStream_t stream, int decode_variant = -1);

}  // namespace mstar::kernels::cuda::detail
