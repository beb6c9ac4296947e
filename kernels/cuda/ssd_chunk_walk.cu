// The chunked SSD scan's states in one pass (ssd_chunked.cu has the math):
// chunk_state's own end states and state_pass's walk as one kernel, the
// running state held in the tensor-core accumulators. A block takes a
// [Pc][Nc] tile of one (row, head)'s [P][N] state and walks the row's
// chunks in order; per chunk it writes the state at the chunk's start into
// the workspace (what chunk_output reads), then
//   h = e^{G_C} h + (x w)^T B,  w_t = e^{G_C - G_t} dt_t,
// by scaling the fragments and accumulating the chunk's products onto them.
// The last h goes to the slot. Against chunk_state + state_pass this never
// writes nor reads the chunks' own states: at 8 x 2,048 tokens, 64 heads of
// 64, N 128, the per-chunk states (256 MiB) crossed memory four times and
// now cross it twice (written here, read by chunk_output). What it costs:
// a (row, head)'s chunks are walked in order, so a 2,048-token row is 16
// steps of one block, and the operands of the next chunk (x's and B's
// tiles, by cp.async, and dt, by a register load) are asked for while the
// current one is multiplied: two stages of shared memory.
// With few blocks (one row, 64 heads: a block an SM and most of the GPU
// idle behind 16 serial steps) a row's chunks are walked in two halves at
// once (chunk_args::segs): the first from the slot's state, the second
// from zero, its start states then short of gamma_c H (H the first half's
// end, gamma_c the second half's decay up to chunk c), which chunk_output
// adds as it stages them (ssd_chunk_staged_output.cu): 8 steps of full
// state width where there were 16 of half. With one shared stage
// (Stages 1, 106 KB at Pc 64, Nc 128) two blocks share an SM, the copy of
// the next chunk waits for the products of this one, and the one after
// it is asked of L2 a chunk ahead instead (prefetch.global.L2).
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"
#include "kernels/cuda/internal/ssd_chunk_stage.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

// Shared memory of a walk block, in floats: per stage (Stages, one or
// two) x's slice [chunk][Pc + 8] and B's [chunk][Nc + 8] (rows read down
// a column by the fragments: 8 mod 32 puts a fragment's four k rows in
// distinct banks); then two slots (chunk j's at j % 2) of w_t [chunk] and
// e^{G_C}; then the decay scan's four warp totals.
template <int Pc, int Nc, int Stages>
struct walk_smem {
  static constexpr int ld_x = Pc + 8;
  static constexpr int ld_b = Nc + 8;
  static constexpr int stage = chunk * (ld_x + ld_b);
  static constexpr int xs = 0;  // + s * stage
  static constexpr int bs = chunk * ld_x;
  static constexpr int wts = Stages * stage;  // + s * chunk
  static constexpr int gam = wts + 2 * chunk;
  static constexpr int tot = gam + 4;
  static constexpr std::size_t bytes = sizeof(float) * (tot + chunk / 32);
  static_assert(ld_x % 32 == 8 && ld_b % 32 == 8);
  static_assert(stage % 32 == 0 && bs % 32 == 0);
  static_assert(chunk / 32 == 4, "the scan's totals");
  static_assert(Stages == 1 || Stages == 2);
};

// dt_t of the chunk's first n tokens (thread t < chunk holds the raw value
// of token t in `raw`) into w_t = e^{G_C - G_t} dt_t (wts) and e^{G_C}
// (*gam), G the running sum of dt A (zero past n), as chunk_log_decays sums
// it. Called by the whole block; one barrier inside, none at the end: the
// caller's next barrier publishes wts and gam.
__device__ __forceinline__ void walk_decays(const chunk_args& a, float raw, int n, int h,
                                            float neg_a, float* wts, float* gam, float* tot) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  float dtv = 0.0F;
  float incl = 0.0F;
  if (tid < chunk) {
    if (tid < n) {
      const float v = raw + a.dt_bias[h];
      const float sp = v > 20.0F ? v : log1pf(expf(v));
      dtv = fminf(fmaxf(sp, a.dt_min), a.dt_max);
    }
    incl = dtv * neg_a;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float v = __shfl_up_sync(full_mask, incl, off);
      if (lane >= off)
        incl += v;
    }
    if (lane == 31)
      tot[tid / 32] = incl;
  }
  __syncthreads();
  if (tid < chunk) {
    float before = 0.0F;
    for (int w = 0; w < tid / 32; ++w)
      before += tot[w];
    const float last = tot[3] + ((tot[0] + tot[1]) + tot[2]);
    wts[tid] = dtv * expf(last - (incl + before));
    if (tid == 0)
      *gam = expf(last);
  }
}

