// The chunked SSD scan's outputs (kernels/cuda/ssd_chunked.cu has the
// math): C B^T once per (chunk, group), then per (chunk, head)
//   y_t = e^{G_t} C_t h_start + sum_{s<=t} M_ts x_s + D x_t,
//   M_ts = (C_t . B_s) e^{G_t - G_s} dt_s,
// every 16-token tile row paired with its mirror so each warp's causal
// products are the same length.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

constexpr int cb_jobs = tiles * (tiles + 1) / 2;  // tiles on and below the diagonal

// Block (table entry c, group g), blockIdx.x = c G + g: C and B of the
// chunk's tokens (zeros past the row's end) staged whole, then each warp
// takes tiles (i, j), j <= i, of C B^T over all N and writes them to `cb`
// from its fragments.
template <int N>
__global__ void __launch_bounds__(threads) chunk_cb_kernel(chunk_args a) {
  constexpr int ld_n = N + 4;
  const int c = static_cast<int>(blockIdx.x) / a.groups;
  if (c >= *a.n_chunks)
    return;
  const int g = static_cast<int>(blockIdx.x) % a.groups;
  const chunk_span sp = span_of(a, c);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* cs = smem;               // [chunk][ld_n]
  float* bs = cs + chunk * ld_n;  // [chunk][ld_n]
  const std::int64_t bc0 = std::int64_t{g} * N;
  for (int i = tid; i < chunk * N; i += threads) {
    const int t = i / N;
    const int col = i % N;
    const std::int64_t at = (sp.t0 + t) * a.bc_stride + bc0 + col;
    cs[t * ld_n + col] = t < sp.n ? a.C[at] : 0.0F;
    bs[t * ld_n + col] = t < sp.n ? a.B[at] : 0.0F;
  }
  __syncthreads();
  const tf32::lane_at ln(tid % 32);
  float* out = a.cb + (std::int64_t{c} * a.groups + g) * chunk * chunk;
  for (int job = warp; job < cb_jobs; job += warps) {
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= job)
      ++ti;
    const int tj = job - ti * (ti + 1) / 2;
    // Two 8-column mma tiles, even and odd k steps apart; B(k, n) = B[s][k]
    // for token s = 16 tj + n (B^T).
    const float* ca = tf32::a_base<ld_n, 1>(cs + ti * 16 * ld_n, ln);
    const float* bb = tf32::b_base<1, ld_n>(bs + tj * 16 * ld_n, ln);
    float acc[2][2][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < N; k0 += 16) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        std::uint32_t fa[4];
        tf32::load_a<ld_n, 1>(fa, ca + k0 + 8 * e);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          std::uint32_t fb[2];
          tf32::load_b<1, ld_n>(fb, bb + nt * 8 * ld_n + k0 + 8 * e);
          tf32::mma(acc[nt][e], fa, fb);
        }
      }
    }
    float* o = tf32::c_base<chunk>(out + ti * 16 * chunk + tj * 16, ln);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        v[i] = acc[nt][0][i] + acc[nt][1][i];
      tf32::store_c<chunk>(o + nt * 8, v);
    }
  }
}

// Shared memory of an output block, in floats: G_t, dt_t, e^{G_t} [chunk]
// each, then a region `big` used in turn by
//   phase 1: C'_t = e^{G_t} C_t [chunk][N + 4], the start state's rows
//            [Cols][N + 4] after it;
//   phase 2: M [chunk][chunk + 4], the x slice [chunk][Cols + 4] after
//            the larger of M and C' (still there for D x when y is
//            written).
template <int N, int Cols>
struct out_smem {
  static constexpr int ld_n = N + 4;
  static constexpr int ld_x = Cols + 4;
  static constexpr int a0 = 3 * chunk;
  static constexpr int first = chunk * (ld_n > ld_l ? ld_n : ld_l);
  static constexpr int hs = a0 + chunk * ld_n;
  static constexpr int xs = a0 + first;
  static constexpr int end1 = hs + Cols * ld_n;
  static constexpr int end2 = xs + chunk * ld_x;
  static constexpr int floats = end1 > end2 ? end1 : end2;
  static constexpr std::size_t bytes = sizeof(float) * floats;
  static_assert(a0 % 32 == 0 && hs % 32 == 0 && xs % 32 == 0);
};

