// The Mamba-2 SSD scan in chunks of 64 tokens on TF32 tensor cores
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
// and the chunk's last state h_C = e^{G_C} h0 + sum_i e^{G_C - G_i} dt_i x_i B_i^T.
// Only the terms with h0 depend on the state: `chunk_intra` (here) writes
// the first two terms of every (chunk, head) in parallel and the chunk's
// decays; `chunk_recurrence` (ssd_chunk_recurrence.cu) walks a row's chunks
// in order per (head, 32 head-dim rows), h in shared memory, adding the
// third term and updating h. Tokens past a row's end inside its last chunk
// have dt 0 (so G stays flat and they add nothing) and zero inputs.
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

// Block (table entry c, head h): the chunk's decays into the workspace and
// its tokens' y = (masked M) x + D x. Warp w owns tile row w / 2 of M and
// of each 32-column slice of y.
template <int N>
__global__ void __launch_bounds__(threads) chunk_intra_kernel(chunk_args a) {
  const int c = static_cast<int>(blockIdx.x);
  if (c >= *a.n_chunks)
    return;
  const int h = static_cast<int>(blockIdx.y);
  const int2 e = a.table[c];
  const std::int64_t t0 = a.cu[e.x] + std::int64_t{e.y} * chunk;
  const int n = min(chunk, static_cast<int>(a.cu[e.x + 1] - t0));
  const int g = h / a.heads_per_group;
  const int P = a.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  __shared__ float cum[chunk];
  __shared__ float dts[chunk];
  __shared__ __align__(128) float mat[chunk * ld_m];
  __shared__ __align__(128) float stage[2][chunk * ld_p];

  // dt and the running sum of the log decays: a scan per warp, then the
  // second warp adds the first's total.
  if (warp < 2) {
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
  const float first_half = cum[31];
  __syncthreads();
  if (tid >= 32 && tid < chunk)
    cum[tid] += first_half;
  __syncthreads();
  if (tid < chunk) {
    float* dec = a.decays + (std::int64_t{c} * a.heads + h) * dec_stride;
    const float last = cum[chunk - 1];  // G of the last real token: padding adds 0
    dec[tid] = expf(cum[tid]);
    dec[chunk + tid] = expf(last - cum[tid]) * dts[tid];
    if (tid == 0)
      dec[2 * chunk] = expf(last);
  }

  // M = C B^T over N in slices of 32 columns; tiles above the diagonal stay 0.
  const int ti = warp / 2;
  frag_acc acc[2];
  wmma::fill_fragment(acc[0], 0.0F);
  wmma::fill_fragment(acc[1], 0.0F);
  const std::int64_t bc0 = std::int64_t{g} * N;
  for (int k0 = 0; k0 < N; k0 += slice) {
    for (int i = tid; i < chunk * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      const bool ok = t < n;
      const std::int64_t off = (t0 + t) * a.bc_stride + bc0 + k0 + col;
      stage[0][t * ld_p + col] = ok ? a.C[off] : 0.0F;
      stage[1][t * ld_p + col] = ok ? a.B[off] : 0.0F;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < slice; kk += 8) {
      frag_a_row fa;
      load_tf32(fa, stage[0] + ti * 16 * ld_p + kk, ld_p);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int tj = 2 * (warp % 2) + j;
        if (tj <= ti) {
          frag_b_col fb;  // B^T: element (n, i) at B[i][n]
          load_tf32(fb, stage[1] + tj * 16 * ld_p + kk, ld_p);
          wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int tj = 2 * (warp % 2) + j;
    wmma::store_matrix_sync(mat + ti * 16 * ld_m + tj * 16, acc[j], ld_m, wmma::mem_row_major);
  }
  __syncthreads();
  for (int i = tid; i < chunk * chunk; i += threads) {
    const int t = i / chunk;
    const int s = i % chunk;
    float& m = mat[t * ld_m + s];
    m = s <= t ? m * expf(cum[t] - cum[s]) * dts[s] : 0.0F;
  }
  __syncthreads();

  // y = M x + D x, 32 head-dim columns at a time: warp w makes tile (w / 2, w % 2).
  const float skip = a.D != nullptr ? a.D[h] : 0.0F;
  const std::int64_t y_stride = std::int64_t{a.heads} * P;
  for (int p0 = 0; p0 < P; p0 += slice) {
    for (int i = tid; i < chunk * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      stage[0][t * ld_p + col] =
          t < n ? a.x[(t0 + t) * a.x_stride + std::int64_t{h} * P + p0 + col] : 0.0F;
    }
    __syncthreads();
    const int tj = warp % 2;
    frag_acc out;
    wmma::fill_fragment(out, 0.0F);
    for (int k0 = 0; k0 < (ti + 1) * 16; k0 += 8) {
      frag_a_row fa;
      frag_b_row fb;
      load_tf32(fa, mat + ti * 16 * ld_m + k0, ld_m);
      load_tf32(fb, stage[0] + k0 * ld_p + tj * 16, ld_p);
      wmma::mma_sync(out, fa, fb, out);
    }
    wmma::store_matrix_sync(stage[1] + ti * 16 * ld_p + tj * 16, out, ld_p, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < chunk * slice; i += threads) {
      const int t = i / slice;
      const int col = i % slice;
      if (t < n) {
        a.y[(t0 + t) * y_stride + std::int64_t{h} * P + p0 + col] =
            stage[1][t * ld_p + col] + skip * stage[0][t * ld_p + col];
      }
    }
    __syncthreads();
  }
}

// Byte offsets of the workspace's parts.
struct chunk_layout {
  int capacity = 0;
  std::size_t row_first = 0, n_chunks = 0, table = 0, decays = 0, total = 0;
};

std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

bool chunkable(const ssd_weights& w) {
  return (w.state_size == 64 || w.state_size == 128) && w.head_dim > 0 && w.head_dim % slice == 0 &&
         w.head_dim / slice <= 65535 && w.num_heads > 0 && w.num_heads <= 65535 && w.n_groups > 0 &&
         w.num_heads % w.n_groups == 0;
}

chunk_layout layout_for(const ssd_weights& w, std::int64_t tokens, std::int64_t rows,
                        std::int32_t chunked_from) {
  chunk_layout l;
  const std::int64_t from = std::max<std::int32_t>(chunked_from, 1);
  if (tokens <= 0 || rows <= 0)
    return l;
  const std::int64_t cap = detail::ceil_div(tokens, std::int64_t{chunk}) +
                           std::min(rows, detail::ceil_div(tokens, from));
  if (cap > (std::int64_t{1} << 30) / std::max(w.num_heads, 1))
    return l;
  l.capacity = static_cast<int>(cap);
  l.row_first = 0;
  l.n_chunks = align256(sizeof(std::int32_t) * static_cast<std::size_t>(rows));
  l.table = l.n_chunks + 256;
  l.decays = l.table + align256(sizeof(int2) * static_cast<std::size_t>(cap));
  l.total =
      l.decays + align256(sizeof(float) * static_cast<std::size_t>(cap * w.num_heads * dec_stride));
  return l;
}

std::int32_t threshold(std::int32_t chunked_from) {
  return chunked_from > 0 ? chunked_from : ssd_default_chunked_from;
}

template <int N>
cudaError_t launch_intra(const chunk_args& a, cudaStream_t stream) {
  chunk_intra_kernel<N><<<dim3(static_cast<unsigned>(a.capacity), static_cast<unsigned>(a.heads)),
                          threads, 0, stream>>>(a);
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
  a.decays = reinterpret_cast<float*>(base + l.decays);
  chunk_table_kernel<<<1, 32, 0, stream>>>(a);
  if (const cudaError_t err = detail::launch_ssd_scan(p, a.row_first, stream); err != cudaSuccess) {
    return err;
  }
  if (const cudaError_t err =
          w.state_size == 64 ? launch_intra<64>(a, stream) : launch_intra<128>(a, stream);
      err != cudaSuccess) {
    return err;
  }
  return detail::ssd_chunked::launch_recurrence(a, stream);
}

}  // namespace mstar::kernels::cuda
