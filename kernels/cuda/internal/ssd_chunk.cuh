#pragma once

// Shared by the chunked SSD kernels (ssd_chunked.cu: the math, the chunk
// table, the workspace, the launcher; ssd_chunk_staged.cu: C B^T per group
// and the chunks' own end states; ssd_chunk_recurrence.cu: the walk that
// passes states between chunks; ssd_chunk_walk.cu: both in one kernel;
// ssd_chunk_staged_output.cu: the outputs): the chunk
// geometry, the kernels' arguments, the decays of a chunk, the warps' tiles
// (their TF32 products: internal/mma_tf32.cuh). Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {

/// The one chunk size (tokens). 128 over 64: the per-chunk states are
/// written, read, rewritten and read again, and at N 128 one [P][N] state
/// weighs as much as the chunk's x ([chunk][P]), so 64 would double that
/// traffic (kernels/cuda/README.md has the arithmetic).
constexpr int chunk = 128;
constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int tiles = chunk / 16;  // 16-token tiles of a chunk
constexpr int pairs = tiles / 2;   // (i, tiles - 1 - i): equal causal area
constexpr int ld_l = chunk + 4;    // shared [tokens][chunk]
constexpr unsigned full_mask = 0xffffffffU;
static_assert(chunk <= threads && chunk % 32 == 0 && warps % pairs == 0);

/// Head-dim columns a block takes per pass: 64 when P allows, else 32.
__host__ __device__ constexpr int cols_for(int head_dim) {
  return head_dim % 64 == 0 ? 64 : 32;
}

struct chunk_args {
  const float* dt_bias;
  const float* A_log;
  const float* D;
  int heads, head_dim, state_size, heads_per_group, groups;
  float dt_min, dt_max;
  const float* x;
  const float* dt;
  const float* B;
  const float* C;
  std::int64_t x_stride, dt_stride, bc_stride;
  float* y;
  const std::int32_t* cu;
  float* state;
  const std::int32_t* slots;
  const std::uint8_t* has_state;
  int rows, chunked_from, capacity;
  // x, B and C rows 16-byte aligned (pointers and strides): the staged
  // kernels copy them 16 bytes at a time, else 4.
  bool vec;
  std::int32_t* row_first;  // [R]: the row's first chunk, -1 when it is not chunked
  std::int32_t* n_chunks;   // [1]: chunks in the table
  int2* table;              // [capacity]: (row, chunk of the row)
  float* gammas;            // [capacity][H]: e^{G_C}, the chunk's whole decay
  // [capacity][G][chunk][chunk]: C_t . B_s of the group, the 16x16 tiles on
  // and below the diagonal only (the others never written nor read).
  float* cb;
  // [capacity][H][P][N]: the chunk's own end state (zero start), replaced by
  // the walk with the state at the chunk's start.
  float* states;
  // 2: the state walk takes a row of two chunks or more in two halves at
  // once (ssd_chunk_walk.cu), chunks [0, m) from the slot's state and
  // [m, nc) from zero, m = ceil(nc / 2); the second half's start states
  // are then its own, and chunk_output adds gamma_c H, H the first half's
  // end (the true start of chunk m, in `states`), gamma_c = `gammas`[c]
  // the second half's decay from chunk m to c; at chunk m's entry
  // `gammas` holds the whole second half's decay, and chunk_output writes
  // the slot from `ends` + it times H. 1: one walk a row.
  int segs;
  // [R][H][P][N] (segs 2): the second half's end state from zero.
  float* ends;
  // The state walk asks L2 for chunk j + 2's x and B rows while it
  // multiplies chunk j (always with one shared stage).
  bool walk_prefetch;
};

/// The chunk of table entry c: its first token and its real tokens.
struct chunk_span {
  std::int64_t t0;
  int n;
};

/// Read through L2 (ld.global.cg): the chained kernels read the table
/// before they wait on the kernel before them (see `chained_entry`).
__device__ __forceinline__ chunk_span span_of(const chunk_args& a, int c) {
  const int2 e = __ldcg(a.table + c);
  const std::int64_t t0 = __ldcg(a.cu + e.x) + std::int64_t{e.y} * chunk;
  return {t0, min(chunk, static_cast<int>(__ldcg(a.cu + e.x + 1) - t0))};
}

/// The start of a kernel launched chained in the default path
/// (ssd_chunked.cu): lets the next kernel start launching, and waits at
/// once on the one before it when x, B and C rows are not 16-byte aligned.
/// Such a kernel reads before its wait only what kernels finished before
/// the one it chains on wrote (the inputs, the table), the bulk by
/// cp.async.cg and the rest by ld.global.cg, both from L2, where those
/// writes are; rows copied 4 bytes at a time go through L1 (cp.async.ca),
/// which may hold lines of an earlier call's, so those wait first.
__device__ __forceinline__ void chained_entry(const chunk_args& a) {
  chain_release();
  if (!a.vec)
    chain_wait();
}

/// dt as the sequential kernel computes it: softplus (torch's threshold 20)
/// of raw + bias, then the clamp.
__device__ __forceinline__ float dt_of(const chunk_args& a, std::int64_t t, int h) {
  const float v = __ldcg(a.dt + t * a.dt_stride + h) + a.dt_bias[h];
  const float sp = v > 20.0F ? v : log1pf(expf(v));
  return fminf(fmaxf(sp, a.dt_min), a.dt_max);
}

