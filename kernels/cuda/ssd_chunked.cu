// The Mamba-2 SSD scan in chunks of 128 tokens on TF32 tensor cores
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
// Three steps (mamba-ssm's structure): `chunk_state` (ssd_chunk_recurrence.cu)
// makes every (chunk, head)'s S and e^{G_C} in parallel; `state_pass`
// walks each (row, head)'s chunks in order, elementwise on the [P][N]
// state, h = e^{G_C} h + S, leaving each chunk's h0 in place of its S and
// the last h in the slot; `chunk_output` (here) then makes every output in
// parallel, per (chunk, head, 64 tokens): [M | e^{G_t} C_t] [x ; h0^T] + D x.
// Tokens past a row's end inside its last chunk have dt 0 (so G stays flat
// and they add nothing) and zero inputs.
#include <algorithm>
#include <cstddef>
#include <cstdint>

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
__global__ void chunk_table_kernel(chunk_args p) {
  detail::fill_chunk_table<chunk>(p);
}

// Shared memory of an output block, in floats: G_t and dt_t [chunk] each,
// A = [M | gamma C] [64][chunk + N + 4], then either the staged C and B
// slices ([64][32], [chunk][32]) or the x slice [chunk][32], the start
// state's rows [32][N + 4] and the output tiles [64][32].
template <int N>
struct out_smem {
  static constexpr int ld_n = N + 4;
  static constexpr int ld_a = chunk + N + 4;
  static constexpr int am = 2 * chunk;
  static constexpr int cs = am + out_rows * ld_a;
  static constexpr int bs = cs + out_rows * ld_p;
  static constexpr int xs = cs;
  static constexpr int hs = xs + chunk * ld_p;
  static constexpr int ys = hs + slice * ld_n;
  static constexpr int floats = ys + out_rows * ld_p;
  static constexpr std::size_t bytes = sizeof(float) * floats;
  static_assert(bs + chunk * ld_p <= floats);
  static_assert(am % 32 == 0 && cs % 32 == 0 && bs % 32 == 0 && hs % 32 == 0 && ys % 32 == 0);
};

