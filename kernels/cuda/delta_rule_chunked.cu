// The gated delta rule in chunks of 64 tokens on TF32 tensor cores
// (kernels/cuda/delta_rule.hpp's workspace overload).
//
// Per value head and chunk (tokens t = 1..C, state S0 [V][K] at its start),
// with g_t the log decays, G_t their running sum inside the chunk,
// gamma_t = exp(G_t), k and q L2-normalised (q scaled), the rule's
// u_t = beta_t (v_t - decay_t S_{t-1} k_t) unrolls to
//   u_t = beta_t (v_t - gamma_t S0 k_t - sum_{i<t} e^{G_t - G_i} (k_t . k_i) u_i),
// that is (I + A) U = diag(beta) V - diag(beta gamma) K S0^T with A strictly
// lower, A_ti = beta_t e^{G_t - G_i} k_t . k_i. So U = U1 - W S0^T with
//   W = (I + A)^-1 diag(beta gamma) K,   U1 = (I + A)^-1 diag(beta) V.
// The outputs o_t = gamma_t S0 q_t + sum_{i<=t} e^{G_t - G_i} (q_t . k_i) u_i:
//   O = Oi + Qe S0^T,  P = lower-with-diagonal(e^{G_t - G_i} q_t . k_i),
//   Oi = P U1,  Qe = diag(gamma) Q - P W,
// and the next state S1 = gamma_C S0 + (diag(e^{G_C - G}) U)^T K.
// Only the products with S0 depend on the state: `chunk_prepare` makes W,
// U1, Qe, Oi of every (chunk, value head) in parallel (products on tensor
// cores, the unit-triangular solve in f32 FMAs); `chunk_recurrence` walks a
// row's chunks in order per (value head, 32 value rows), S in shared memory.
#include <algorithm>
#include <cstdint>
#include <mma.h>

#include "kernels/cuda/delta_rule.hpp"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_scan.hpp"

namespace mstar::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int chunk = 64;
constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int slice = 32;        // value rows per recurrence block
constexpr int ld_c = chunk + 4;  // shared [64][64] matrices
constexpr int ld_s = slice + 4;  // shared [64][32] staging
constexpr unsigned full_mask = 0xffffffffU;

struct chunk_args {
  const float* a_log;
  const float* dt_bias;
  int hk, hv, v_dim, group;
  float scale;
  const float* qkv;
  std::int64_t qkv_stride;
  const float* a;
  const float* b;
  std::int64_t ab_stride;
  float* out;
  const std::int32_t* cu;
  float* state;
  const std::int32_t* slots;
  const std::uint8_t* has_state;
  int rows, chunked_from, capacity;
  std::int32_t* row_first;  // [R]: the row's first chunk, -1 when it is not chunked
  std::int32_t* n_chunks;   // [1]: chunks in the table
  int2* table;              // [capacity]: (row, chunk of the row)
  float* blob;              // [capacity][HV][per_head]: W, Qe, U1, Oi, then e^{G_C-G_t}, gamma_C
  float* keys;              // [capacity][HK][64][K]: normalised k
};

__host__ __device__ constexpr std::int64_t per_head(int k, int v) {
  return 2 * chunk * std::int64_t{k} + 2 * chunk * std::int64_t{v} + 128;
}

using frag_acc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
using frag_a_row =
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using frag_a_col =
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using frag_b_row =
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using frag_b_col =
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;

template <class Frag>
__device__ __forceinline__ void load_tf32(Frag& f, const float* src, int ld, float sign = 1.0F) {
  wmma::load_matrix_sync(f, src, static_cast<unsigned>(ld));
#pragma unroll
  for (int i = 0; i < f.num_elements; ++i)
    f.x[i] = wmma::__float_to_tf32(sign * f.x[i]);
}

