// The chunked SSD outputs (ssd_chunked.cu has the math). Per (chunk, head)
// and Cols head-dim columns:
//   phase 1: acc = C h_start^T over N, then each token's row times e^{G_t}
//            (in f32, on the fragments; the old kernel scaled C before
//            rounding it to TF32: the same error size);
//   phase 2: acc += M x, M_ts = (C_t . B_s) e^{G_t - G_s} dt_s;
//   y = acc + D x.
// Every operand comes by cp.async (internal/ssd_chunk_stage.cuh): C and
// the start state issued before the decays are made (C, and x's lines
// asked of L2, before the wait on the kernels before this one when it is
// launched chained; the rest after it), the group's C B^T
// tiles and x as soon as phase 1 is done with the space (the lines of x
// and C B^T asked of L2 at the start), and M is formed in place over the
// copied C B^T. x's rows are padded to 8 mod 32 floats (read down a column
// by the B fragments: conflict-free, where 4 mod 32 was two-way). After a
// walk in halves (chunk_args::segs) the second half's start states are
// completed here as they are staged (+ gamma_c H, by register loads from
// L2 in the shared rows), and its first chunk's blocks write the slot.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"
#include "kernels/cuda/internal/ssd_chunk_stage.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

// Shared memory of a staged output block, in floats: G_t, dt_t, e^{G_t}
// [chunk] each, then `big`: raw C [chunk][N + 4] in phase 1, C B^T then M
// [chunk][chunk + 4] in phase 2; then `second`: the start state's rows
// [Cols][N + 4] in phase 1, the x slice [chunk][Cols + 8] in phase 2 (still
// there for D x when y is written).
template <int N, int Cols>
struct staged_out_smem {
  static constexpr int ld_n = N + 4;
  static constexpr int ld_x = Cols + 8;
  static constexpr int big = 3 * chunk;
  static constexpr int second = big + chunk * (ld_n > ld_l ? ld_n : ld_l);
  static constexpr int second_floats = Cols * ld_n > chunk* ld_x ? Cols* ld_n : chunk* ld_x;
  static constexpr std::size_t bytes = sizeof(float) * (second + second_floats);
  static_assert(big % 32 == 0 && second % 32 == 0);
  static_assert(ld_n % 32 == 4 && ld_l % 32 == 4 && (ld_x % 32 == 8 || ld_x % 32 == 24));
};

