// The chunked gated delta rule's sequential half: each row's state carried
// through its chunks (kernels/cuda/delta_rule_chunked.cu has the math). Per
// chunk only the state's two products, U' = e U1 - (e W) S^T and
// S = gamma_C S + U'^T K; the state each chunk starts from is stored for
// chunk_output (delta_rule_chunk_output.cu), which makes the outputs.
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_chunk.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"

namespace mstar::kernels::cuda::detail::chunked {
namespace {

// Shared memory of a recurrence block, in floats: the state slice, U', and
// per stage e W, the keys, the block's value rows of e U1.
template <int K, int Stages>
struct walk_smem {
  static constexpr int ld_k = K + 4;
  static constexpr int s = 0;                           // [32][ld_k]
  static constexpr int u = s + slice * ld_k;            // [64][ld_s]
  static constexpr int w = u + chunk * ld_s;            // [Stages][64][ld_k]
  static constexpr int k = w + Stages * chunk * ld_k;   // [Stages][64][ld_k]
  static constexpr int u1 = k + Stages * chunk * ld_k;  // [Stages][64][ld_s]
  static constexpr int floats = u1 + Stages * chunk * ld_s;
  static constexpr std::size_t bytes = sizeof(float) * floats;
};

// Asks L2 for what a block will stage of chunk c: e W, the keys, its value
// rows of e U1 (128-byte lines).
template <int K>
__device__ __forceinline__ void prefetch_chunk(const chunk_args& p, std::int64_t c, int h, int kh,
                                               int v0, int tid) {
  const int V = p.v_dim;
  const float* blob = p.blob + (c * p.hv + h) * per_head(K, V);
  const float* keys = p.keys + (c * p.hk + kh) * chunk * K;
  constexpr int lines = chunk * K / 32;
  for (int i = tid; i < lines; i += threads) {
    prefetch_l2(blob + 32 * i);
    prefetch_l2(keys + 32 * i);
  }
  if (tid < chunk)
    prefetch_l2(blob + u1_at(K) + std::int64_t{tid} * V + v0);
}

// Chunk c's e W and value rows [v0, v0 + 32) of e U1 into stage b.
template <int K, int Stages>
__device__ __forceinline__ void stage_w(const chunk_args& p, float* smem, int b, std::int64_t c,
                                        int h, int v0, int tid) {
  using L = walk_smem<K, Stages>;
  const float* blob = p.blob + (c * p.hv + h) * per_head(K, p.v_dim);
  stage_rows<threads>(smem + L::w + b * chunk * L::ld_k, L::ld_k, blob, K, chunk, K, tid);
  stage_rows<threads>(smem + L::u1 + b * chunk * ld_s, ld_s, blob + u1_at(K) + v0, p.v_dim, chunk,
                      slice, tid);
}

// Chunk c's normalised keys into stage b.
template <int K, int Stages>
__device__ __forceinline__ void stage_keys(const chunk_args& p, float* smem, int b, std::int64_t c,
                                           int kh, int tid) {
  using L = walk_smem<K, Stages>;
  stage_rows<threads>(smem + L::k + b * chunk * L::ld_k, L::ld_k,
                      p.keys + (c * p.hk + kh) * chunk * K, K, chunk, K, tid);
}

__device__ __forceinline__ float gamma_of(const chunk_args& p, std::int64_t c, int h, int k) {
  return load_coherent(p.blob + (c * p.hv + h) * per_head(k, p.v_dim) + tail_at(k, p.v_dim) +
                       chunk);
}

// Block (x, h, r): value rows [32 x, 32 x + 32) of head h of row r, through
// the row's chunks in order, the state slice in shared memory (f32). Chunk
// c's operands are staged with cp.async `Stages` chunks ahead: e W and e U1
// once phase 1 of chunk c - Stages is done with their buffers, the keys once
// its phase 2 is. Per chunk: the starting state stored; phase 1, warp w
// makes a 16 x 16 tile of U' (16 tokens, 16 value rows); phase 2, warp w
// K / 64 tiles of the new state. Two barriers a chunk.
template <int K, int Stages>
__global__ void __launch_bounds__(threads, 3 - Stages) chunk_recurrence_kernel(chunk_args p) {
  using L = walk_smem<K, Stages>;
  constexpr int ld_k = L::ld_k;
  const int r = static_cast<int>(blockIdx.z);
  const int first = p.row_first[r];
  if (first < 0)
    return;
  const int h = static_cast<int>(blockIdx.y);
  const int v0 = static_cast<int>(blockIdx.x) * slice;
  const int V = p.v_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const tf32::lane_at ln(tid % 32);
  const int kh = h / p.group;
  const int len = static_cast<int>(p.cu[r + 1] - p.cu[r]);
  const int n_chunks = (len + chunk - 1) / chunk;
  extern __shared__ __align__(128) float smem[];
  float* s = smem + L::s;
  float* ust = smem + L::u;
  float* pool = p.state + ((std::int64_t{p.slots[r]} * p.hv + h) * V + v0) * K;
  const bool carried = p.has_state[r] != 0;

  // Chunk 0's operands (and chunk 1's with two stages), then the state.
  stage_w<K, Stages>(p, smem, 0, first, h, v0, tid);
  stage_keys<K, Stages>(p, smem, 0, first, kh, tid);
  cp_async_commit();
  if constexpr (Stages == 2) {
    if (n_chunks > 1) {
      stage_w<K, Stages>(p, smem, 1, first + 1, h, v0, tid);
      stage_keys<K, Stages>(p, smem, 1, first + 1, kh, tid);
    }
    cp_async_commit();
  }
  float gamma_next = gamma_of(p, first, h, K);
  for (int i = tid; i < slice * K / 4; i += threads) {
    const int row = i / (K / 4);
    const int col = 4 * (i % (K / 4));
    const float4 v =
        carried ? reinterpret_cast<const float4*>(pool)[i] : make_float4(0.0F, 0.0F, 0.0F, 0.0F);
    *reinterpret_cast<float4*>(s + row * ld_k + col) = v;
  }
  if constexpr (Stages == 2)
    cp_async_wait<1>();
  else
    cp_async_wait<0>();
  __syncthreads();

  for (int cc = 0; cc < n_chunks; ++cc) {
    const std::int64_t c = first + cc;
    const int b = Stages == 2 ? cc % 2 : 0;
    const float gamma_c = gamma_next;
    if (cc + 1 < n_chunks)
      gamma_next = gamma_of(p, c + 1, h, K);
    if (cc + Stages + 1 < n_chunks)
      prefetch_chunk<K>(p, c + Stages + 1, h, kh, v0, tid);
    // The state this chunk starts from (rows v0.. of head h: contiguous).
    float* start = p.states + ((c * p.hv + h) * V + v0) * K;
    for (int i = tid; i < slice * K / 4; i += threads) {
      const int row = i / (K / 4);
      const int col = 4 * (i % (K / 4));
      reinterpret_cast<float4*>(start)[i] = *reinterpret_cast<const float4*>(s + row * ld_k + col);
    }
    // Phase 1: U' = e U1 - (e W) S^T, warp w the 16 x 16 tile (w / 2, w % 2):
    // two 8-column mma tiles, even and odd k steps in separate accumulators.
    {
      const int ti = warp / 2;
      const int tj = warp % 2;
      const float* wa = tf32::a_base<ld_k, 1>(smem + L::w + b * chunk * ld_k + ti * 16 * ld_k, ln);
      // B(k, n) = S[n][k]: the state's value rows are U's columns.
      const float* sb = tf32::b_base<1, ld_k>(s + tj * 16 * ld_k, ln);
      float acc[2][2][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          std::uint32_t fa[4];
          tf32::load_a<ld_k, 1>(fa, wa + k0 + 8 * e);
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            std::uint32_t fb[2];
            tf32::load_b<1, ld_k>(fb, sb + nt * 8 * ld_k + k0 + 8 * e);
            tf32::mma(acc[nt][e], fa, fb);
          }
        }
      }
      const int at = ti * 16 * ld_s + tj * 16;
      const float* u1 = tf32::c_base<ld_s>(smem + L::u1 + b * chunk * ld_s + at, ln);
      float* uo = tf32::c_base<ld_s>(ust + at, ln);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        float u[4];
        tf32::load_c<ld_s>(u, u1 + nt * 8);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          u[i] -= acc[nt][0][i] + acc[nt][1][i];
        tf32::store_c<ld_s>(uo + nt * 8, u);
      }
    }
    if constexpr (Stages == 1)
      cp_async_wait<0>();  // this chunk's keys
    __syncthreads();       // U' whole; stage b's e W, e U1 read
    if (cc + Stages < n_chunks)
      stage_w<K, Stages>(p, smem, b, c + Stages, h, v0, tid);
    cp_async_commit();
    // Phase 2: S = gamma_C S + U'^T K; warp w: value rows 16 (w / 4), K / 4
    // columns from (w % 4) K / 4, in 8-column mma tiles.
    {
      constexpr int tiles = K / 32;
      const int ri = warp / 4;
      const int c0 = (warp % 4) * (K / 4);
      // A(m, k) = U'[k][m]: U's columns are the state's rows.
      const float* ua = tf32::a_base<1, ld_s>(ust + ri * 16, ln);
      const float* kb = tf32::b_base<ld_k, 1>(smem + L::k + b * chunk * ld_k + c0, ln);
      float* sc = tf32::c_base<ld_k>(s + ri * 16 * ld_k + c0, ln);
      float acc[tiles][4];
#pragma unroll
      for (int nt = 0; nt < tiles; ++nt)
        tf32::load_c<ld_k>(acc[nt], sc + nt * 8, gamma_c);
#pragma unroll
      for (int k0 = 0; k0 < chunk; k0 += 8) {
        std::uint32_t fa[4];
        tf32::load_a<1, ld_s>(fa, ua + k0 * ld_s);
#pragma unroll
        for (int nt = 0; nt < tiles; ++nt) {
          std::uint32_t fb[2];
          tf32::load_b<ld_k, 1>(fb, kb + k0 * ld_k + nt * 8);
          tf32::mma(acc[nt], fa, fb);
        }
      }
#pragma unroll
      for (int nt = 0; nt < tiles; ++nt)
        tf32::store_c<ld_k>(sc + nt * 8, acc[nt]);
    }
    // The next chunk's operands: with one stage its e W / e U1 (staged after
    // the barrier above), with two everything (staged a chunk earlier).
    if constexpr (Stages == 2)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
    __syncthreads();  // S whole; stage b's keys read
    if (cc + Stages < n_chunks)
      stage_keys<K, Stages>(p, smem, b, c + Stages, kh, tid);
    cp_async_commit();
  }
  for (int i = tid; i < slice * K / 4; i += threads) {
    const int row = i / (K / 4);
    const int col = 4 * (i % (K / 4));
    reinterpret_cast<float4*>(pool)[i] = *reinterpret_cast<const float4*>(s + row * ld_k + col);
  }
}

template <int K, int Stages>
cudaError_t launch_recurrence_k(const chunk_args& a, cudaStream_t stream) {
  constexpr std::size_t bytes = walk_smem<K, Stages>::bytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_recurrence_kernel<K, Stages>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (attr != cudaSuccess)
    return attr;
  const dim3 grid(static_cast<unsigned>(a.v_dim / slice), static_cast<unsigned>(a.hv),
                  static_cast<unsigned>(a.rows));
  chunk_recurrence_kernel<K, Stages><<<grid, threads, bytes, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_recurrence(const chunk_args& a, int k, bool deep, cudaStream_t stream) {
  if (k == 64)
    return deep ? launch_recurrence_k<64, 2>(a, stream) : launch_recurrence_k<64, 1>(a, stream);
  return deep ? launch_recurrence_k<128, 2>(a, stream) : launch_recurrence_k<128, 1>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::chunked
