#pragma once

// The tensor-core decode walk of paged attention (attention_walk::mma,
// attention_decode_mma.cu), launched by the one-pass path (attention.cu)
// and the split-KV path (attention_split.cu) for the steps
// `decode_mma_takes` (attend_variant.hpp) accepts.

#include <cuda_runtime_api.h>

#include "kernels/cuda/internal/attend_split.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"

namespace mstar::kernels::cuda::detail {

/// Positions a block of the kernel takes per step (4 warps x 16): split
/// chunks are multiples of it (split_args::step).
inline constexpr int decode_mma_step = 64;

/// Fewest positions a split chunk of the kernel takes (split_args::
/// min_length; min_chunk, 32, rounds up to one step), and the waves of
/// resident blocks its split aims for (the CUDA-core walks: 2). Measured
/// on the H200 (session 36, second call; 2,048 positions, 32 q / 8 kv
/// heads, D 128, graphs, us a call at 32 / 128 / 256 / 512 positions at
/// least): 1 row 13.0 / **9.4** / 15.7 / 23.8, 4 rows 20.9 / 20.9 / 18.3 /
/// **18.0** (16 / 16 / 8 / 4 splits: one wave's blocks won there), 16 rows
/// 62.8 whatever the chunk (whole-row walk's 45.2 there).
inline constexpr int decode_mma_min_chunk = 128;
inline constexpr int decode_mma_split_waves = 1;

/// Query heads one block takes for GQA group `group`: 4 (groups up to 4,
/// padded) or 8 (larger groups, in chunks of 8).
[[nodiscard]] constexpr int decode_mma_heads(int group) {
  return group <= 4 ? 4 : 8;
}

/// Calls fn.template operator()<D, GC>() for the instantiation of a
/// tensor-core decode kernel (this one, attention_decode_rows_mma.cu's)
/// that takes (head_dim, group): GC = decode_mma_heads(group), D = 64, 128
/// or, where MaxD allows, 256; false for a head_dim it does not take. Host
/// code shared by the two launchers, so they pick instantiations alike.
template <int MaxD, class Fn>
bool with_decode_mma_shape(int head_dim, int group, Fn&& fn) {
  return with_head_dim<MaxD>(head_dim, [&]<int D>() {
    if (decode_mma_heads(group) == 4)
      fn.template operator()<D, 4>();
    else
      fn.template operator()<D, 8>();
  });
}

/// Resident blocks per SM of the split kernel for (head_dim, group) on the
/// current device (the occupancy calculator, once per instantiation); 1 if
/// the runtime cannot say. head_dim 64, 128 or 256.
[[nodiscard]] int decode_mma_resident(int head_dim, int group);

/// Launches the kernel for a decode step `a` (head_dim 64, 128 or 256, bf16
/// arena): with `s` null one pass, writing a.out; else the partials of `s`
/// (s->step == decode_mma_step), for the split path's merge to read. Sets
/// a.chunks itself. cudaErrorInvalidValue for another head_dim.
[[nodiscard]] cudaError_t launch_decode_mma(attn_args a, int head_dim, const split_args* s,
                                            cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail
