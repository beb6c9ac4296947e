#pragma once

// How the staged chunked SSD kernels (ssd_chunk_staged_*.cu) bring their
// operands into shared memory: every copy of a block's tile issued at once
// as cp.async (global -> shared without registers), so a block has all of
// its loads in flight together instead of a round trip per few elements,
// and the copies overlap whatever the block computes before it waits.
// Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {

/// 4 bytes global -> shared through L1; `src_bytes` 0 writes a zero and
/// reads nothing. For operands whose rows are not 16-byte aligned.
__device__ __forceinline__ void cp_async4(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

/// Asks L2 to fetch the 128-byte line holding `p` (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

/// Copies rows [0, Rows) x Cols floats of a global matrix (row t at
/// src + t * stride) into shared rows of Ld floats; rows at and past `n`
/// become zeros and read nothing (their source address is row 0's, which
/// is real). 16-byte copies when `vec` (src and stride 16-byte aligned),
/// else 4-byte ones. Called by the whole block; not committed.
template <int Rows, int Cols, int Ld>
__device__ __forceinline__ void stage_rows(float* dst, const float* src, std::int64_t stride, int n,
                                           bool vec) {
  static_assert(Cols % 4 == 0 && Ld % 4 == 0);
  const int tid = static_cast<int>(threadIdx.x);
  const std::uint32_t base = smem_addr(dst);
  if (vec) {
    constexpr int per = Cols / 4;
#pragma unroll 2
    for (int i = tid; i < Rows * per; i += threads) {
      const int t = i / per;
      const int c = 4 * (i % per);
      const bool real = t < n;
      cp_async16(base + static_cast<std::uint32_t>(sizeof(float) * (t * Ld + c)),
                 src + (real ? t * stride : 0) + c, real ? 16 : 0);
    }
  } else {
#pragma unroll 2
    for (int i = tid; i < Rows * Cols; i += threads) {
      const int t = i / Cols;
      const int c = i % Cols;
      const bool real = t < n;
      cp_async4(base + static_cast<std::uint32_t>(sizeof(float) * (t * Ld + c)),
                src + (real ? t * stride : 0) + c, real ? 4 : 0);
    }
  }
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
