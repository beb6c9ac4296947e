// The chunked gated delta rule's outputs: per (chunk, value head)
// O = Oi + Qe S_c^T, S_c the state chunk_recurrence stored for the chunk's
// start (kernels/cuda/delta_rule_chunked.cu has the math). Every chunk at
// once, after the walk.
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_chunk.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"

namespace mstar::kernels::cuda::detail::chunked {
namespace {

// Qe [64][K + 4], S_c [V <= K][K + 4].
template <int K>
constexpr std::size_t output_smem_bytes() {
  return sizeof(float) * (chunk + K) * (K + 4);
}

// Block b: value head b % HV of chunk n_chunks - 1 - b / HV (the latest
// chunks first: their states are the likeliest still in L2), Qe and S_c
// staged in shared memory.
template <int K>
__global__ void __launch_bounds__(threads, 2) chunk_output_kernel(chunk_args p) {
  constexpr int ld_k = K + 4;
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

  // Warp w: tokens [16 (w / 2), +16) by value columns [(w % 2) V / 2, +V / 2)
  // in 8-column mma tiles, accumulating on Oi.
  constexpr int max_tiles = K / 16;
  const tf32::lane_at ln(tid % 32);
  const int ti = warp / 2;
  const int tiles = V / 16;
  const int col0 = (warp % 2) * (V / 2);
  const int row = ti * 16 + ln.g;  // the lane's first token; its second is row + 8
  float acc[max_tiles][4];
  const float* oi = blob + oi_at(K, V) + std::int64_t{row} * V + col0 + 2 * ln.q;
#pragma unroll
  for (int nt = 0; nt < max_tiles; ++nt) {
    if (nt < tiles) {
      const float2 lo = *reinterpret_cast<const float2*>(oi + nt * 8);
      const float2 hi = *reinterpret_cast<const float2*>(oi + 8 * V + nt * 8);
      acc[nt][0] = lo.x;
      acc[nt][1] = lo.y;
      acc[nt][2] = hi.x;
      acc[nt][3] = hi.y;
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  const float* qa = tf32::a_base<ld_k, 1>(qe + ti * 16 * ld_k, ln);
  // B(k, n) = S_c[n][k]: the state's value rows are O's columns.
  const float* sb = tf32::b_base<1, ld_k>(st + col0 * ld_k, ln);
#pragma unroll 4
  for (int k0 = 0; k0 < K; k0 += 8) {
    std::uint32_t fa[4];
    tf32::load_a<ld_k, 1>(fa, qa + k0);
#pragma unroll
    for (int nt = 0; nt < max_tiles; ++nt) {
      if (nt < tiles) {
        std::uint32_t fb[2];
        tf32::load_b<1, ld_k>(fb, sb + nt * 8 * ld_k + k0);
        tf32::mma(acc[nt], fa, fb);
      }
    }
  }
  // O straight from the fragments; tokens past the row's end dropped.
  const std::int64_t ld_out = std::int64_t{p.hv} * V;
  float* out = p.out + (t0 * p.hv + h) * V + col0 + 2 * ln.q;
#pragma unroll
  for (int nt = 0; nt < max_tiles; ++nt) {
    if (nt < tiles) {
      if (row < n)
        *reinterpret_cast<float2*>(out + row * ld_out + nt * 8) =
            make_float2(acc[nt][0], acc[nt][1]);
      if (row + 8 < n) {
        *reinterpret_cast<float2*>(out + (row + 8) * ld_out + nt * 8) =
            make_float2(acc[nt][2], acc[nt][3]);
      }
    }
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
