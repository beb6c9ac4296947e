// The chunked gated delta rule's outputs: per (chunk, value head)
// O = Oi + Qe S_c^T, S_c the state chunk_recurrence stored for the chunk's
// start (kernels/cuda/delta_rule_chunked.cu has the math). Every chunk at
// once, after the walk.
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_chunk.cuh"

namespace mstar::kernels::cuda::detail::chunked {
namespace {

// Qe (later O) [64][K + 4], S_c [V <= K][K + 4].
template <int K>
constexpr std::size_t output_smem_bytes() {
  return sizeof(float) * (chunk + K) * (K + 4);
}

// Block b: value head b % HV of chunk n_chunks - 1 - b / HV (the latest
// chunks first: their states are the likeliest still in L2). Warp w makes
// tokens [16 (w / 2), +16) by value columns [(w % 2) V / 2, +V / 2), V / 32
// tiles of 16, with Qe and S_c staged in shared memory; O goes out through
// shared memory, rows past the row's end dropped.
template <int K>
__global__ void __launch_bounds__(threads, 2) chunk_output_kernel(chunk_args p) {
  constexpr int ld_k = K + 4;
  constexpr int max_tiles = K / 32;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.hv));
  const int c = *p.n_chunks - 1 - static_cast<int>(blockIdx.x / static_cast<unsigned>(p.hv));
  if (c < 0)
    return;
  const int V = p.v_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int2 entry = p.table[c];
  const std::int64_t t0 = std::int64_t{p.cu[entry.x]} + std::int64_t{chunk} * entry.y;
  const int n = min(chunk, static_cast<int>(p.cu[entry.x + 1] - t0));
  extern __shared__ __align__(128) float smem[];
  float* qe = smem;
  float* st = smem + chunk * ld_k;
  const std::int64_t ch = std::int64_t{c} * p.hv + h;
  const float* blob = p.blob + ch * per_head(K, V);
  stage_rows<threads>(qe, ld_k, blob + qe_at(K), K, chunk, K, tid);
  stage_rows<threads>(st, ld_k, p.states + ch * V * K, K, V, K, tid);
  cp_async_commit();

  const int ti = warp / 2;
  const int tiles = V / 32;
  const int tj0 = (warp % 2) * tiles;
  frag_acc acc[max_tiles];
  const float* oi = blob + oi_at(K, V) + ti * 16 * V;
#pragma unroll
  for (int j = 0; j < max_tiles; ++j) {
    if (j < tiles)
      wmma::load_matrix_sync(acc[j], oi + (tj0 + j) * 16, static_cast<unsigned>(V),
                             wmma::mem_row_major);
  }
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll 4
  for (int k0 = 0; k0 < K; k0 += 8) {
    frag_a_row fa;
    load_tf32(fa, qe + ti * 16 * ld_k + k0, ld_k);
#pragma unroll
    for (int j = 0; j < max_tiles; ++j) {
      if (j < tiles) {
        frag_b_col fb;
        load_tf32(fb, st + (tj0 + j) * 16 * ld_k + k0, ld_k);
        wmma::mma_sync(acc[j], fa, fb, acc[j]);
      }
    }
  }
  __syncthreads();  // Qe read
#pragma unroll
  for (int j = 0; j < max_tiles; ++j) {
    if (j < tiles) {
      wmma::store_matrix_sync(qe + ti * 16 * ld_k + (tj0 + j) * 16, acc[j], ld_k,
                              wmma::mem_row_major);
    }
  }
  __syncthreads();
  float* out = p.out + (t0 * p.hv + h) * V;
  const std::int64_t ld_out = std::int64_t{p.hv} * V;
  for (int i = tid; i < n * V; i += threads) {
    const int t = i / V;
    const int col = i % V;
    out[t * ld_out + col] = qe[t * ld_k + col];
  }
}

template <int K>
cudaError_t launch_output_k(const chunk_args& a, cudaStream_t stream) {
  constexpr std::size_t bytes = output_smem_bytes<K>();
  static const cudaError_t attr = cudaFuncSetAttribute(
      chunk_output_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (attr != cudaSuccess)
    return attr;
  const std::int64_t blocks = std::int64_t{a.capacity} * a.hv;
  if (blocks > 0x7fffffff)
    return cudaErrorInvalidConfiguration;
  chunk_output_kernel<K><<<static_cast<unsigned>(blocks), threads, bytes, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_output(const chunk_args& a, int k, cudaStream_t stream) {
  return k == 64 ? launch_output_k<64>(a, stream) : launch_output_k<128>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::chunked