// Block (tile, head h, row r): blockIdx.x = the tile (P / Pc row tiles of
// N / Nc, the row tile fastest) + tiles x the half (0 unless a.segs is 2),
// y = h, z = r; warp tiles as state_tiles. The slot's state (zeros when
// has_state is 0) is the first chunk's start; a second half starts from
// zero. Launched chained (internal/common.cuh): it reads only the inputs,
// the table (finished before the sequential scan's blocks, which it chains
// on, went past their wait) and the slot of its own row, all from L2
// (chained_entry), and writes what nothing launched before it in this
// call reads, so it waits for the kernel before it only at its end.
// With one stage two blocks share an SM: at most 128 registers (ptxas
// without the bound chose 80 and spilled 4 bytes).
template <int N, int Pc, int Nc, int Stages>
__global__ void __launch_bounds__(threads, Stages == 1 ? 2 : 0) state_walk(chunk_args a) {
  using S = walk_smem<Pc, Nc, Stages>;
  using W = state_tiles<Nc, Pc>;
  constexpr int nt = 2 * W::col_tiles;
  constexpr int ks = nt <= 2 ? 2 : 1;
  chained_entry(a);
  const int r = static_cast<int>(blockIdx.z);
  const int first = __ldcg(a.row_first + r);
  if (first < 0) {
    chain_wait();
    return;
  }
  const int h = static_cast<int>(blockIdx.y);
  const int p_tiles = a.head_dim / Pc;
  const int tiles = p_tiles * (N / Nc);
  const int tile = static_cast<int>(blockIdx.x) % tiles;
  const int seg = static_cast<int>(blockIdx.x) / tiles;
  const int p0 = tile % p_tiles * Pc;
  const int n0 = tile / p_tiles * Nc;
  const int g = h / a.heads_per_group;
  const int P = a.head_dim;
  const std::int64_t row0 = __ldcg(a.cu + r);
  const int len = static_cast<int>(__ldcg(a.cu + r + 1) - row0);
  const int nc = (len + chunk - 1) / chunk;
  // Halves [0, m) and [m, nc) when the row has two chunks or more.
  const bool split = a.segs == 2 && nc >= 2;
  const int m = split ? (nc + 1) / 2 : nc;
  if (seg == 1 && !split) {
    chain_wait();
    return;
  }
  const int j0 = seg == 0 ? 0 : m;
  const int j1 = seg == 0 ? m : nc;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* tot = smem + S::tot;
  const float* x_at = a.x + row0 * a.x_stride + std::int64_t{h} * P + p0;
  const float* b_at = a.B + row0 * a.bc_stride + std::int64_t{g} * N + n0;
  const float* dt_at = a.dt + row0 * a.dt_stride + h;
  auto stage = [&](int j) {
    const int s = Stages == 2 ? j & 1 : 0;
    const std::int64_t t = std::int64_t{j} * chunk;
    const int n = min(chunk, len - j * chunk);
    stage_rows<chunk, Pc, S::ld_x>(smem + s * S::stage + S::xs, x_at + t * a.x_stride, a.x_stride,
                                   n, a.vec);
    stage_rows<chunk, Nc, S::ld_b>(smem + s * S::stage + S::bs, b_at + t * a.bc_stride, a.bc_stride,
                                   n, a.vec);
    cp_async_commit();
  };
  // Chunk j's x and B lines into L2 (Pc and Nc floats a token, each span's
  // lines from its first float and its last): thread t takes token t % 128,
  // every other line from t / 128.
  auto prefetch = [&](int j) {
    const int row = tid % chunk;
    if (j * chunk + row >= len)
      return;
    const std::int64_t t = std::int64_t{j} * chunk + row;
    const float* xr = x_at + t * a.x_stride;
    const float* br = b_at + t * a.bc_stride;
    constexpr int xl = Pc / 32 + 1;
    constexpr int bl = Nc / 32 + 1;
#pragma unroll 1
    for (int l = tid / chunk; l < xl + bl; l += threads / chunk)
      prefetch_l2(l < xl ? xr + min(32 * l, Pc - 1) : br + min(32 * (l - xl), Nc - 1));
  };
  // Thread t < chunk: token t's raw dt in chunk j (0 past the row's end).
  auto raw_dt = [&](int j) {
    const int t = j * chunk + tid;
    return tid < chunk && t < len ? __ldcg(dt_at + std::int64_t{t} * a.dt_stride) : 0.0F;
  };
  const float neg_a = -expf(a.A_log[h]);
  stage(j0);
  if (Stages == 1 && a.walk_prefetch && j0 + 1 < j1)
    prefetch(j0 + 1);
  walk_decays(a, raw_dt(j0), min(chunk, len - j0 * chunk), h, neg_a,
              smem + S::wts + (j0 & 1) * chunk, smem + S::gam + (j0 & 1), tot);
  float dt_next = j0 + 1 < j1 ? raw_dt(j0 + 1) : 0.0F;

  const int rt = W::row(warp);
  const int c0 = W::col0(warp);
  const tf32::lane_at ln(tid % 32);
  // The lane's first state entry: row p0 + 16 rt + g, column n0 + 16 c0 + 2 q.
  const std::int64_t lane_off = std::int64_t{p0 + rt * 16 + ln.g} * N + n0 + c0 * 16 + 2 * ln.q;
  const std::int64_t head_elems = std::int64_t{P} * N;
  const std::int64_t slot = __ldcg(a.slots + r);
  float acc[nt][ks][4] = {};
  if (seg == 0 && __ldcg(a.has_state + r) != 0) {
    const float* from = a.state + (slot * a.heads + h) * head_elems + lane_off;
#pragma unroll
    for (int j = 0; j < nt; ++j) {
      const float2 lo = __ldcg(reinterpret_cast<const float2*>(from + j * 8));
      const float2 hi = __ldcg(reinterpret_cast<const float2*>(from + j * 8 + 8 * N));
      acc[j][0][0] = lo.x;
      acc[j][0][1] = lo.y;
      acc[j][0][2] = hi.x;
      acc[j][0][3] = hi.y;
    }
  }
  // The second half's decay from chunk m to the chunk walked.
  float decay = 1.0F;
  const bool writes_gammas = seg == 1 && tile == 0 && tid == 0;
  for (int j = j0; j < j1; ++j) {
    const int s = j & 1;
    const int xs_at = Stages == 2 ? s * S::stage : 0;
    cp_async_wait<0>();
    __syncthreads();  // stage j, its w and e^{G_C}; every warp past chunk j - 1
    if (Stages == 2 && j + 1 < j1) {
      stage(j + 1);  // over chunk j - 1's stage
      if (a.walk_prefetch && j + 2 < j1)
        prefetch(j + 2);
    }
    const float gc = smem[S::gam + s];
    // The second half's first start state is the first half's end (its
    // blocks write it); the others' are written here.
    if (seg == 0 || j > j0) {
      float* start = a.states + (std::int64_t{first + j} * a.heads + h) * head_elems + lane_off;
#pragma unroll
      for (int jj = 0; jj < nt; ++jj)
        tf32::store_c<N>(start + jj * 8, acc[jj][0]);
    }
    if (writes_gammas && j > j0)
      a.gammas[std::int64_t{first + j} * a.heads + h] = decay;
    decay *= gc;
#pragma unroll
    for (int jj = 0; jj < nt; ++jj) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[jj][0][i] *= gc;
    }
    // A(m, k) = x[k][16 rt + m] w_k; B(k, n) = B[k][16 c0 + n].
    const float* xs = smem + xs_at + S::xs;
    const float* bs = smem + xs_at + S::bs;
    const float* xa = tf32::a_base<1, S::ld_x>(xs + rt * 16, ln);
    const float* bb = tf32::b_base<S::ld_b, 1>(bs + c0 * 16, ln);
    const float* wq = smem + S::wts + s * chunk + ln.q;
    const int k_end = (min(chunk, len - j * chunk) + 7) / 8 * 8;
    weighted_xt_b<S::ld_x, S::ld_b>(xa, bb, wq, k_end, acc);
#pragma unroll
    for (int jj = 0; jj < nt; ++jj) {
#pragma unroll
      for (int e = 1; e < ks; ++e) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[jj][0][i] += acc[jj][e][i];
          acc[jj][e][i] = 0.0F;
        }
      }
    }
    if (j + 1 < j1) {
      // Chunk j + 1's decays into the other slot's w: its last readers
      // (chunk j - 1's products) are past this iteration's first barrier.
      walk_decays(a, dt_next, min(chunk, len - (j + 1) * chunk), h, neg_a,
                  smem + S::wts + (s ^ 1) * chunk, smem + S::gam + (s ^ 1), tot);
      if (Stages == 1) {
        // One stage: every warp is past chunk j's products (walk_decays'
        // barrier), so chunk j + 1 goes over it, from L2 when prefetched.
        stage(j + 1);
        if (a.walk_prefetch && j + 2 < j1)
          prefetch(j + 2);
      }
      if (j + 2 < j1)
        dt_next = raw_dt(j + 2);
    }
  }
  // The end: the first half's is chunk m's start, the second's (from zero)
  // goes to `ends` with its whole decay at chunk m's gamma (chunk_output
  // makes the slot of them), a whole row's to the slot.
  float* to = a.state + (slot * a.heads + h) * head_elems + lane_off;
  if (split) {
    to = seg == 0 ? a.states + (std::int64_t{first + m} * a.heads + h) * head_elems + lane_off
                  : a.ends + (std::int64_t{r} * a.heads + h) * head_elems + lane_off;
  }
  if (writes_gammas)
    a.gammas[std::int64_t{first + m} * a.heads + h] = decay;