// Block (table entry c, head h), blockIdx.x = c H + h (a group's heads side
// by side, so the group's C B^T comes from L2), all the chunk's tokens.
// Per slice of Cols head-dim columns, warp w's accumulators (its two tile
// rows x out_tiles' column tiles, each two 8-column mma tiles) take phase
// 1, C' h_start^T over N, then phase 2, M x over the tokens up to the tile
// row's last; y = acc + D x goes to global memory from them.
template <int N, int Cols>
__global__ void __launch_bounds__(threads, 2) chunk_output_kernel(chunk_args a) {
  using S = out_smem<N, Cols>;
  using W = out_tiles<Cols>;
  constexpr int nt = 2 * W::col_tiles;  // 8-column mma tiles of a tile row
  const int c = static_cast<int>(blockIdx.x) / a.heads;
  if (c >= *a.n_chunks)
    return;
  const int h = static_cast<int>(blockIdx.x) % a.heads;
  const chunk_span sp = span_of(a, c);
  const int n = sp.n;
  const int g = h / a.heads_per_group;
  const int P = a.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* cum = smem;
  float* dts = smem + chunk;
  float* eg = smem + 2 * chunk;
  float* big = smem + S::a0;  // C', then M
  float* hs = smem + S::hs;
  float* xs = smem + S::xs;

  chunk_log_decays(a, sp.t0, n, h, cum, dts);
  if (tid < chunk)
    eg[tid] = expf(cum[tid]);
  __syncthreads();

  const int rows[2] = {W::lo(warp), W::hi(warp)};
  const int c0 = W::col0(warp);
  const std::int64_t bc0 = std::int64_t{g} * N;
  const float* cb = a.cb + (std::int64_t{c} * a.groups + g) * chunk * chunk;
  const float* start = a.states + (std::int64_t{c} * a.heads + h) * P * N;
  const float skip = a.D != nullptr ? a.D[h] : 0.0F;
  const std::int64_t y_stride = std::int64_t{a.heads} * P;
  // The lane's tokens of tile row r: 16 rows[r] + g and 8 more; its columns
  // of the slice in mma tile j: lcol + 8 j and the next.
  const tf32::lane_at ln(tid % 32);
  const int lcol = c0 * 16 + 2 * ln.q;
  for (int p0 = 0; p0 < P; p0 += Cols) {
    float acc[2][nt][4] = {};

    // Phase 1: e^{G_t} C_t h_start.
    for (int i = tid; i < chunk * N; i += threads) {
      const int t = i / N;
      const int col = i % N;
      big[t * S::ld_n + col] = t < n ? eg[t] * a.C[(sp.t0 + t) * a.bc_stride + bc0 + col] : 0.0F;
    }
    for (int i = tid; i < Cols * N / 4; i += threads) {
      const int p = i / (N / 4);
      const int col = 4 * (i % (N / 4));
      *reinterpret_cast<float4*>(hs + p * S::ld_n + col) =
          *reinterpret_cast<const float4*>(start + std::int64_t{p0 + p} * N + col);
    }
    __syncthreads();
    {
      // B(k, col) = h_start[16 c0 + col][k]: the state's rows are y's columns.
      const float* hb = tf32::b_base<1, S::ld_n>(hs + c0 * 16 * S::ld_n, ln);
      const float* ca[2] = {tf32::a_base<S::ld_n, 1>(big + rows[0] * 16 * S::ld_n, ln),
                            tf32::a_base<S::ld_n, 1>(big + rows[1] * 16 * S::ld_n, ln)};
      for (int k0 = 0; k0 < N; k0 += 8) {
        std::uint32_t fb[nt][2];
#pragma unroll
        for (int j = 0; j < nt; ++j)
          tf32::load_b<1, S::ld_n>(fb[j], hb + j * 8 * S::ld_n + k0);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          std::uint32_t fa[4];
          tf32::load_a<S::ld_n, 1>(fa, ca[r] + k0);
#pragma unroll
          for (int j = 0; j < nt; ++j)
            tf32::mma(acc[r][j], fa, fb[j]);
        }
      }
    }
    __syncthreads();  // C' and the start state are overwritten

    // Phase 2: M from the group's C B^T (the tiles on and below the
    // diagonal; zeros above the diagonal inside them), and the x slice.
    for (int i = tid; i < chunk * chunk / 4; i += threads) {
      const int t = i / (chunk / 4);
      const int s = 4 * (i % (chunk / 4));
      float4 m = make_float4(0.0F, 0.0F, 0.0F, 0.0F);
      if (s <= t) {
        const float4 v = *reinterpret_cast<const float4*>(cb + t * chunk + s);
        const float gt = cum[t];
        m.x = v.x * expf(gt - cum[s]) * dts[s];
        m.y = s + 1 <= t ? v.y * expf(gt - cum[s + 1]) * dts[s + 1] : 0.0F;
        m.z = s + 2 <= t ? v.z * expf(gt - cum[s + 2]) * dts[s + 2] : 0.0F;
        m.w = s + 3 <= t ? v.w * expf(gt - cum[s + 3]) * dts[s + 3] : 0.0F;
      }
      *reinterpret_cast<float4*>(big + t * ld_l + s) = m;
    }
    for (int i = tid; i < chunk * Cols; i += threads) {
      const int t = i / Cols;
      const int col = i % Cols;
      xs[t * S::ld_x + col] =
          t < n ? a.x[(sp.t0 + t) * a.x_stride + std::int64_t{h} * P + p0 + col] : 0.0F;
    }
    __syncthreads();
    // Tile row r needs tokens s < 16 (r + 1), and none past the row's end
    // (x is zero there): k up to min of the two, in steps of 8.
    const int k_lo = min(16 * (rows[0] + 1), (n + 7) / 8 * 8);
    const int k_hi = min(16 * (rows[1] + 1), (n + 7) / 8 * 8);
    {
      const float* xb = tf32::b_base<S::ld_x, 1>(xs + c0 * 16, ln);
      const float* ma[2] = {tf32::a_base<ld_l, 1>(big + rows[0] * 16 * ld_l, ln),
                            tf32::a_base<ld_l, 1>(big + rows[1] * 16 * ld_l, ln)};
      for (int k0 = 0; k0 < k_hi; k0 += 8) {
        std::uint32_t fb[nt][2];
#pragma unroll
        for (int j = 0; j < nt; ++j)
          tf32::load_b<S::ld_x, 1>(fb[j], xb + k0 * S::ld_x + j * 8);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (r == 1 || k0 < k_lo) {
            std::uint32_t fa[4];
            tf32::load_a<ld_l, 1>(fa, ma[r] + k0);
#pragma unroll
            for (int j = 0; j < nt; ++j)
              tf32::mma(acc[r][j], fa, fb[j]);
          }
        }
      }
    }
    // y = acc + D x straight from the fragments (x still in shared memory);
    // tokens past the row's end dropped.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int t = rows[r] * 16 + ln.g;
      const float* xt = xs + t * S::ld_x + lcol;
      float* yt = a.y + (sp.t0 + t) * y_stride + std::int64_t{h} * P + p0 + lcol;
