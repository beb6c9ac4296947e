// The chunked gated delta rule's first parallel half: per (chunk, value
// head) the WY form's W, U1 (both stored scaled by e_t = e^{G_C - G_t}, as
// the walk uses them), Qe, Oi (kernels/cuda/delta_rule_chunked.cu has the
// math).
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_chunk.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"

namespace mstar::kernels::cuda::detail::chunked {
namespace {

template <int K>
constexpr std::size_t prepare_smem_bytes() {
  return sizeof(float) * (2 * chunk * (K + 4) + 2 * chunk * ld_c + 4 * chunk);
}

// Block (c, h): chunk c of the table, value head h. Shared: normalised k
// (later W), normalised q (later U1), A, P, G, beta, beta * gamma, e.
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
  const tf32::lane_at ln(lane);
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
  float* es = bg + chunk;
  float* blob = p.blob + (std::int64_t{c} * p.hv + h) * per_head(K, V);
  float* w_g = blob;
  float* qe_g = blob + qe_at(K);
  float* u1_g = blob + u1_at(K);
  float* oi_g = blob + oi_at(K, V);
  float* sc_g = blob + tail_at(K, V);
  float* keys = p.keys + (std::int64_t{c} * p.hk + kh) * chunk * K;

  // The block's value columns are read only by the solve, after the
  // products: L2 fetches them meanwhile (a 128-byte line a thread).
  const float* v_in = p.qkv + t0 * p.qkv_stride + 2 * std::int64_t{p.hk} * K + std::int64_t{h} * V;
  for (int i = tid; i < n * (V / 32); i += threads)
    prefetch_l2(v_in + (i / (V / 32)) * p.qkv_stride + 32 * (i % (V / 32)));

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
  if (tid < chunk) {
    es[tid] = expf(gs[chunk - 1] - gs[tid]);
    sc_g[tid] = es[tid];
  } else if (tid == chunk) {
    sc_g[chunk] = expf(gs[chunk - 1]);
  }

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
    // Two 8-column mma tiles, even and odd k steps apart.
    const float* fa_at = tf32::a_base<ld_k, 1>((is_p ? qn : kn) + ti * 16 * ld_k, ln);
    const float* fb_at = tf32::b_base<1, ld_k>(kn + tj * 16 * ld_k, ln);
    float acc[2][2][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        std::uint32_t fa[4];
        tf32::load_a<ld_k, 1>(fa, fa_at + k0 + 8 * e);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          std::uint32_t fb[2];
          tf32::load_b<1, ld_k>(fb, fb_at + nt * 8 * ld_k + k0 + 8 * e);
          tf32::mma(acc[nt][e], fa, fb);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int m = ti * 16 + ln.g;
      const int col = tj * 16 + nt * 8 + 2 * ln.q;
      const float c0 = acc[nt][0][0] + acc[nt][1][0];
      const float c1 = acc[nt][0][1] + acc[nt][1][1];
      const float c2 = acc[nt][0][2] + acc[nt][1][2];
      const float c3 = acc[nt][0][3] + acc[nt][1][3];
      if (is_p) {
        *reinterpret_cast<float2*>(pm + m * ld_c + col) = make_float2(c0, c1);
        *reinterpret_cast<float2*>(pm + (m + 8) * ld_c + col) = make_float2(c2, c3);
      } else {
        // A transposed (am[s][t] = A[t][s]) for the solve's column sweeps.
        am[col * ld_c + m] = c0;
        am[(col + 1) * ld_c + m] = c1;
        am[col * ld_c + m + 8] = c2;
        am[(col + 1) * ld_c + m + 8] = c3;
      }
    }
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
    const float* v = v_in + (j - K);
#pragma unroll
    for (int t = 0; t < chunk; ++t, v += p.qkv_stride)
      x[t] = t < n ? bs[t] * *v : 0.0F;
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
      w_g[t * K + j] = es[t] * x[t];
    }
  } else if (j < K + V) {
#pragma unroll
    for (int t = 0; t < chunk; ++t) {
      qn[t * ld_k + j - K] = x[t];
      u1_g[t * V + j - K] = es[t] * x[t];
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
    // The lane's first element of the 16 x 16 tile: (ti 16 + g, tj 16 + 2q).
    float* dst = (is_qe ? qe_g : oi_g) + (ti * 16 + ln.g) * ld_d + tj * 16 + 2 * ln.q;
    float acc[2][4] = {};
    if (is_qe) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const float2 lo = *reinterpret_cast<const float2*>(dst + nt * 8);
        const float2 hi = *reinterpret_cast<const float2*>(dst + 8 * ld_d + nt * 8);
        acc[nt][0] = lo.x;
        acc[nt][1] = lo.y;
        acc[nt][2] = hi.x;
        acc[nt][3] = hi.y;
      }
    }
    const float* fa_at = tf32::a_base<ld_c, 1>(pm + ti * 16 * ld_c, ln);
    const float* fb_at = tf32::b_base<ld_k, 1>((is_qe ? kn : qn) + tj * 16, ln);
    for (int k0 = 0; k0 < (ti + 1) * 16; k0 += 8) {
      std::uint32_t fa[4];
      tf32::load_a<ld_c, 1>(fa, fa_at + k0);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        fa[i] ^= is_qe ? 0x80000000U : 0U;  // -P for Qe
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        std::uint32_t fb[2];
        tf32::load_b<ld_k, 1>(fb, fb_at + k0 * ld_k + nt * 8);
        tf32::mma(acc[nt], fa, fb);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      *reinterpret_cast<float2*>(dst + nt * 8) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2*>(dst + 8 * ld_d + nt * 8) = make_float2(acc[nt][2], acc[nt][3]);
    }
  }
}

template <int K>
cudaError_t launch_prepare_k(const chunk_args& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_prepare_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(prepare_smem_bytes<K>()));
  if (attr != cudaSuccess)
    return attr;
  chunk_prepare_kernel<K><<<dim3(static_cast<unsigned>(a.capacity), static_cast<unsigned>(a.hv)),
                            threads, prepare_smem_bytes<K>(), stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_prepare(const chunk_args& a, int k, cudaStream_t stream) {
  return k == 64 ? launch_prepare_k<64>(a, stream) : launch_prepare_k<128>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::chunked