// One warp: every row's chunk count, a prefix sum, the (row, chunk) table.
// A row that would overflow the table (a wrong `tokens`) stays sequential.
__global__ void chunk_table_kernel(chunk_args p) {
  const int lane = static_cast<int>(threadIdx.x);
  int running = 0;
  int used = 0;
  for (int base = 0; base < p.rows; base += 32) {
    const int r = base + lane;
    int n = 0;
    if (r < p.rows) {
      const int len = p.cu[r + 1] - p.cu[r];
      if (p.slots[r] >= 0 && len >= p.chunked_from)
        n = (len + chunk - 1) / chunk;
    }
    int incl = n;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = __shfl_up_sync(full_mask, incl, off);
      if (lane >= off)
        incl += y;
    }
    const int first = running + incl - n;
    const bool fits = n > 0 && first + n <= p.capacity;
    if (r < p.rows)
      p.row_first[r] = fits ? first : -1;
    used = max(used, fits ? first + n : 0);
    for (int i = 0; i < 32; ++i) {
      const int fi = __shfl_sync(full_mask, fits ? first : -1, i);
      const int ni = __shfl_sync(full_mask, n, i);
      for (int j = lane; fi >= 0 && j < ni; j += 32)
        p.table[fi + j] = make_int2(base + i, j);
    }
    running += __shfl_sync(full_mask, incl, 31);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
    used = max(used, __shfl_xor_sync(full_mask, used, off));
  if (lane == 0)
    *p.n_chunks = used;
}

template <int K>
constexpr std::size_t prepare_smem_bytes() {
  return sizeof(float) * (2 * chunk * (K + 4) + 2 * chunk * ld_c + 3 * chunk);
}

