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