/// dt of the chunk's tokens into dts[chunk] and G_t, the running sum of
/// dt A (tokens past the row's end, t >= n, add 0), into cum[chunk]: the
/// first chunk / 32 warps scan 32 entries each, then each entry adds the
/// totals of the warps before it. Called by the whole block; ends synced.
__device__ __forceinline__ void chunk_log_decays(const chunk_args& a, std::int64_t t0, int n, int h,
                                                 float* cum, float* dts) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  if (tid < chunk) {
    const float dtv = tid < n ? dt_of(a, t0 + tid, h) : 0.0F;
    float la = dtv * -expf(a.A_log[h]);
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float v = __shfl_up_sync(full_mask, la, off);
      if (lane >= off)
        la += v;
    }
    dts[tid] = dtv;
    cum[tid] = la;
  }
  __syncthreads();
  float before = 0.0F;
  if (tid < chunk) {
    for (int w = 0; w < tid / 32; ++w)
      before += cum[32 * w + 31];
  }
  __syncthreads();
  if (tid < chunk)
    cum[tid] += before;
  __syncthreads();
}

/// The output tiles of warp w over a [chunk][Cols] slice of y: 16-token
/// tile rows `w % pairs` and `tiles - 1 - w % pairs` (so every warp's causal
/// products span tiles + 1 tile-widths of tokens), Cols / 32 column tiles
/// from column group `w / pairs`.
template <int Cols>
struct out_tiles {
  static constexpr int col_tiles = Cols / 16 / (warps / pairs);
  static_assert(col_tiles >= 1 && col_tiles * (warps / pairs) * 16 == Cols);
  __device__ __forceinline__ static int lo(int w) { return w % pairs; }
  __device__ __forceinline__ static int hi(int w) { return tiles - 1 - w % pairs; }
  __host__ __device__ static constexpr int col0(int w) { return (w / pairs) * col_tiles; }
  // Every (tile row, column tile) taken by exactly one warp.
  static constexpr bool covered() {
    int seen[tiles][Cols / 16] = {};
    for (int w = 0; w < warps; ++w) {
      for (int j = 0; j < col_tiles; ++j) {
        ++seen[w % pairs][col0(w) + j];
        ++seen[tiles - 1 - w % pairs][col0(w) + j];
      }
    }
    for (const auto& row : seen) {
      for (const int v : row) {
        if (v != 1)
          return false;
      }
    }
    return true;
  }
};
static_assert(out_tiles<32>::covered() && out_tiles<64>::covered());

/// The tiles of warp w over a [Cols][N] slice of a chunk's own state:
/// 16-row tile `w % (Cols / 16)`, `col_tiles` column tiles from
/// `col0(w)`.
template <int N, int Cols>
struct state_tiles {
  static constexpr int row_tiles = Cols / 16;
  static constexpr int col_tiles = (N / 16) * row_tiles / warps;
  static_assert(warps % row_tiles == 0 && col_tiles >= 1 &&
                col_tiles * warps == (N / 16) * row_tiles);
  __device__ __forceinline__ static int row(int w) { return w % row_tiles; }
  __device__ __forceinline__ static int col0(int w) { return (w / row_tiles) * col_tiles; }
};

/// The walk (ssd_chunk_recurrence.cu), after the own states: a thread per
/// 4 state entries of a (row, head), leaving each chunk's start state in
/// `states` and the row's last state in its slot. Rows the table does not
/// hold are left alone.
[[nodiscard]] cudaError_t launch_state_pass(const chunk_args& a, bool chained, cudaStream_t stream);

/// The chunk kernels (ssd_chunk_staged.cu, ssd_chunk_staged_output.cu): C
/// B^T per (chunk, group) into `cb` (needs only the table); every (chunk,
/// head)'s own end state and e^{G_C} into `states` / `gammas`; the outputs,
/// a block per (chunk, head), from `cb` and the start states. Every operand
/// is copied to shared memory by cp.async at once
/// (internal/ssd_chunk_stage.cuh); leading dimensions read down a column
/// are padded for no bank conflicts. `chained`: launched through
/// `launch_chained` (internal/common.cuh), else plainly.
[[nodiscard]] cudaError_t launch_cb_staged(const chunk_args& a, bool chained, cudaStream_t stream);
[[nodiscard]] cudaError_t launch_own_states_staged(const chunk_args& a, bool chained,
                                                   cudaStream_t stream);

/// C B^T as launch_cb_staged's, with C and B copied 64 state columns at a
/// time (less shared memory: it runs beside the state walk); launched
/// chained.
[[nodiscard]] cudaError_t launch_cb_sliced(const chunk_args& a, cudaStream_t stream);
[[nodiscard]] cudaError_t launch_outputs_staged(const chunk_args& a, bool chained,
                                                cudaStream_t stream);

/// The own states and the walk in one kernel (ssd_chunk_walk.cu): a block
/// per (row, head, tile of the [P][N] state) walks the row's chunks with
/// the state in its accumulators, leaving each chunk's start state in
/// `states` and the row's last state in its slot; with `a.segs` 2, a block
/// per half of the row (chunk_args::segs: `gammas` written, the second
/// half's start states its own, its end in `ends`, chunk_output completes
/// both). `stages`: 2 shared stages (the next chunk's operands copied
/// while this one is multiplied; a block an SM at N 128) or 1 (two blocks
/// an SM). Launched chained; needs only the table (made before a plain
/// launch).
[[nodiscard]] cudaError_t launch_state_walk(const chunk_args& a, int stages, cudaStream_t stream);

/// Blocks of the state walk an SM holds at N 128 with full-width tiles:
/// 1 with two shared stages, 2 with one.
constexpr int walk_blocks_per_sm(int stages) {
  return 3 - stages;
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
