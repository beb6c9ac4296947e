// The chunked SSD kernels' C B^T and own states (ssd_chunked.cu has the
// math). They replaced (session 31; git history has them) kernels of the
// same products over the same tiles that differed in how the operands
// arrive: those staged them a float at a time
// through registers, a loop whose loads wait for each other a few at a
// time, so a block spent most of its life waiting (chunk_state at 0.85
// TB/s, 21 us a block at 2 blocks an SM). Here every copy of a block is a
// cp.async issued at the start (internal/ssd_chunk_stage.cuh), the
// decays are worked out while they land, and x is not rescaled in shared
// memory: the (x w)^T fragment is scaled as it is loaded. The shared rows
// read down a column by the fragments (B, x) are padded to 8 mod 32
// floats, so the four k rows of a fragment fall in distinct banks (at 4 mod
// 32 every fragment load was a two-way conflict).
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"
#include "kernels/cuda/internal/ssd_chunk_stage.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

constexpr int cb_jobs = tiles * (tiles + 1) / 2;  // tiles on and below the diagonal

// Block (table entry c, group g), blockIdx.x = c G + g, as chunk_cb_kernel:
// C and B copied whole (zeros past the row's end), then warp tiles (i, j),
// j <= i, of C B^T over N into `cb`. When launched chained it reads only
// the inputs and the table (made before the sequential scan, a plain
// launch) and writes what only chunk_output, launched after it, reads: it
// waits for the kernel before it at its end only.
template <int N>
__global__ void __launch_bounds__(threads) chunk_cb_staged(chunk_args a) {
  constexpr int ld_n = N + 4;  // rows read along k: 4 mod 32 spreads g over the banks
  chained_entry(a);
  const int c = static_cast<int>(blockIdx.x) / a.groups;
  if (c >= __ldcg(a.n_chunks)) {
    chain_wait();
    return;
  }
  const int g = static_cast<int>(blockIdx.x) % a.groups;
  const chunk_span sp = span_of(a, c);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* cs = smem;               // [chunk][ld_n]
  float* bs = cs + chunk * ld_n;  // [chunk][ld_n]
  const std::int64_t at = sp.t0 * a.bc_stride + std::int64_t{g} * N;
  stage_rows<chunk, N, ld_n>(cs, a.C + at, a.bc_stride, sp.n, a.vec);
  stage_rows<chunk, N, ld_n>(bs, a.B + at, a.bc_stride, sp.n, a.vec);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const tf32::lane_at ln(tid % 32);
  float* out = a.cb + (std::int64_t{c} * a.groups + g) * chunk * chunk;
  for (int job = warp; job < cb_jobs; job += warps) {
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= job)
      ++ti;
    const int tj = job - ti * (ti + 1) / 2;
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
  chain_wait();
}

// C B^T as chunk_cb_staged, with C and B copied 64 state columns at a time
// and each warp's tiles (jobs warp, warp + 8, ...: 5 at most) accumulated
// over the slices: 68 KB of shared memory at N 128 where chunk_cb_staged
// takes 132, so a block runs beside a state walk block (ssd_chunk_walk.cu,
// 145 KB with 64 state columns) and two or three fit an SM. The default
// path's: launched chained after the walk, it reads only the inputs and
// the table and writes what only chunk_output (launched after it) reads.
// So only the grid's last block waits on the walk (at its end): enough
// that the grid never completes before the walk, while every other block
// leaves as soon as it is done instead of holding its place on the SM
// until the walk ends.
template <int N>
__global__ void __launch_bounds__(threads, 2) chunk_cb_sliced(chunk_args a) {
  constexpr int K = 64;
  constexpr int ld = K + 4;  // as chunk_cb_staged's: 4 mod 32
  constexpr int per_warp = (cb_jobs + warps - 1) / warps;
  static_assert(N % K == 0);
  chained_entry(a);
  const bool waits = blockIdx.x + 1 == gridDim.x;
  const int c = static_cast<int>(blockIdx.x) / a.groups;
  if (c >= __ldcg(a.n_chunks)) {
    if (waits)
      chain_wait();
    return;
  }
  const int g = static_cast<int>(blockIdx.x) % a.groups;
  const chunk_span sp = span_of(a, c);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* cs = smem;             // [chunk][ld]
  float* bs = cs + chunk * ld;  // [chunk][ld]
  const std::int64_t at = sp.t0 * a.bc_stride + std::int64_t{g} * N;
  const tf32::lane_at ln(tid % 32);
  // The warp's jobs (tile row ti, tile column tj <= ti); past the last, -1.
  int ti[per_warp], tj[per_warp];
#pragma unroll
  for (int i = 0; i < per_warp; ++i) {
    const int job = warp + i * warps;
    int r = 0;
    while ((r + 1) * (r + 2) / 2 <= job)
      ++r;
    ti[i] = job < cb_jobs ? r : -1;
    tj[i] = job - r * (r + 1) / 2;
  }
  // Every job's accumulators live across the slices; each k step feeds
  // all of them (up to 10 independent products in flight).
  float acc[per_warp][2][4] = {};
  for (int k0 = 0; k0 < N; k0 += K) {
    if (k0 > 0)
      __syncthreads();  // every warp done with the last slice
    stage_rows<chunk, K, ld>(cs, a.C + at + k0, a.bc_stride, sp.n, a.vec);
    stage_rows<chunk, K, ld>(bs, a.B + at + k0, a.bc_stride, sp.n, a.vec);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll 2
    for (int kk = 0; kk < K; kk += 8) {
#pragma unroll
      for (int i = 0; i < per_warp; ++i) {
        if (ti[i] >= 0) {
          std::uint32_t fa[4];
          tf32::load_a<ld, 1>(fa, tf32::a_base<ld, 1>(cs + ti[i] * 16 * ld, ln) + kk);
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            std::uint32_t fb[2];
            tf32::load_b<1, ld>(fb,
                                tf32::b_base<1, ld>(bs + tj[i] * 16 * ld, ln) + nt * 8 * ld + kk);
            tf32::mma(acc[i][nt], fa, fb);
          }
        }
      }
    }
  }
  float* out = a.cb + (std::int64_t{c} * a.groups + g) * chunk * chunk;
