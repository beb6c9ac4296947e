#pragma once

// The tensor-core whole-token-row decode walk of paged attention
// (attention_walk::rows_mma, attention_decode_rows_mma.cu), launched by the
// one-pass path (attention.cu) and the split-KV path (attention_split.cu)
// for the steps `decode_rows_mma_takes` (attend_variant.hpp) accepts.

#include <cuda_runtime_api.h>

#include "kernels/cuda/internal/attend_split.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"

namespace mstar::kernels::cuda::detail {

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