// Block (table entry c, head h, tokens [64 b, 64 b + 64) of the chunk),
// blockIdx.x = (c H + h) * out_blocks + b. Its outputs, tokens t,
//   y_t = sum_{s<=t} M_ts x_s + D x_t + e^{G_t} C_t h_start,
// are one product per 32 head-dim columns: A = [M | e^{G_t} C_t] (rows t,
// K = the tokens up to the block's last, then N) times [x ; h_start^T].
// M = C B^T over N in slices of 32 (the e^{G_t} C_t half of A written as
// C is staged), then masked and scaled. Warp w makes tile row w / 2 and
// the tile columns of parity w % 2 of M, and tile (w / 2, w % 2) of each
// 32-column slice of y.
template <int N>
__global__ void __launch_bounds__(threads) chunk_output_kernel(chunk_args a) {
  using L = out_smem<N>;
  const int ch = static_cast<int>(blockIdx.x) / out_blocks;
  const int c = ch / a.heads;
  if (c >= *a.n_chunks)
    return;
  const int h = ch % a.heads;
  const int r0 = (static_cast<int>(blockIdx.x) % out_blocks) * out_rows;
  const int2 e = a.table[c];
  const std::int64_t t0 = a.cu[e.x] + std::int64_t{e.y} * chunk;
  const int n = min(chunk, static_cast<int>(a.cu[e.x + 1] - t0));
  if (r0 >= n)
    return;
  const int kn = r0 + out_rows;  // tokens that feed this block's outputs
  const int g = h / a.heads_per_group;
  const int P = a.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* cum = smem;
  float* dts = smem + chunk;
  float* am = smem + L::am;
  float* cs = smem + L::cs;
  float* bs = smem + L::bs;
  float* xs = smem + L::xs;
  float* hs = smem + L::hs;
  float* ys = smem + L::ys;

  chunk_log_decays(a, t0, n, h, cum, dts);

  const int ti = warp / 2;
  const int gi = r0 / 16 + ti;  // the warp's tile row within the chunk
  constexpr int col_jobs = chunk / 32;
  frag_acc acc[col_jobs];
#pragma unroll
  for (int j = 0; j < col_jobs; ++j)
    wmma::fill_fragment(acc[j], 0.0F);
  const std::int64_t bc0 = std::int64_t{g} * N;
  for (int k0 = 0; k0 < N; k0 += slice) {
    for (int i = tid; i < out_rows * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      const int tc = r0 + t;
      const float v = tc < n ? a.C[(t0 + tc) * a.bc_stride + bc0 + k0 + col] : 0.0F;
      cs[t * ld_p + col] = v;
      am[t * L::ld_a + chunk + k0 + col] = expf(cum[tc]) * v;
    }
    for (int i = tid; i < kn * slice; i += threads) {
      const int s = i / slice;
      const int col = i % slice;
      bs[s * ld_p + col] = s < n ? a.B[(t0 + s) * a.bc_stride + bc0 + k0 + col] : 0.0F;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < slice; kk += 8) {
      frag_a_row fa;
      load_tf32(fa, cs + ti * 16 * ld_p + kk, ld_p);
#pragma unroll
      for (int j = 0; j < col_jobs; ++j) {
        const int tj = 2 * j + warp % 2;
        if (tj <= gi) {
          frag_b_col fb;  // B^T: element (n, s) at B[s][n]
          load_tf32(fb, bs + tj * 16 * ld_p + kk, ld_p);
          wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < col_jobs; ++j) {
    const int tj = 2 * j + warp % 2;
    if (tj * 16 < kn)
      wmma::store_matrix_sync(am + ti * 16 * L::ld_a + tj * 16, acc[j], L::ld_a,
                              wmma::mem_row_major);
  }
  __syncthreads();
  for (int i = tid; i < out_rows * kn; i += threads) {
    const int t = i / kn;
    const int s = i % kn;
    const int tc = r0 + t;
    float& m = am[t * L::ld_a + s];
    m = s <= tc ? m * expf(cum[tc] - cum[s]) * dts[s] : 0.0F;
  }
  // The masked M is read after the barrier that follows the first staging.

  const float skip = a.D != nullptr ? a.D[h] : 0.0F;
  const std::int64_t y_stride = std::int64_t{a.heads} * P;
  const float* start = a.states + (std::int64_t{c} * a.heads + h) * P * N;
  const int tj = warp % 2;
  for (int p0 = 0; p0 < P; p0 += slice) {
    for (int i = tid; i < kn * slice; i += threads) {
      const int s = i / slice;
      const int col = i % slice;
      xs[s * ld_p + col] =
          s < n ? a.x[(t0 + s) * a.x_stride + std::int64_t{h} * P + p0 + col] : 0.0F;
    }
    for (int i = tid; i < slice * N / 4; i += threads) {
      const int p = i / (N / 4);
      const int col = 4 * (i % (N / 4));
      *reinterpret_cast<float4*>(hs + p * L::ld_n + col) =
          *reinterpret_cast<const float4*>(start + std::int64_t{p0 + p} * N + col);
    }
    __syncthreads();
    frag_acc out;
    wmma::fill_fragment(out, 0.0F);
    for (int k0 = 0; k0 < (gi + 1) * 16; k0 += 8) {
      frag_a_row fa;
      frag_b_row fb;
      load_tf32(fa, am + ti * 16 * L::ld_a + k0, L::ld_a);
      load_tf32(fb, xs + k0 * ld_p + tj * 16, ld_p);
      wmma::mma_sync(out, fa, fb, out);
    }
#pragma unroll 4
    for (int k0 = 0; k0 < N; k0 += 8) {
      frag_a_row fa;
      frag_b_col fb;  // h_start^T: element (n, p) at h[p][n]
      load_tf32(fa, am + ti * 16 * L::ld_a + chunk + k0, L::ld_a);
      load_tf32(fb, hs + tj * 16 * L::ld_n + k0, L::ld_n);
      wmma::mma_sync(out, fa, fb, out);
    }
    wmma::store_matrix_sync(ys + ti * 16 * ld_p + tj * 16, out, ld_p, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < out_rows * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      const int tc = r0 + t;
      if (tc < n) {
        a.y[(t0 + tc) * y_stride + std::int64_t{h} * P + p0 + col] =
            ys[t * ld_p + col] + skip * xs[tc * ld_p + col];
      }
    }
    __syncthreads();
  }
}

// Byte offsets of the workspace's parts.
struct chunk_layout {
  int capacity = 0;
  std::size_t row_first = 0, n_chunks = 0, table = 0, gammas = 0, states = 0, total = 0;
};

std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

bool chunkable(const ssd_weights& w) {
  return (w.state_size == 64 || w.state_size == 128) && w.head_dim > 0 && w.head_dim % slice == 0 &&
         w.head_dim <= 65536 && w.num_heads > 0 && w.num_heads <= 65535 && w.n_groups > 0 &&
         w.num_heads % w.n_groups == 0;
}

// capacity = ceil(T / chunk) + min(R, ceil(T / chunked_from)) table entries
// (a row's last chunk may be partial); per entry and head one decay and a
// [P][N] f32 state.
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
  l.states = l.gammas + align256(sizeof(float) * entries);
  l.total = l.states + align256(sizeof(float) * entries * static_cast<std::size_t>(w.head_dim) *
                                static_cast<std::size_t>(w.state_size));
  return l;
}

std::int32_t threshold(std::int32_t chunked_from) {
  return chunked_from > 0 ? chunked_from : ssd_default_chunked_from;
}

template <int N>
cudaError_t launch_output(const chunk_args& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_output_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(out_smem<N>::bytes));
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.heads * out_blocks);
  chunk_output_kernel<N><<<blocks, threads, out_smem<N>::bytes, stream>>>(a);
  return detail::launch_status();
}

}  // namespace

std::size_t ssd_scan_workspace_bytes(const ssd_weights& w, std::int64_t tokens, std::int64_t rows,
                                     std::int32_t chunked_from) {
  if (!chunkable(w))
    return 0;
  return layout_for(w, tokens, rows, threshold(chunked_from)).total;
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
  a.dt_min = w.dt_min;
  a.dt_max = w.dt_max;
  a.x = p.in.x;
  a.dt = p.in.dt;
  a.B = p.in.B;
  a.C = p.in.C;
  a.x_stride = p.in.x_stride != 0 ? p.in.x_stride : std::int64_t{w.num_heads} * w.head_dim;
  a.dt_stride = p.in.dt_stride != 0 ? p.in.dt_stride : w.num_heads;
  a.bc_stride = p.in.bc_stride != 0 ? p.in.bc_stride : std::int64_t{w.n_groups} * w.state_size;
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
  a.states = reinterpret_cast<float*>(base + l.states);
  chunk_table_kernel<<<1, 32, 0, stream>>>(a);
  if (const cudaError_t err = detail::launch_ssd_scan(p, a.row_first, stream); err != cudaSuccess) {
    return err;
  }
  if (const cudaError_t err = detail::ssd_chunked::launch_states(a, stream); err != cudaSuccess)
    return err;
  return w.state_size == 64 ? launch_output<64>(a, stream) : launch_output<128>(a, stream);
}

}  // namespace mstar::kernels::cuda
