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
// With e_t = e^{G_C - G_t}, diag(e) U = diag(e) U1 - (diag(e) W) S0^T, so the
// state update needs only U' = e U1 - (e W) S0^T and S1 = gamma_C S0 + U'^T K.
// Only the products with S0 depend on the state: `chunk_prepare`
// (delta_rule_chunk_prepare.cu) makes e W, e U1, Qe, Oi of every (chunk,
// value head) in parallel (products on tensor cores, the unit-triangular
// solve in f32 FMAs); `chunk_recurrence` (delta_rule_chunk_recurrence.cu)
// walks a row's chunks in order per (value head, 32 value rows), S in shared
// memory, making U' and S1 and storing each chunk's S0; `chunk_output`
// (delta_rule_chunk_output.cu) then makes every chunk's O = Oi + Qe S0^T in
// parallel. This file: the chunk table, the workspace, the launcher.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/delta_rule.hpp"
#include "kernels/cuda/internal/chunk_table.cuh"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_chunk.cuh"
#include "kernels/cuda/internal/delta_rule_scan.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::chunked::chunk;
using detail::chunked::chunk_args;
using detail::chunked::full_mask;
using detail::chunked::per_head;

// One warp: every row's chunk count, a prefix sum, the (row, chunk) table.
// A row that would overflow the table (a wrong `tokens`) stays sequential.
__global__ void chunk_table_kernel(chunk_args p) {
  detail::fill_chunk_table<chunk>(p);
}

// Byte offsets of the workspace's parts.
struct chunk_layout {
  int capacity = 0;
  std::size_t row_first = 0, n_chunks = 0, table = 0, blob = 0, keys = 0, states = 0, total = 0;
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
  l.states = l.keys + align256(sizeof(float) * static_cast<std::size_t>(cap * w.num_k_heads *
                                                                        chunk * w.head_k_dim));
  l.total = l.states +
            align256(sizeof(float) * static_cast<std::size_t>(cap * w.num_v_heads * w.head_v_dim *
                                                              std::int64_t{w.head_k_dim}));
  return l;
}

std::int32_t threshold(std::int32_t chunked_from) {
  return chunked_from > 0 ? chunked_from : gated_delta_default_chunked_from;
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
      reinterpret_cast<std::uintptr_t>(ws.data) % 256 != 0 || rows > 65535 ||
      reinterpret_cast<std::uintptr_t>(p.out) % 8 != 0) {  // O goes out as float2
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
  a.states = reinterpret_cast<float*>(base + l.states);
  chunk_table_kernel<<<1, 32, 0, stream>>>(a);
  if (const cudaError_t err = detail::launch_gated_delta_scan(p, a.row_first, stream);
      err != cudaSuccess) {
    return err;
  }
  if (const cudaError_t err = detail::chunked::launch_prepare(a, w.head_k_dim, stream);
      err != cudaSuccess) {
    return err;
  }
  // Two stages ahead when every recurrence block of the rows that can be
  // chunked fits one an SM; else one stage, two blocks an SM.
  const std::int64_t walked =
      std::min<std::int64_t>(rows, std::max<std::int64_t>(ws.tokens, 0) / from);
  const bool deep = std::int64_t{w.head_v_dim / detail::chunked::slice} * w.num_v_heads * walked <=
                    detail::sm_count();
  if (const cudaError_t err = detail::chunked::launch_recurrence(a, w.head_k_dim, deep, stream);
      err != cudaSuccess) {
    return err;
  }
  return detail::chunked::launch_output(a, w.head_k_dim, stream);
}

}  // namespace mstar::kernels::cuda