// Block (table entry c, head h), blockIdx.x = c H + h; warp w's tiles as
// chunk_output_kernel's (out_tiles: tile rows w % 4 and 7 - w % 4, half
// the columns).
template <int N, int Cols>
__global__ void __launch_bounds__(threads, 2) chunk_output_staged(chunk_args a) {
  using S = staged_out_smem<N, Cols>;
  using W = out_tiles<Cols>;
  constexpr int nt = 2 * W::col_tiles;
  if (!a.vec)
    chain_wait();  // as chained_entry: C copied 4 bytes at a time
  const int c = static_cast<int>(blockIdx.x) / a.heads;
  if (c >= __ldcg(a.n_chunks)) {
    chain_wait();
    return;
  }
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
  float* big = smem + S::big;
  float* second = smem + S::second;

  const float* c_rows = a.C + sp.t0 * a.bc_stride + std::int64_t{g} * N;
  const float* cb = a.cb + (std::int64_t{c} * a.groups + g) * chunk * chunk;
  const float* start = a.states + (std::int64_t{c} * a.heads + h) * P * N;
  const float* x0 = a.x + sp.t0 * a.x_stride + std::int64_t{h} * P;
  auto stage_c = [&] { stage_rows<chunk, N, S::ld_n>(big, c_rows, a.bc_stride, n, a.vec); };
  auto stage_start = [&](int p0) {
    stage_rows<Cols, N, S::ld_n>(second, start + std::int64_t{p0} * N, N, Cols, true);
  };
  // Before the wait on the kernels before this one (a no-op unless launched
  // chained): what only the inputs and the table give, C and x's lines
  // into L2 (P floats a row). Then the start state, C B^T's lines (the
  // tiles on and below the diagonal, 4 lines a row at most: line l = i % 4
  // of token row t = i / 4 holds tile columns 2 l and 2 l + 1, wanted when
  // 2 l <= t / 16), and the decays while they land.
  stage_c();
  cp_async_commit();
  for (int i = tid; i < n * (P / 32); i += threads)
    prefetch_l2(x0 + (i / (P / 32)) * a.x_stride + 32 * (i % (P / 32)));
  // A row walked in halves (chunk_args::segs, two chunks or more): past
  // the second half's first chunk m, the start state staged is the half's
  // own, short of gamma_c H, H chunk m's start (`fix` = H, `fix_scale` =
  // gamma_c); at chunk m itself, H is what is staged, and the block makes
  // the row's last state, the half's end plus its whole decay times H
  // (`fix` = the end, `fix_scale` = the decay, `slot_to` = the slot).
  const float* fix = nullptr;
  float fix_scale = 0.0F;
  float* slot_to = nullptr;
  int k_fix = -1;
  std::int64_t fix_entry = 0;
  if (a.segs == 2) {
    const int2 e = __ldcg(a.table + c);
    const int len = static_cast<int>(__ldcg(a.cu + e.x + 1) - __ldcg(a.cu + e.x));
    const int nc = (len + chunk - 1) / chunk;
    const int m = (nc + 1) / 2;
    if (nc >= 2 && e.y >= m) {
      k_fix = e.y - m;
      fix_entry = std::int64_t{__ldcg(a.row_first + e.x)} + m;
      if (k_fix == 0) {
        const std::int64_t slot = __ldcg(a.slots + e.x);
        slot_to = a.state + (slot * a.heads + h) * P * N;
        fix = a.ends + (std::int64_t{e.x} * a.heads + h) * P * N;
      }
    }
  }
  chain_wait();
  if (k_fix > 0)
    fix = a.states + (fix_entry * a.heads + h) * P * N;
  if (k_fix >= 0)
    fix_scale = __ldcg(a.gammas + std::int64_t{c} * a.heads + h);
  stage_start(0);
  cp_async_commit();
  for (int i = tid; i < chunk * 4; i += threads) {
    if (i % 4 <= i / 128)
      prefetch_l2(cb + (i / 4) * chunk + 32 * (i % 4));
  }

  chunk_log_decays(a, sp.t0, n, h, cum, dts);
  if (tid < chunk)
    eg[tid] = expf(cum[tid]);

  const int rows[2] = {W::lo(warp), W::hi(warp)};
  const int c0 = W::col0(warp);
  const float skip = a.D != nullptr ? a.D[h] : 0.0F;
  const std::int64_t y_stride = std::int64_t{a.heads} * P;
  const tf32::lane_at ln(tid % 32);
  const int lcol = c0 * 16 + 2 * ln.q;
  for (int p0 = 0; p0 < P; p0 += Cols) {
    if (fix != nullptr) {
      // `fix`'s rows of this slice, 4 float4 a thread at a time (the first
      // asked for before the wait on the staged rows), then h0 += gamma_c H,
      // or the slot = end + decay H.
      constexpr int per = Cols * N / 4 / threads;
      constexpr int batch = per < 4 ? per : 4;
      static_assert(per * 4 * threads == Cols * N && per % batch == 0);
#pragma unroll 1
      for (int i0 = 0; i0 < per; i0 += batch) {
        float4 v[batch];
#pragma unroll
        for (int i = 0; i < batch; ++i) {
          const int at = 4 * (tid + (i0 + i) * threads);
          v[i] = __ldcg(reinterpret_cast<const float4*>(fix + std::int64_t{p0} * N + at));
        }
        if (i0 == 0) {
          cp_async_wait<0>();
          __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < batch; ++i) {
          const int at = 4 * (tid + (i0 + i) * threads);
          float4* st = reinterpret_cast<float4*>(second + at / N * S::ld_n + at % N);
          float4 o = *st;
          if (slot_to == nullptr) {
            o.x += fix_scale * v[i].x;
            o.y += fix_scale * v[i].y;
            o.z += fix_scale * v[i].z;
            o.w += fix_scale * v[i].w;
            *st = o;
          } else {
            o = make_float4(v[i].x + fix_scale * o.x, v[i].y + fix_scale * o.y,
                            v[i].z + fix_scale * o.z, v[i].w + fix_scale * o.w);
            *reinterpret_cast<float4*>(slot_to + std::int64_t{p0} * N + at) = o;
          }
        }
      }
    }
    float acc[2][nt][4] = {};
    cp_async_wait<0>();
    __syncthreads();  // C, the start state (and eg the first time)
    {
      // B(k, col) = h_start[16 c0 + col][k]: the state's rows are y's columns.
      const float* hb = tf32::b_base<1, S::ld_n>(second + c0 * 16 * S::ld_n, ln);
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
    // e^{G_t} per token row: c0 c1 are token 16 rows[r] + g, c2 c3 eight on.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float e0 = eg[rows[r] * 16 + ln.g];
      const float e1 = eg[rows[r] * 16 + ln.g + 8];
#pragma unroll
      for (int j = 0; j < nt; ++j) {
        acc[r][j][0] *= e0;
        acc[r][j][1] *= e0;
        acc[r][j][2] *= e1;
        acc[r][j][3] *= e1;
      }
    }
    __syncthreads();  // C and the start state are overwritten

    // Phase 2: the group's C B^T tiles on and below the diagonal (the
    // others were never written) and the x slice.
    for (int i = tid; i < chunk * chunk / 4; i += threads) {
      const int t = i / (chunk / 4);
      const int s = 4 * (i % (chunk / 4));
      if (s / 16 <= t / 16)
        cp_async16(big + t * ld_l + s, cb + t * chunk + s);
    }
    stage_rows<chunk, Cols, S::ld_x>(second, x0 + p0, a.x_stride, n, a.vec);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    // M in place: zeros above the diagonal (their C B^T not read).
    for (int i = tid; i < chunk * chunk / 4; i += threads) {
      const int t = i / (chunk / 4);
      const int s = 4 * (i % (chunk / 4));
      float4 m = make_float4(0.0F, 0.0F, 0.0F, 0.0F);
      float4* at = reinterpret_cast<float4*>(big + t * ld_l + s);
      if (s <= t) {
        const float4 v = *at;
        const float gt = cum[t];
        m.x = v.x * expf(gt - cum[s]) * dts[s];
        m.y = s + 1 <= t ? v.y * expf(gt - cum[s + 1]) * dts[s + 1] : 0.0F;
        m.z = s + 2 <= t ? v.z * expf(gt - cum[s + 2]) * dts[s + 2] : 0.0F;
        m.w = s + 3 <= t ? v.w * expf(gt - cum[s + 3]) * dts[s + 3] : 0.0F;
      }
      *at = m;
    }
    __syncthreads();
    // Tile row r needs tokens s < 16 (r + 1), and none past the row's end.
    const int k_lo = min(16 * (rows[0] + 1), (n + 7) / 8 * 8);
    const int k_hi = min(16 * (rows[1] + 1), (n + 7) / 8 * 8);
    {
      const float* xb = tf32::b_base<S::ld_x, 1>(second + c0 * 16, ln);
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
    // y = acc + D x from the fragments; tokens past the row's end dropped.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int t = rows[r] * 16 + ln.g;
      const float* xt = second + t * S::ld_x + lcol;
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
    if (p0 + Cols < P) {
      __syncthreads();  // the next slice restages everything
      stage_c();
      stage_start(p0 + Cols);
      cp_async_commit();
    }
  }
}

template <int N, int Cols>
cudaError_t launch_for(const chunk_args& a, bool chained, cudaStream_t stream) {
  constexpr std::size_t bytes = staged_out_smem<N, Cols>::bytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_output_staged<N, Cols>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.heads);
  if (chained)
    launch_chained(chunk_output_staged<N, Cols>, dim3(blocks), dim3(threads), bytes, stream, a);
  else
    chunk_output_staged<N, Cols><<<blocks, threads, bytes, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_outputs_staged(const chunk_args& a, bool chained, cudaStream_t stream) {
  const bool wide = cols_for(a.head_dim) == 64;
  if (a.state_size == 64) {
    return wide ? launch_for<64, 64>(a, chained, stream) : launch_for<64, 32>(a, chained, stream);
  }
  return wide ? launch_for<128, 64>(a, chained, stream) : launch_for<128, 32>(a, chained, stream);
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