#pragma unroll
  for (int jj = 0; jj < nt; ++jj)
    tf32::store_c<N>(to + jj * 8, acc[jj][0]);
  chain_wait();
}

template <int N, int Pc, int Nc, int Stages>
cudaError_t launch_walk_for(const chunk_args& a, cudaStream_t stream) {
  constexpr std::size_t bytes = walk_smem<Pc, Nc, Stages>::bytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(state_walk<N, Pc, Nc, Stages>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (attr != cudaSuccess)
    return attr;
  const dim3 grid(static_cast<unsigned>(a.head_dim / Pc * (N / Nc) * a.segs),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.rows));
  launch_chained(state_walk<N, Pc, Nc, Stages>, grid, dim3(threads), bytes, stream, a);
  return launch_status();
}

template <int Pc, int Stages>
cudaError_t launch_walk_pc(const chunk_args& a, cudaStream_t stream) {
  if (a.state_size == 64)
    return launch_walk_for<64, Pc, 64, Stages>(a, stream);
  // N 128: the whole width a block (x's slice read once) unless the blocks
  // would then not fill one wave of the GPU (two stages: a block an SM, 209
  // KB of shared memory; one stage: two, 106 KB each); half the width
  // fills it twice as well.
  const std::int64_t blocks = std::int64_t{a.rows} * a.heads * (a.head_dim / Pc) * a.segs;
  if (2 * blocks <= std::int64_t{3 - Stages} * sm_count())
    return launch_walk_for<128, Pc, 64, Stages>(a, stream);
  return launch_walk_for<128, Pc, 128, Stages>(a, stream);
}

}  // namespace

cudaError_t launch_state_walk(const chunk_args& a, int stages, cudaStream_t stream) {
  const bool wide = cols_for(a.head_dim) == 64;
  if (stages == 1)
    return wide ? launch_walk_pc<64, 1>(a, stream) : launch_walk_pc<32, 1>(a, stream);
  return wide ? launch_walk_pc<64, 2>(a, stream) : launch_walk_pc<32, 2>(a, stream);
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
