#pragma once

// The tensor-core whole-token-row decode walk of paged attention
// (attention_walk::rows_mma, attention_decode_rows_mma.cu), launched by the
// one-pass path (attention.cu) and the split-KV path (attention_split.cu)
// for the steps `decode_rows_mma_takes` (attend_variant.hpp) accepts.

#include <cuda_runtime_api.h>

#include "kernels/cuda/internal/attend_split.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"

namespace mstar::kernels::cuda::detail {

/// Fewest positions a split chunk of this kernel takes (split_args::
/// min_length), where the others take min_chunk: a block takes every kv
/// head of its positions, so its partials (32 heads x (D + 2) floats at 8
/// kv heads x group 4) stay ~1/4 of its K/V reads at 16 positions, and a
/// single row of 2,048 positions fills 128 blocks instead of 64. A guess
/// from that arithmetic, not measured against 32 (at one row the walk
/// took 14.0 us against the register walk's 12.0 on the H200, session 35).
inline constexpr int decode_rows_mma_min_chunk = 16;

/// Resident blocks per SM of the kernel at this shape on the current
/// device (the occupancy calculator, cached); 1 if the runtime cannot say.
[[nodiscard]] int decode_rows_mma_resident(int head_dim, int group, const decode_rows_shape& shape);

/// Launches the kernel for a decode step `a` (bf16 arena, a shape
/// decode_rows_mma_shape_of takes): with `s` null one pass, writing a.out;
/// else the partials of `s` (s->step == shape.tile), for the split path's
/// merge to read. cudaErrorInvalidValue for a shape it does not take.
[[nodiscard]] cudaError_t launch_decode_rows_mma(attn_args a, int head_dim, const split_args* s,
                                                 cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail
