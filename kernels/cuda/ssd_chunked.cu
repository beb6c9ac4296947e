// The Mamba-2 SSD scan in chunks of 128 tokens (ssd_chunked::chunk) on TF32 tensor cores
// (kernels/cuda/recurrent.hpp's workspace overload).
//
// Per head and chunk (tokens t = 0..L-1, state h0 [P][N] at its start), with
// la_t = dt_t A the log decays and G_t their running sum inside the chunk
// (G_t includes la_t), the recurrence h_t = e^{la_t} h_{t-1} + dt_t x_t B_t^T
// unrolls to
//   h_t = e^{G_t} h0 + sum_{i<=t} e^{G_t - G_i} dt_i x_i B_i^T,
// so the outputs y_t = h_t C_t + D x_t are
//   y_t = sum_{i<=t} M_ti x_i + D x_t + e^{G_t} h0 C_t,
//   M_ti = (C_t . B_i) e^{G_t - G_i} dt_i   (lower triangle with diagonal),
// and the chunk's last state h_C = e^{G_C} h0 + S,
//   S = sum_i e^{G_C - G_i} dt_i x_i B_i^T   (the chunk's own, from zero).
// Three launches after the table and the sequential scan (for the rows
// left to it), chained (internal/common.cuh's programmatic dependent
// launch: each starts as the one before drains): `state_walk`
// (ssd_chunk_walk.cu), a block per (row, head, tile of the [P][N] state),
// walks the row's chunks in order with the state in its tensor-core
// accumulators, h = e^{G_C} h + S, S made from the chunk's x and B as it
// goes, leaving each chunk's start state h0 in the workspace and the last
// h in the slot; `chunk_cb` (ssd_chunk_staged.cu) makes C B^T once per
// (chunk, group), the tiles on and below the diagonal, since B and C are
// per group; `chunk_output` (ssd_chunk_staged_output.cu) then makes every
// output in parallel, per (chunk, head): (e^{G_t} C_t) h0^T, then M x with
// M formed from the group's C B^T as it is staged, + D x. Its warps pair
// 16-token tile rows i and 7 - i, so each one's causal product is 9 tiles
// long. With few (row, head)s (one row of 64 or 128 heads), where the
// walk would leave most of the GPU idle behind a row's serial chunks, it
// takes each row in two halves at once (chunk_args::segs; the second from
// zero, chunk_output adding what it lacks, gamma_c H, to its start states
// as it stages them): 8 serial steps at 2,048 tokens where there were 16.
// MSTAR_SSD_VARIANT (below) picks a path for A/B measurements; =0 runs
// session 31's four plain launches
// instead (mamba-ssm's structure): chunk_cb; `chunk_state`
// (ssd_chunk_staged.cu), every (chunk, head)'s S and e^{G_C} in parallel
// into the workspace; `state_pass` (ssd_chunk_recurrence.cu), an
// elementwise walk of each (row, head)'s chunks leaving h0 over each S;
// chunk_output. The walk in one kernel writes the per-chunk states once
// and reads them once (chunk_output) where that path wrote, read,
// rewrote and read them: 512 MiB less traffic at 8 x 2,048 tokens, 64
// heads of 64, N 128 (kernels/cuda/README.md).
// Tokens past a row's end inside its last chunk have dt 0 (so G stays flat
// and they add nothing) and zero inputs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/internal/chunk_table.cuh"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"
#include "kernels/cuda/internal/ssd_scan.hpp"
#include "kernels/cuda/recurrent.hpp"

namespace mstar::kernels::cuda {
namespace {

using namespace detail::ssd_chunked;

// One warp: every row's chunk count, a prefix sum, the (row, chunk) table.
// A row that would overflow the table (a wrong `tokens`) stays sequential.
// Launched chained in the default path: it waits before it writes what the
// kernels before it (a previous call's) read.
__global__ void chunk_table_kernel(chunk_args p) {
  detail::chain_start();
  detail::fill_chunk_table<chunk>(p);
}

// Byte offsets of the workspace's parts; `ends` (the state walk's second
// halves' end states, [R][H][P][N]) after `total`, up to `with_ends`.
struct chunk_layout {
  int capacity = 0;
  std::size_t row_first = 0, n_chunks = 0, table = 0, gammas = 0, cb = 0, states = 0, total = 0;
  std::size_t ends = 0, with_ends = 0;
};

std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

bool chunkable(const ssd_weights& w) {
  return (w.state_size == 64 || w.state_size == 128) && w.head_dim > 0 && w.head_dim % 32 == 0 &&
         w.head_dim <= 65536 && w.num_heads > 0 && w.num_heads <= 65535 && w.n_groups > 0 &&
         w.num_heads % w.n_groups == 0;
}

// MSTAR_SSD_VARIANT, for A/B measurements: 0 the four launches of session
// 31 (C B^T, the own states, the elementwise walk, the outputs; plain
// launches); 2 the same kernels launched chained (C B^T copied 64 state
// columns at a time); 1 the states walked in one kernel (ssd_chunk_walk.cu)
// a row at a time, two shared stages, every launch chained; 3 as 1 with
// each row's chunks walked in two halves at once (chunk_args::segs); 4 the
// halves with one shared stage (two blocks an SM) and the next chunk but
// one asked of L2; 5 as 1 with that L2 prefetch; 6 as 3 with it. Unset (or
// anything else): by shape (`by_shape`). MSTAR_PDL=0 turns the chaining
// off alone.
int variant_env() {
  static const int v = [] {
    const char* e = std::getenv("MSTAR_SSD_VARIANT");
    const int n = e == nullptr ? -1 : std::atoi(e);
    return n >= 0 && n <= 6 ? n : -1;
  }();
  return v;
}

// The default: with b = R H (P / Pc) walk blocks of full state width
// (Pc = cols_for(P)), 4 (the halves, one stage, two blocks an SM) up to 1,024
// blocks, else 1. Measured on the H200 (session 34, fourth call, one binary,
// us): 4 was the fastest path at every bench shape, 151.3 / 967.1 / 258.8 /
// 1845.2 at h64 1x2048 / h64 8x2048 / h128 1x2048 / h128 8x2048, where 3
// took 153.5 / 1042.0 / 276.6 / 1991.9 and 1 168.9 / 1005.8 / 267.4 /
// 1917.7. Past 1,024 blocks (8 rows of 128 heads) the halves' end states
// ([R][H][P][N] f32 in the workspace) grow with R while the GPU is full
// anyway; 1 there is unmeasured against 4.
int by_shape(const ssd_weights& w, std::int64_t rows) {
  const std::int64_t b = rows * w.num_heads * (w.head_dim / cols_for(w.head_dim));
  return b <= 1024 ? 4 : 1;
}

int variant_for(const ssd_weights& w, std::int64_t rows) {
  const int v = variant_env();
  return v >= 0 ? v : by_shape(w, rows);
}

// capacity = ceil(T / chunk) + min(R, ceil(T / chunked_from)) table entries
// (a row's last chunk may be partial); per entry and group a [chunk][chunk]
// f32 C B^T, per entry and head one decay and a [P][N] f32 state; with the
// walk in halves (variants 3, 4 and 6) per row and head a [P][N] f32 state.
chunk_layout layout_for(const ssd_weights& w, std::int64_t tokens, std::int64_t rows,
                        std::int32_t chunked_from) {
  chunk_layout l;
  const std::int64_t from = std::max<std::int32_t>(chunked_from, 1);
  if (tokens <= 0 || rows <= 0)
    return l;
  const std::int64_t cap = detail::ceil_div(tokens, std::int64_t{chunk}) +
                           std::min(rows, detail::ceil_div(tokens, from));
  if (cap > (std::int64_t{1} << 29) / std::max(w.num_heads, 1))
    return l;
  const auto entries = static_cast<std::size_t>(cap * w.num_heads);
  l.capacity = static_cast<int>(cap);
  l.row_first = 0;
  l.n_chunks = align256(sizeof(std::int32_t) * static_cast<std::size_t>(rows));
  l.table = l.n_chunks + 256;
  l.gammas = l.table + align256(sizeof(int2) * static_cast<std::size_t>(cap));
  l.cb = l.gammas + align256(sizeof(float) * entries);
  l.states = l.cb + sizeof(float) * static_cast<std::size_t>(cap) *
                        static_cast<std::size_t>(w.n_groups) * chunk * chunk;
  l.total = l.states + align256(sizeof(float) * entries * static_cast<std::size_t>(w.head_dim) *
                                static_cast<std::size_t>(w.state_size));
  l.ends = l.total;
  l.with_ends = l.total;
  if (const int v = variant_for(w, rows); v == 3 || v == 4 || v == 6) {
    l.with_ends +=
        align256(sizeof(float) * static_cast<std::size_t>(rows * w.num_heads) *
                 static_cast<std::size_t>(w.head_dim) * static_cast<std::size_t>(w.state_size));
  }
  return l;
}

bool aligned16(const void* p, std::int64_t stride) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && stride % 4 == 0;
}

std::int32_t threshold(std::int32_t chunked_from) {
  return chunked_from > 0 ? chunked_from : ssd_default_chunked_from;
}

}  // namespace

std::size_t ssd_scan_workspace_bytes(const ssd_weights& w, std::int64_t tokens, std::int64_t rows,
                                     std::int32_t chunked_from) {
  if (!chunkable(w))
    return 0;
  return layout_for(w, tokens, rows, threshold(chunked_from)).with_ends;
}

cudaError_t ssd_scan_varlen(const ssd_scan_varlen_params& p, const ssd_workspace& ws,
                            cudaStream_t stream) {
  if (p.cu_seqlens.size() < 2)
    return cudaSuccess;
  const auto rows = static_cast<std::int64_t>(p.cu_seqlens.size()) - 1;
  const std::int32_t from = threshold(ws.chunked_from);
  const chunk_layout l = layout_for(p.w, ws.tokens, rows, from);
  const auto& w = p.w;
  if (!chunkable(w) || l.total == 0 || ws.data == nullptr || ws.bytes < l.total ||
      reinterpret_cast<std::uintptr_t>(ws.data) % 256 != 0 || rows > 65535 ||
      reinterpret_cast<std::uintptr_t>(p.state) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(p.y) % 8 != 0 ||  // y goes out as float2
      p.slot_indices.size() < static_cast<std::size_t>(rows) ||
      p.has_state.size() < static_cast<std::size_t>(rows)) {
    return detail::launch_ssd_scan(p, nullptr, stream);
  }
  auto* base = static_cast<std::byte*>(ws.data);
  chunk_args a{};
  a.dt_bias = w.dt_bias;
  a.A_log = w.A_log;
  a.D = w.D;
  a.heads = w.num_heads;
  a.head_dim = w.head_dim;
  a.state_size = w.state_size;
  a.heads_per_group = w.num_heads / w.n_groups;
  a.groups = w.n_groups;
  a.dt_min = w.dt_min;
  a.dt_max = w.dt_max;
  a.x = p.in.x;
  a.dt = p.in.dt;
  a.B = p.in.B;
  a.C = p.in.C;
  a.x_stride = p.in.x_stride != 0 ? p.in.x_stride : std::int64_t{w.num_heads} * w.head_dim;
  a.dt_stride = p.in.dt_stride != 0 ? p.in.dt_stride : w.num_heads;
  a.bc_stride = p.in.bc_stride != 0 ? p.in.bc_stride : std::int64_t{w.n_groups} * w.state_size;
  a.vec = aligned16(a.x, a.x_stride) && aligned16(a.B, a.bc_stride) && aligned16(a.C, a.bc_stride);
  a.y = p.y;
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
  a.gammas = reinterpret_cast<float*>(base + l.gammas);
  a.cb = reinterpret_cast<float*>(base + l.cb);
  a.states = reinterpret_cast<float*>(base + l.states);
  // The sequential scan's blocks wait for the table and let the kernel
  // after them start only as they end (chained or not), so every kernel
  // after it may read the table (and the inputs, which the kernels before
  // the table made) before it waits on the one before it.
  a.segs = 1;
  a.ends = nullptr;
  a.walk_prefetch = false;
  int v = variant_for(w, rows);
  if (v == 3 || v == 4 || v == 6) {
    // The halves' ends have room only in a workspace sized for them (one
    // sized for more rows may not have it): else one walk a row.
    if (ws.bytes >= l.with_ends) {
      a.segs = 2;
      a.ends = reinterpret_cast<float*>(base + l.ends);
    } else {
      v = 1;
    }
  }
  a.walk_prefetch = v == 4 || v == 5 || v == 6;
  const bool chained = v != 0;
  if (chained)
    detail::launch_chained(chunk_table_kernel, dim3(1), dim3(32), 0, stream, a);
  else
    chunk_table_kernel<<<1, 32, 0, stream>>>(a);
  if (const cudaError_t err = detail::launch_ssd_scan(p, a.row_first, stream, chained);
      err != cudaSuccess) {
    return err;
  }
  if (v == 0) {
    if (const cudaError_t err = launch_cb_staged(a, false, stream); err != cudaSuccess)
      return err;
    if (const cudaError_t err = launch_own_states_staged(a, false, stream); err != cudaSuccess)
      return err;
    if (const cudaError_t err = launch_state_pass(a, false, stream); err != cudaSuccess)
      return err;
    return launch_outputs_staged(a, false, stream);
  }
  if (v == 2) {
    // The own states first (C B^T's blocks fill the GPU as they drain),
    // the walk waits at its start.
    if (const cudaError_t err = launch_own_states_staged(a, true, stream); err != cudaSuccess)
      return err;
    if (const cudaError_t err = launch_cb_sliced(a, stream); err != cudaSuccess)
      return err;
    if (const cudaError_t err = launch_state_pass(a, true, stream); err != cudaSuccess)
      return err;
    return launch_outputs_staged(a, true, stream);
  }
  // The walk first: its blocks live for a row's chunks, and C B^T's short
  // blocks fill the GPU beside them (when the walk takes 64 state columns
  // a block) or as its last ones drain.
  if (const cudaError_t err = launch_state_walk(a, v == 4 ? 1 : 2, stream); err != cudaSuccess)
    return err;
  if (const cudaError_t err = launch_cb_sliced(a, stream); err != cudaSuccess)
    return err;
  return launch_outputs_staged(a, true, stream);
}

}  // namespace mstar::kernels::cuda