// Block (c, h): chunk c of the table, value head h. Shared: normalised k
// (later W), normalised q (later U1), A, P, G, beta, beta * gamma.
template <int K>
__global__ void __launch_bounds__(threads, 2) chunk_prepare_kernel(chunk_args p) {
  constexpr int ld_k = K + 4;
  const int c = static_cast<int>(blockIdx.x);
  if (c >= *p.n_chunks)
    return;
  const int h = static_cast<int>(blockIdx.y);
  const int kh = h / p.group;
  const int V = p.v_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int2 entry = p.table[c];
  const std::int64_t t0 = std::int64_t{p.cu[entry.x]} + std::int64_t{chunk} * entry.y;
  const int n = min(chunk, static_cast<int>(p.cu[entry.x + 1] - t0));
  extern __shared__ __align__(128) float smem[];
  float* kn = smem;
  float* qn = kn + chunk * ld_k;
  float* am = qn + chunk * ld_k;
  float* pm = am + chunk * ld_c;
  float* gs = pm + chunk * ld_c;
  float* bs = gs + chunk;
  float* bg = bs + chunk;
  float* blob = p.blob + (std::int64_t{c} * p.hv + h) * per_head(K, V);
  float* w_g = blob;
  float* qe_g = blob + chunk * K;
  float* u1_g = blob + 2 * chunk * K;
  float* oi_g = u1_g + chunk * V;
  float* sc_g = oi_g + chunk * V;
  float* keys = p.keys + (std::int64_t{c} * p.hk + kh) * chunk * K;

  if (tid < chunk) {
    float g = 0.0F;
    float beta = 0.0F;
    if (tid < n) {
      const std::int64_t t = t0 + tid;
      const float x = p.a[t * p.ab_stride + h] + p.dt_bias[h];
      g = -expf(p.a_log[h]) * (x > 20.0F ? x : log1pf(expf(x)));
      beta = 1.0F / (1.0F + expf(-p.b[t * p.ab_stride + h]));
    }
    gs[tid] = g;
    bs[tid] = beta;
  }
  __syncthreads();
  float cum = 0.0F;
  if (tid < chunk) {
    for (int i = 0; i <= tid; ++i)
      cum += gs[i];
  }
  __syncthreads();
  if (tid < chunk) {
    gs[tid] = cum;
    bg[tid] = bs[tid] * expf(cum);
  }
  __syncthreads();
  if (tid < chunk)
    sc_g[tid] = expf(gs[chunk - 1] - gs[tid]);
  else if (tid == chunk)
    sc_g[chunk] = expf(gs[chunk - 1]);

  // Normalised k and q (a warp per token), gamma q as Qe's first term.
  // Every load of a warp's 8 tokens is issued before the first is used.
  constexpr int per_lane = K / 32;
  constexpr int tokens_per_warp = chunk / warps;
  float qv[tokens_per_warp][per_lane];
  float kv[tokens_per_warp][per_lane];
#pragma unroll
  for (int i = 0; i < tokens_per_warp; ++i) {
    const int t = warp + i * warps;
    const float* row = p.qkv + (t0 + t) * p.qkv_stride;
#pragma unroll
    for (int j = 0; j < per_lane; ++j) {
      qv[i][j] = t < n ? row[kh * K + lane + 32 * j] : 0.0F;
      kv[i][j] = t < n ? row[(p.hk + kh) * K + lane + 32 * j] : 0.0F;
    }
  }
#pragma unroll
  for (int i = 0; i < tokens_per_warp; ++i) {
    const int t = warp + i * warps;
    float qq = 0.0F;
    float kk = 0.0F;
#pragma unroll
    for (int j = 0; j < per_lane; ++j) {
      qq = fmaf(qv[i][j], qv[i][j], qq);
      kk = fmaf(kv[i][j], kv[i][j], kk);
    }
    const float iq = p.scale / sqrtf(detail::group_sum(qq) + 1e-6F);
    const float ik = 1.0F / sqrtf(detail::group_sum(kk) + 1e-6F);
    const float gamma = expf(gs[t]);
#pragma unroll
    for (int j = 0; j < per_lane; ++j) {
      const int col = lane + 32 * j;
      kn[t * ld_k + col] = kv[i][j] * ik;
      qn[t * ld_k + col] = qv[i][j] * iq;
      qe_g[t * K + col] = gamma * (qv[i][j] * iq);
      if (h % p.group == 0)
        keys[t * K + col] = kv[i][j] * ik;
    }
  }
  __syncthreads();

  // K K^T and Q K^T, lower 16 x 16 tiles (10 of 16 each).
  for (int job = warp; job < 20; job += warps) {
    const bool is_p = job >= 10;
    int idx = job % 10;
    int ti = 0;
    while (idx > ti) {
      idx -= ti + 1;
      ++ti;
    }
    const int tj = idx;
    frag_acc acc;
    wmma::fill_fragment(acc, 0.0F);
    const float* arow = (is_p ? qn : kn) + ti * 16 * ld_k;
    const float* brow = kn + tj * 16 * ld_k;
#pragma unroll 4
    for (int k0 = 0; k0 < K; k0 += 8) {
      frag_a_row fa;
      frag_b_col fb;
      load_tf32(fa, arow + k0, ld_k);
      load_tf32(fb, brow + k0, ld_k);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    // A transposed (am[s][t] = A[t][s]) for the solve's column sweeps.
    if (is_p)
      wmma::store_matrix_sync(pm + ti * 16 * ld_c + tj * 16, acc, ld_c, wmma::mem_row_major);
    else
      wmma::store_matrix_sync(am + tj * 16 * ld_c + ti * 16, acc, ld_c, wmma::mem_col_major);
  }
  __syncthreads();
  for (int i = tid; i < chunk * chunk; i += threads) {
    const int hi = i / chunk;
    const int lo = i % chunk;
    // P[hi][lo], lower with the diagonal; A^T[hi][lo] = A[lo][hi], A strictly lower.
    pm[hi * ld_c + lo] = lo <= hi ? expf(gs[hi] - gs[lo]) * pm[hi * ld_c + lo] : 0.0F;
    am[hi * ld_c + lo] = hi < lo ? bs[lo] * expf(gs[lo] - gs[hi]) * am[hi * ld_c + lo] : 0.0F;
  }
  __syncthreads();

  // (I + A) X = [diag(beta gamma) K | diag(beta) V], a column per thread.
  const int j = tid;
  float x[chunk];
  if (j < K) {
#pragma unroll
    for (int t = 0; t < chunk; ++t)
      x[t] = bg[t] * kn[t * ld_k + j];
  } else if (j < K + V) {
    const float* v =
        p.qkv + t0 * p.qkv_stride + 2 * std::int64_t{p.hk} * K + std::int64_t{h} * V + (j - K);
#pragma unroll
    for (int t = 0; t < chunk; ++t)
      x[t] = t < n ? bs[t] * v[t * p.qkv_stride] : 0.0F;
  }
  // Column sweeps: once x_s is final it leaves A[t][s] x_s on every later
  // x_t, so each step's FMAs are independent. A^T's zeros below its diagonal
  // let the sweep start at a multiple of 4 (float4 loads), changing nothing.
  if (j < K + V) {
#pragma unroll
    for (int s = 0; s < chunk - 1; ++s) {
      const float xs = x[s];
      const float* arow = am + s * ld_c;
#pragma unroll
      for (int t4 = (s + 1) / 4 * 4; t4 < chunk; t4 += 4) {
        const float4 a4 = *reinterpret_cast<const float4*>(arow + t4);
        x[t4] = t4 > s ? fmaf(-a4.x, xs, x[t4]) : x[t4];
        x[t4 + 1] = t4 + 1 > s ? fmaf(-a4.y, xs, x[t4 + 1]) : x[t4 + 1];
        x[t4 + 2] = t4 + 2 > s ? fmaf(-a4.z, xs, x[t4 + 2]) : x[t4 + 2];
        x[t4 + 3] = t4 + 3 > s ? fmaf(-a4.w, xs, x[t4 + 3]) : x[t4 + 3];
      }
    }
  }
  __syncthreads();  // k read
  if (j < K) {
#pragma unroll
    for (int t = 0; t < chunk; ++t) {
      kn[t * ld_k + j] = x[t];
      w_g[t * K + j] = x[t];
    }
  } else if (j < K + V) {
#pragma unroll
    for (int t = 0; t < chunk; ++t) {
      qn[t * ld_k + j - K] = x[t];
      u1_g[t * V + j - K] = x[t];
    }
  }
  __syncthreads();

  // Qe = gamma Q - P W, Oi = P U1; P is lower, so tile row ti stops at ti.
  constexpr int qe_tiles = 4 * (K / 16);
  const int jobs = qe_tiles + 4 * (V / 16);
  for (int job = warp; job < jobs; job += warps) {
    const bool is_qe = job < qe_tiles;
    const int local = is_qe ? job : job - qe_tiles;
    const int cols = is_qe ? K / 16 : V / 16;
    const int ti = local / cols;
    const int tj = local % cols;
    const int ld_d = is_qe ? K : V;
    float* dst = (is_qe ? qe_g : oi_g) + ti * 16 * ld_d + tj * 16;
    frag_acc acc;
    if (is_qe)
      wmma::load_matrix_sync(acc, dst, static_cast<unsigned>(ld_d), wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.0F);
    const float* bsrc = (is_qe ? kn : qn) + tj * 16;
    for (int k0 = 0; k0 < (ti + 1) * 16; k0 += 8) {
      frag_a_row fa;
      frag_b_row fb;
      load_tf32(fa, pm + ti * 16 * ld_c + k0, ld_c, is_qe ? -1.0F : 1.0F);
      load_tf32(fb, bsrc + k0 * ld_k, ld_k);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(dst, acc, static_cast<unsigned>(ld_d), wmma::mem_row_major);
  }
}

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

// Byte offsets of the workspace's parts.
struct chunk_layout {
  int capacity = 0;
  std::size_t row_first = 0, n_chunks = 0, table = 0, blob = 0, keys = 0, total = 0;
};

std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

bool chunkable(const gated_delta_weights& w) {
  return (w.head_k_dim == 64 || w.head_k_dim == 128) && w.head_v_dim > 0 &&
         w.head_v_dim % 32 == 0 && w.head_v_dim <= w.head_k_dim && w.num_k_heads > 0 &&
         w.num_v_heads > 0 && w.num_v_heads % w.num_k_heads == 0;
}

chunk_layout layout_for(const gated_delta_weights& w, std::int64_t tokens, std::int64_t rows,
                        std::int32_t chunked_from) {
  chunk_layout l;
  const std::int64_t from = std::max<std::int32_t>(chunked_from, 1);
  const std::int64_t cap = detail::ceil_div(tokens, std::int64_t{chunk}) +
                           std::min(rows, detail::ceil_div(tokens, from));
  if (tokens <= 0 || rows <= 0 || cap > (std::int64_t{1} << 30))
    return l;
  l.capacity = static_cast<int>(cap);
  l.row_first = 0;
  l.n_chunks = align256(sizeof(std::int32_t) * static_cast<std::size_t>(rows));
  l.table = l.n_chunks + 256;
  l.blob = l.table + align256(sizeof(int2) * static_cast<std::size_t>(cap));
  l.keys = l.blob +
           align256(sizeof(float) * static_cast<std::size_t>(cap * w.num_v_heads *
                                                             per_head(w.head_k_dim, w.head_v_dim)));
  l.total = l.keys + align256(sizeof(float) *
                              static_cast<std::size_t>(cap * w.num_k_heads * chunk * w.head_k_dim));
  return l;
}

std::int32_t threshold(std::int32_t chunked_from) {
  return chunked_from > 0 ? chunked_from : gated_delta_default_chunked_from;
}

template <int K>
cudaError_t launch_chunked(const chunk_args& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_prepare_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(prepare_smem_bytes<K>()));
  if (attr != cudaSuccess)
    return attr;
  chunk_prepare_kernel<K><<<dim3(static_cast<unsigned>(a.capacity), static_cast<unsigned>(a.hv)),
                            threads, prepare_smem_bytes<K>(), stream>>>(a);
  const dim3 grid(static_cast<unsigned>(a.v_dim / slice), static_cast<unsigned>(a.hv),
                  static_cast<unsigned>(a.rows));
  chunk_recurrence_kernel<K><<<grid, threads, 0, stream>>>(a);
  return detail::launch_status();
}

}  // namespace