#pragma unroll
  for (int i = 0; i < per_warp; ++i) {
    if (ti[i] >= 0) {
      float* o = tf32::c_base<chunk>(out + ti[i] * 16 * chunk + tj[i] * 16, ln);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        tf32::store_c<chunk>(o + nt * 8, acc[i][nt]);
    }
  }
  if (waits)
    chain_wait();
}

// Shared memory of a staged chunk_state block, in floats: G_t and w_t
// [chunk] each, B [chunk][N + 8], the raw x slice [chunk][Cols + 8].
template <int N, int Cols>
struct state_smem {
  static constexpr int ld_n = N + 8;
  static constexpr int ld_x = Cols + 8;
  static constexpr int bs = 2 * chunk;
  static constexpr int xs = bs + chunk * ld_n;
  static constexpr std::size_t bytes = sizeof(float) * (xs + chunk * ld_x);
  static_assert(ld_n % 32 == 8 || ld_n % 32 == 24);
  static_assert(ld_x % 32 == 8 || ld_x % 32 == 24);
  static_assert(bs % 32 == 0 && xs % 32 == 0);
};

// Block (table entry c, head h), blockIdx.x = c H + h, as
// chunk_state_kernel: e^{G_C} into `gammas` and
//   S[Cols][N] = (x w)^T B,  w_t = e^{G_C - G_t} dt_t,
// per Cols head-dim rows, into `states`; warp tiles as state_tiles. B and
// the first x slice are copied before the decays are made; the A fragment
// (x^T, k = token) is multiplied by w as it is loaded (the same f32
// product the old kernel stored, then rounded to TF32 the same way).
// MSTAR_SSD_VARIANT 0 and 2 only (ssd_chunk_walk.cu makes these products
// by default, onto the running state). Launched chained (variant 2) it
// reads only the inputs and the table and writes what nothing launched
// before it in the call reads: it waits at its end.
template <int N, int Cols>
__global__ void __launch_bounds__(threads) chunk_state_staged(chunk_args a) {
  using S = state_smem<N, Cols>;
  using W = state_tiles<N, Cols>;
  constexpr int nt = 2 * W::col_tiles;
  constexpr int ks = nt <= 2 ? 2 : 1;
  chained_entry(a);
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
  float* cum = smem;         // [chunk]
  float* wts = cum + chunk;  // [chunk]: dt_t, then w_t
  float* bs = smem + S::bs;
  float* xs = smem + S::xs;
  const float* x0 = a.x + sp.t0 * a.x_stride + std::int64_t{h} * P;
  stage_rows<chunk, N, S::ld_n>(bs, a.B + sp.t0 * a.bc_stride + std::int64_t{g} * N, a.bc_stride, n,
                                a.vec);
  stage_rows<chunk, Cols, S::ld_x>(xs, x0, a.x_stride, n, a.vec);
  cp_async_commit();

  chunk_log_decays(a, sp.t0, n, h, cum, wts);
  const float last = cum[chunk - 1];
  if (tid < chunk)
    wts[tid] *= expf(last - cum[tid]);
  if (tid == 0)
    a.gammas[std::int64_t{c} * a.heads + h] = expf(last);

  float* out = a.states + (std::int64_t{c} * a.heads + h) * P * N;
  const int rt = W::row(warp);
  const int c0 = W::col0(warp);
  const int k_end = (n + 7) / 8 * 8;
  // A(m, k) = x[k][16 rt + m] w_k; B(k, n) = B[k][16 c0 + n].
  const tf32::lane_at ln(tid % 32);
  const float* xa = tf32::a_base<1, S::ld_x>(xs + rt * 16, ln);
  const float* bb = tf32::b_base<S::ld_n, 1>(bs + c0 * 16, ln);
  const float* wq = wts + ln.q;  // the lane's tokens: k0 + q and k0 + q + 4
  for (int p0 = 0; p0 < P; p0 += Cols) {
    cp_async_wait<0>();
    __syncthreads();  // the copies and w_t
    float acc[nt][ks][4] = {};
    weighted_xt_b<S::ld_x, S::ld_n>(xa, bb, wq, k_end, acc);
    float* o = tf32::c_base<N>(out + std::int64_t{p0 + rt * 16} * N + c0 * 16, ln);
#pragma unroll
    for (int j = 0; j < nt; ++j) {
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[i] = acc[j][0][i];
#pragma unroll
        for (int e = 1; e < ks; ++e)
          v[i] += acc[j][e][i];
      }
      tf32::store_c<N>(o + j * 8, v);
    }
    if (p0 + Cols < P) {
      __syncthreads();  // every warp is done with this slice
      stage_rows<chunk, Cols, S::ld_x>(xs, x0 + p0 + Cols, a.x_stride, n, a.vec);
      cp_async_commit();
    }
  }
  chain_wait();
}

