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
/// min_length), where the CUDA-core walks take min_chunk: a block takes
/// every kv head of its positions, so a chunk carries 32 heads x (D + 2)
/// floats of partials at 8 kv heads x group 4. Measured on the H200
/// (session 36, second call; 2,048 positions, 32 q / 8 kv heads, D 128,
/// graphs, us a call at 16 / 64 / 128 / 256 positions at least): 16 rows
/// 50.1 / 50.5 / **45.2** / 56.7, 4 rows 23.8 / 20.9 / 28.5 / 50.6, 1 row
/// 14.2 / 20.0 / 28.4 / 50.4. The kernel was the default from 16 rows, so
/// 128; below 16 rows (and since session 58 from 16 where its bulk copies
/// fit) the tensor-core walk of attend_decode_mma.cuh runs.
inline constexpr int decode_rows_mma_min_chunk = 128;

/// The waves of resident blocks this kernel's split aims for (the CUDA-core
/// walks: 2): one, so at 64 rows of 2,048 positions (32 q / 8 kv heads, D
/// 128) its 64 row blocks split in 4 (256 blocks, one wave at two an SM)
/// rather than 8. Measured on an H100 (session 52's call2, graphs, us a
/// call): 201.9 against 206.1 / 206.2 with 8; 16 rows keep 16 (the length
/// rule), 256 rows no split.
inline constexpr int decode_rows_mma_split_waves = 1;

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
