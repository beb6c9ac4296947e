// The chunked gated delta rule's sequential half: each row's state carried
// through its chunks (kernels/cuda/delta_rule_chunked.cu has the math).
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_chunk.cuh"

namespace mstar::kernels::cuda::detail::chunked {
namespace {

__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

// Asks L2 for what a recurrence block reads of chunk c: W and Qe, its value
// rows of U1 and Oi, the decays, the keys (128-byte lines).
template <int K>
__device__ __forceinline__ void prefetch_chunk(const chunk_args& p, std::int64_t c, int h, int kh,
                                               int v0, int tid) {
  const int V = p.v_dim;
  const float* blob = p.blob + (c * p.hv + h) * per_head(K, V);
  const float* keys = p.keys + (c * p.hk + kh) * chunk * K;
  constexpr int wide_lines = 2 * chunk * K / 32;  // W and Qe, contiguous
  for (int i = tid; i < wide_lines; i += threads) {
    prefetch_l2(blob + 32 * i);
    if (i < wide_lines / 2)
      prefetch_l2(keys + 32 * i);
  }
  if (tid < 2 * chunk) {  // row t of U1 (tid < 64) or Oi: one line of 32 value rows
    prefetch_l2(blob + 2 * chunk * K + std::int64_t{tid} * V + v0);
  } else if (tid < 2 * chunk + 3) {
    prefetch_l2(blob + 2 * chunk * K + 2 * chunk * V + 32 * (tid - 2 * chunk));
  }
}

// Block (x, h, r): value rows [32 x, 32 x + 32) of head h of row r, through
// the row's chunks in order. Per chunk, warp w makes 16 rows of U (w < 4)
// or O (w >= 4) from the old state, then the state tiles take U's share.
template <int K>
__global__ void __launch_bounds__(threads) chunk_recurrence_kernel(chunk_args p) {
  constexpr int ld_k = K + 4;
  const int r = static_cast<int>(blockIdx.z);
  const int first = p.row_first[r];
  if (first < 0)
    return;
  const int h = static_cast<int>(blockIdx.y);
  const int v0 = static_cast<int>(blockIdx.x) * slice;
  const int V = p.v_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int kh = h / p.group;
  const std::int64_t t0 = p.cu[r];
  const int len = static_cast<int>(p.cu[r + 1] - t0);
  const int n_chunks = (len + chunk - 1) / chunk;
  __shared__ __align__(128) float s[slice * ld_k];
  __shared__ __align__(128) float ust[chunk * ld_s];
  __shared__ __align__(128) float ost[chunk * ld_s];
  float* pool = p.state + ((std::int64_t{p.slots[r]} * p.hv + h) * V + v0) * K;
  const bool carried = p.has_state[r] != 0;
  for (int i = tid; i < slice * K / 4; i += threads) {
    const int row = i / (K / 4);
    const int col = 4 * (i % (K / 4));
    const float4 v =
        carried ? reinterpret_cast<const float4*>(pool)[i] : make_float4(0.0F, 0.0F, 0.0F, 0.0F);
    *reinterpret_cast<float4*>(s + row * ld_k + col) = v;
  }
  __syncthreads();
  for (int cc = 0; cc < n_chunks; ++cc) {
    const std::int64_t c = first + cc;
    const float* blob = p.blob + (c * p.hv + h) * per_head(K, V);
    const float* keys = p.keys + (c * p.hk + kh) * chunk * K;
    const float* sc = blob + 2 * chunk * K + 2 * chunk * V;
    if (cc + 1 < n_chunks)
      prefetch_chunk<K>(p, c + 1, h, kh, v0, tid);
    {
      const int mat = warp / 4;  // 0: U = U1 - W S^T, 1: O = Oi + Qe S^T
      const int ti = warp % 4;
      const float* amat = blob + mat * chunk * K + ti * 16 * K;
      const float* cmat = blob + 2 * chunk * K + mat * chunk * V + ti * 16 * V + v0;
      frag_acc acc0;
      frag_acc acc1;
      wmma::load_matrix_sync(acc0, cmat, static_cast<unsigned>(V), wmma::mem_row_major);
      wmma::load_matrix_sync(acc1, cmat + 16, static_cast<unsigned>(V), wmma::mem_row_major);
      const float sign = mat == 0 ? -1.0F : 1.0F;
      // All of this warp's W / Qe rows in flight at once (16 fragments).
      frag_a_row fa[K / 8];
#pragma unroll
      for (int i = 0; i < K / 8; ++i)
        wmma::load_matrix_sync(fa[i], amat + 8 * i, K);
#pragma unroll
      for (int i = 0; i < K / 8; ++i) {
#pragma unroll
        for (int e = 0; e < fa[i].num_elements; ++e)
          fa[i].x[e] = wmma::__float_to_tf32(sign * fa[i].x[e]);
        frag_b_col fb0;
        frag_b_col fb1;
        load_tf32(fb0, s + 8 * i, ld_k);
        load_tf32(fb1, s + 16 * ld_k + 8 * i, ld_k);
        wmma::mma_sync(acc0, fa[i], fb0, acc0);
        wmma::mma_sync(acc1, fa[i], fb1, acc1);
      }
      float* dst = (mat == 0 ? ust : ost) + ti * 16 * ld_s;
      wmma::store_matrix_sync(dst, acc0, ld_s, wmma::mem_row_major);
      wmma::store_matrix_sync(dst + 16, acc1, ld_s, wmma::mem_row_major);
    }
    __syncthreads();
    const int n = min(chunk, len - cc * chunk);
    for (int i = tid; i < chunk * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      if (t < n)
        p.out[((t0 + cc * chunk + t) * p.hv + h) * V + v0 + col] = ost[t * ld_s + col];
      ust[t * ld_s + col] *= sc[t];
    }
    const float gamma_c = sc[chunk];
    __syncthreads();
    // S = gamma_C S + (e U)^T K.
    for (int job = warp; job < 2 * (K / 16); job += warps) {
      const int ri = job / (K / 16);
      const int ci = job % (K / 16);
      float* tile = s + ri * 16 * ld_k + ci * 16;
      frag_acc acc;
      wmma::load_matrix_sync(acc, tile, ld_k, wmma::mem_row_major);
#pragma unroll
      for (int i = 0; i < acc.num_elements; ++i)
        acc.x[i] *= gamma_c;
#pragma unroll
      for (int k0 = 0; k0 < chunk; k0 += 8) {
        frag_a_col fa;
        frag_b_row fb;
        load_tf32(fa, ust + k0 * ld_s + ri * 16, ld_s);
        load_tf32(fb, keys + k0 * K + ci * 16, K);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(tile, acc, ld_k, wmma::mem_row_major);
    }
    __syncthreads();
  }
  for (int i = tid; i < slice * K / 4; i += threads) {
    const int row = i / (K / 4);
    const int col = 4 * (i % (K / 4));
    reinterpret_cast<float4*>(pool)[i] = *reinterpret_cast<const float4*>(s + row * ld_k + col);
  }
}

template <int K>
cudaError_t launch_recurrence_k(const chunk_args& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.v_dim / slice), static_cast<unsigned>(a.hv),
                  static_cast<unsigned>(a.rows));
  chunk_recurrence_kernel<K><<<grid, threads, 0, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_recurrence(const chunk_args& a, int k, cudaStream_t stream) {
  return k == 64 ? launch_recurrence_k<64>(a, stream) : launch_recurrence_k<128>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::chunked