#pragma unroll
      for (int j = 0; j < nt; ++j) {
        if (t < n) {
          const float2 x = *reinterpret_cast<const float2*>(xt + j * 8);
          *reinterpret_cast<float2*>(yt + j * 8) =
              make_float2(acc[r][j][0] + skip * x.x, acc[r][j][1] + skip * x.y);
        }
        if (t + 8 < n) {
          const float2 x = *reinterpret_cast<const float2*>(xt + 8 * S::ld_x + j * 8);
          *reinterpret_cast<float2*>(yt + 8 * y_stride + j * 8) =
              make_float2(acc[r][j][2] + skip * x.x, acc[r][j][3] + skip * x.y);
        }
      }
    }
    __syncthreads();  // the next slice restages everything
  }
}

template <class Kernel>
cudaError_t allow_smem(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

template <int N>
cudaError_t launch_cb_for(const chunk_args& a, cudaStream_t stream) {
  constexpr std::size_t bytes = sizeof(float) * 2 * chunk * (N + 4);
  static const cudaError_t attr = allow_smem(chunk_cb_kernel<N>, bytes);
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.groups);
  chunk_cb_kernel<N><<<blocks, threads, bytes, stream>>>(a);
  return launch_status();
}

template <int N, int Cols>
cudaError_t launch_output_for(const chunk_args& a, cudaStream_t stream) {
  using S = out_smem<N, Cols>;
  static const cudaError_t attr = allow_smem(chunk_output_kernel<N, Cols>, S::bytes);
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.heads);
  chunk_output_kernel<N, Cols><<<blocks, threads, S::bytes, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_cb(const chunk_args& a, cudaStream_t stream) {
  return a.state_size == 64 ? launch_cb_for<64>(a, stream) : launch_cb_for<128>(a, stream);
}

cudaError_t launch_outputs(const chunk_args& a, cudaStream_t stream) {
  const bool wide = cols_for(a.head_dim) == 64;
  if (a.state_size == 64)
    return wide ? launch_output_for<64, 64>(a, stream) : launch_output_for<64, 32>(a, stream);
  return wide ? launch_output_for<128, 64>(a, stream) : launch_output_for<128, 32>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