std::size_t gated_delta_rule_workspace_bytes(const gated_delta_weights& w, std::int64_t tokens,
                                             std::int64_t rows, std::int32_t chunked_from) {
  if (!chunkable(w))
    return 0;
  return layout_for(w, tokens, rows, threshold(chunked_from)).total;
}

cudaError_t gated_delta_rule_varlen(const gated_delta_rule_params& p,
                                    const gated_delta_workspace& ws, cudaStream_t stream) {
  if (p.cu_seqlens.size() < 2)
    return cudaSuccess;
  const auto rows = static_cast<std::int64_t>(p.cu_seqlens.size()) - 1;
  const std::int32_t from = threshold(ws.chunked_from);
  const chunk_layout l = layout_for(p.w, ws.tokens, rows, from);
  if (p.decode || !chunkable(p.w) || l.total == 0 || ws.data == nullptr || ws.bytes < l.total ||
      reinterpret_cast<std::uintptr_t>(ws.data) % 256 != 0 || rows > 65535) {
    return detail::launch_gated_delta_scan(p, nullptr, stream);
  }
  const auto& w = p.w;
  auto* base = static_cast<std::byte*>(ws.data);
  chunk_args a{};
  a.a_log = w.a_log;
  a.dt_bias = w.dt_bias;
  a.hk = w.num_k_heads;
  a.hv = w.num_v_heads;
  a.v_dim = w.head_v_dim;
  a.group = w.num_v_heads / w.num_k_heads;
  a.scale = w.scale != 0.0F ? w.scale : 1.0F / sqrtf(static_cast<float>(w.head_k_dim));
  a.qkv = p.in.qkv;
  a.qkv_stride = p.in.qkv_stride != 0 ? p.in.qkv_stride
                                      : 2 * std::int64_t{w.num_k_heads} * w.head_k_dim +
                                            std::int64_t{w.num_v_heads} * w.head_v_dim;
  a.a = p.in.a;
  a.b = p.in.b;
  a.ab_stride = p.in.ab_stride != 0 ? p.in.ab_stride : w.num_v_heads;
  a.out = p.out;
  a.cu = p.cu_seqlens.data();
  a.state = p.state;
  a.slots = p.slot_indices.data();
  a.has_state = p.has_state.data();
  a.rows = static_cast<int>(rows);
  a.chunked_from = from;
  a.capacity = l.capacity;
  a.row_first = reinterpret_cast<std::int32_t*>(base + l.row_first);
  a.n_chunks = reinterpret_cast<std::int32_t*>(base + l.n_chunks);
  a.table = reinterpret_cast<int2*>(base + l.table);
  a.blob = reinterpret_cast<float*>(base + l.blob);
  a.keys = reinterpret_cast<float*>(base + l.keys);
  chunk_table_kernel<<<1, 32, 0, stream>>>(a);
  if (const cudaError_t err = detail::launch_gated_delta_scan(p, a.row_first, stream);
      err != cudaSuccess) {
    return err;
  }
  return w.head_k_dim == 64 ? launch_chunked<64>(a, stream) : launch_chunked<128>(a, stream);
}

}  // namespace mstar::kernels::cuda
