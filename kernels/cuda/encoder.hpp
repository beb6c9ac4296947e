#pragma once

// Device versions of kernels/encoder.hpp (a bidirectional encoder's math, for
// vision towers): the same params structs, every view a device address. Each
// launcher checks the shapes on the host (a violation returns
// cudaErrorInvalidValue and launches nothing), enqueues on `stream`,
// allocates nothing and returns the launch error. Checks that need the data
// (indices, positions, cu_seqlens) are not made: see each.

#include <cuda_runtime_api.h>

#include "kernels/encoder.hpp"

namespace mstar::kernels::cuda {

/// LayerNorm with an optional bias, one block per row; mean and variance in
/// f32 (two passes). `out` may be the same elements as `x`.
[[nodiscard]] cudaError_t layer_norm(const layer_norm_params& p, cudaStream_t stream);

/// GELU, elementwise, evaluated in f64 as on the CPU.
[[nodiscard]] cudaError_t gelu(const gelu_params& p, cudaStream_t stream);

/// `out[t] += sum_k weight[t, k] * table[index[t, k]]`. An index outside
/// `[0, V)` is not reported: its row's outputs become NaN.
[[nodiscard]] cudaError_t weighted_gather_add(const weighted_gather_add_params& p,
                                              cudaStream_t stream);

/// The 2D rotary embedding in place, angles and cos / sin in f32 as on the
/// CPU. Negative positions are not reported (they rotate backwards).
[[nodiscard]] cudaError_t axial_rope(const axial_rope_params& p, cudaStream_t stream);

/// Bidirectional attention inside each segment, one warp per (token, head)
/// with an online softmax (f32) over key tiles held in shared memory; no
/// scores are materialised, so `p.scores` must be empty. `p.cu_seqlens` is
/// a device array of segments + 1 entries, non-decreasing from 0 to T (not
/// checked: that needs a device read). head_dim at most 256; heads at most
/// 65535.
[[nodiscard]] cudaError_t segment_attention(const segment_attention_params& p, cudaStream_t stream);

}  // namespace mstar::kernels::cuda
