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
#include "kernels/cuda/internal/mma_tf32.cuh"
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

/// acc[j][e] += A B over k in [0, k_end) (a multiple of 8) for one warp's
/// 16-row tile and NT 8-column tiles, A(m, k) = x[k][m] w_k (the token's
/// weight folded in as the fragment is loaded: the f32 product, then TF32
/// rounding) and B(k, n) = B[k][n]; `xa` and `bb` are the lane's fragment
/// bases (tf32::a_base / b_base over rows of LdX and LdB floats), `wq` the
/// token weights at the lane's q. KS accumulators a column tile take
/// consecutive k steps so the mma's do not wait on one another; the caller
/// sums them. The state kernels of ssd_chunk_staged.cu and
/// ssd_chunk_walk.cu make their (x w)^T B products here.
template <int LdX, int LdB, int NT, int KS>
__device__ __forceinline__ void weighted_xt_b(const float* xa, const float* bb, const float* wq,
                                              int k_end, float (&acc)[NT][KS][4]) {
#pragma unroll 2
  for (int k0 = 0; k0 < k_end; k0 += 8 * KS) {
#pragma unroll
    for (int e = 0; e < KS; ++e) {
      const int k = k0 + 8 * e;
      if (e == 0 || k < k_end) {
        const float* xp = xa + k * LdX;
        const float w0 = wq[k];
        const float w1 = wq[k + 4];
        const std::uint32_t fa[4] = {tf32::bits(xp[0] * w0), tf32::bits(xp[8] * w0),
                                     tf32::bits(xp[4 * LdX] * w1),
                                     tf32::bits(xp[4 * LdX + 8] * w1)};
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          std::uint32_t fb[2];
          tf32::load_b<LdB, 1>(fb, bb + k * LdB + j * 8);
          tf32::mma(acc[j][e], fa, fb);
        }
      }
    }
  }
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
