// The chunked SSD scan's sequential half: each row's state carried through
// its chunks (kernels/cuda/ssd_chunked.cu has the math).
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

// Shared memory of a recurrence block, in floats: the state rows h [32][N],
// C and B of the chunk [64][N] each, xw [64][32] (x_t w_t), ys [64][32].
template <int N>
constexpr std::size_t recurrence_smem_bytes() {
  return sizeof(float) * (static_cast<std::size_t>(slice + 2 * chunk) * (N + 4) +
                          2 * static_cast<std::size_t>(chunk) * ld_p);
}

// Block (x, h, r): head-dim rows [32 x, 32 x + 32) of head h of row r,
// through the row's chunks in order. Per chunk, warp w makes the tile
// (w / 2, w % 2) of C h^T (the outputs' state term, from the old state),
// then the state tiles take e^{G_C} h + (x w)^T B.
template <int N>
__global__ void __launch_bounds__(threads) chunk_recurrence_kernel(chunk_args a) {
  constexpr int ld_n = N + 4;
  const int r = static_cast<int>(blockIdx.z);
  const int first = a.row_first[r];
  if (first < 0)
    return;
  const int h = static_cast<int>(blockIdx.y);
  const int p0 = static_cast<int>(blockIdx.x) * slice;
  const int P = a.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int g = h / a.heads_per_group;
  const std::int64_t t0 = a.cu[r];
  const int len = static_cast<int>(a.cu[r + 1] - t0);
  const int n_chunks = (len + chunk - 1) / chunk;
  extern __shared__ __align__(128) float smem[];
  float* st = smem;               // [32][ld_n]
  float* cs = st + slice * ld_n;  // [64][ld_n]
  float* bs = cs + chunk * ld_n;  // [64][ld_n]
  float* xw = bs + chunk * ld_n;  // [64][ld_p]
  float* ys = xw + chunk * ld_p;  // [64][ld_p]
  float* pool = a.state + ((std::int64_t{a.slots[r]} * a.heads + h) * P + p0) * N;
  const bool carried = a.has_state[r] != 0;
  for (int i = tid; i < slice * N / 4; i += threads) {
    const int row = i / (N / 4);
    const int col = 4 * (i % (N / 4));
    const float4 v =
        carried ? reinterpret_cast<const float4*>(pool)[i] : make_float4(0.0F, 0.0F, 0.0F, 0.0F);
    *reinterpret_cast<float4*>(st + row * ld_n + col) = v;
  }
  const std::int64_t bc0 = std::int64_t{g} * N;
  const std::int64_t x0 = std::int64_t{h} * P + p0;
  const std::int64_t y_stride = std::int64_t{a.heads} * P;
  const int ti = warp / 2;
  const int tj = warp % 2;
  for (int cc = 0; cc < n_chunks; ++cc) {
    const std::int64_t tc = t0 + std::int64_t{cc} * chunk;
    const int n = min(chunk, len - cc * chunk);
    const float* dec = a.decays + (std::int64_t{first + cc} * a.heads + h) * dec_stride;
    for (int i = tid; i < chunk * N; i += threads) {
      const int t = i / N;
      const int col = i % N;
      const bool ok = t < n;
      const std::int64_t off = (tc + t) * a.bc_stride + bc0 + col;
      cs[t * ld_n + col] = ok ? a.C[off] : 0.0F;
      bs[t * ld_n + col] = ok ? a.B[off] : 0.0F;
    }
    for (int i = tid; i < chunk * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      xw[t * ld_p + col] = t < n ? a.x[(tc + t) * a.x_stride + x0 + col] * dec[chunk + t] : 0.0F;
    }
    __syncthreads();  // also orders the state load / last update before its reads
    {
      frag_acc acc;
      wmma::fill_fragment(acc, 0.0F);
#pragma unroll 4
      for (int k0 = 0; k0 < N; k0 += 8) {
        frag_a_row fa;
        frag_b_col fb;  // h^T: element (n, p) at h[p][n]
        load_tf32(fa, cs + ti * 16 * ld_n + k0, ld_n);
        load_tf32(fb, st + tj * 16 * ld_n + k0, ld_n);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ys + ti * 16 * ld_p + tj * 16, acc, ld_p, wmma::mem_row_major);
    }
    __syncthreads();
    for (int i = tid; i < chunk * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      if (t < n)
        a.y[(tc + t) * y_stride + x0 + col] += dec[t] * ys[t * ld_p + col];
    }
    // h = gamma_C h + xw^T B: tiles [16 p][16 n], 2 * N / 16 of them.
    const float gamma_c = dec[2 * chunk];
    for (int job = warp; job < 2 * (N / 16); job += warps) {
      const int ri = job / (N / 16);
      const int ci = job % (N / 16);
      float* tile = st + ri * 16 * ld_n + ci * 16;
      frag_acc acc;
      wmma::load_matrix_sync(acc, tile, ld_n, wmma::mem_row_major);
#pragma unroll
      for (int i = 0; i < acc.num_elements; ++i)
        acc.x[i] *= gamma_c;
#pragma unroll
      for (int k0 = 0; k0 < chunk; k0 += 8) {
        frag_a_col fa;  // xw^T: element (p, t) at xw[t][p]
        frag_b_row fb;
        load_tf32(fa, xw + k0 * ld_p + ri * 16, ld_p);
        load_tf32(fb, bs + k0 * ld_n + ci * 16, ld_n);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(tile, acc, ld_n, wmma::mem_row_major);
    }
    __syncthreads();
  }
  for (int i = tid; i < slice * N / 4; i += threads) {
    const int row = i / (N / 4);
    const int col = 4 * (i % (N / 4));
    reinterpret_cast<float4*>(pool)[i] = *reinterpret_cast<const float4*>(st + row * ld_n + col);
  }
}

template <int N>
cudaError_t launch_recurrence_n(const chunk_args& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_recurrence_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(recurrence_smem_bytes<N>()));
  if (attr != cudaSuccess)
    return attr;
  const dim3 grid(static_cast<unsigned>(a.head_dim / slice), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(a.rows));
  chunk_recurrence_kernel<N><<<grid, threads, recurrence_smem_bytes<N>(), stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_recurrence(const chunk_args& a, cudaStream_t stream) {
  return a.state_size == 64 ? launch_recurrence_n<64>(a, stream)
                            : launch_recurrence_n<128>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