template <class Kernel>
cudaError_t allow_smem(Kernel kernel, std::size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

template <int N>
cudaError_t launch_cb_for(const chunk_args& a, bool chained, cudaStream_t stream) {
  constexpr std::size_t bytes = sizeof(float) * 2 * chunk * (N + 4);
  static const cudaError_t attr = allow_smem(chunk_cb_staged<N>, bytes);
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.groups);
  if (chained)
    launch_chained(chunk_cb_staged<N>, dim3(blocks), dim3(threads), bytes, stream, a);
  else
    chunk_cb_staged<N><<<blocks, threads, bytes, stream>>>(a);
  return launch_status();
}

template <int N>
cudaError_t launch_cb_sliced_for(const chunk_args& a, cudaStream_t stream) {
  constexpr std::size_t bytes = sizeof(float) * 2 * chunk * (64 + 4);
  static const cudaError_t attr = allow_smem(chunk_cb_sliced<N>, bytes);
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.groups);
  launch_chained(chunk_cb_sliced<N>, dim3(blocks), dim3(threads), bytes, stream, a);
  return launch_status();
}

template <int N, int Cols>
cudaError_t launch_state_for(const chunk_args& a, bool chained, cudaStream_t stream) {
  constexpr std::size_t bytes = state_smem<N, Cols>::bytes;
  static const cudaError_t attr = allow_smem(chunk_state_staged<N, Cols>, bytes);
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.heads);
  if (chained)
    launch_chained(chunk_state_staged<N, Cols>, dim3(blocks), dim3(threads), bytes, stream, a);
  else
    chunk_state_staged<N, Cols><<<blocks, threads, bytes, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_cb_staged(const chunk_args& a, bool chained, cudaStream_t stream) {
  return a.state_size == 64 ? launch_cb_for<64>(a, chained, stream)
                            : launch_cb_for<128>(a, chained, stream);
}

cudaError_t launch_cb_sliced(const chunk_args& a, cudaStream_t stream) {
  return a.state_size == 64 ? launch_cb_sliced_for<64>(a, stream)
                            : launch_cb_sliced_for<128>(a, stream);
}

cudaError_t launch_own_states_staged(const chunk_args& a, bool chained, cudaStream_t stream) {
  const bool wide = cols_for(a.head_dim) == 64;
  if (a.state_size == 64) {
    return wide ? launch_state_for<64, 64>(a, chained, stream)
                : launch_state_for<64, 32>(a, chained, stream);
  }
  return wide ? launch_state_for<128, 64>(a, chained, stream)
              : launch_state_for<128, 32>(a, chained, stream);
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
