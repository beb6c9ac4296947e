#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/internal/attend_decode_mma.cuh"
#include "kernels/cuda/internal/attend_decode_rows.cuh"
#include "kernels/cuda/internal/attend_decode_rows_mma.cuh"
#include "kernels/cuda/internal/attend_prefill.cuh"
#include "kernels/cuda/internal/attend_tiles.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::attn_args;
using detail::layout;
using detail::query_at;
using detail::query_of;

// Block per (query token, kv head, chunk of GC query heads). Each slot of
// `lanes` threads walks every `slots`-th group of `unroll` positions with its
// own online softmax; the slots merge through shared memory at the end.
// `Stages`: the walk (0 registers, else the tile pipeline's stages).
template <class KV, int D, int GC, int Stages>
__global__ void __launch_bounds__(128, detail::fast_min_blocks<false, GC, Stages>)
    attend_fast(attn_args a) {
  using L = layout<KV, D>;
  constexpr int E = L::elems;
  __shared__ detail::block_smem<KV, D, GC, Stages> smem;
  const int lane = static_cast<int>(threadIdx.x) % L::lanes;
  const int slot = static_cast<int>(threadIdx.x) / L::lanes;
  const int tokens = detail::step_tokens(a.table);
  const long long total = static_cast<long long>(tokens) * a.kv_heads * a.chunks;
  for (long long w = blockIdx.x; w < total; w += gridDim.x) {
    const int chunk = static_cast<int>(w % a.chunks);
    const int kvh = static_cast<int>((w / a.chunks) % a.kv_heads);
    const query_at qa = query_of(a, tokens, w / (static_cast<long long>(a.chunks) * a.kv_heads));
    const int h0 = kvh * a.group + chunk * GC;
    const int valid = a.group - chunk * GC;  // heads of this chunk that exist (>= 1)
    float q[GC][E];
    float acc[GC][E];
    float m[GC];
    float l[GC];
    detail::load_q<KV, D, GC>(a, qa.token, h0, valid, lane, q);
    detail::walk_block<KV, D, GC, Stages>(a, smem, qa.first_page, kvh, lane, slot, 0, qa.positions,
                                          q, acc, m, l);
    detail::merge_slots<KV, D, GC>(
        smem.merge, lane, slot, valid, acc, m, l, [&](int g, int d, float o, float sum, float) {
          a.out[(static_cast<std::size_t>(qa.token) * a.q_heads + h0 + g) * D + d] = o / sum;
        });
  }
}

// Any head_dim up to 256: one warp per (query token, query head), lane i
// holding dims i, i + 32, ...; one position at a time.
template <bool Bf16>
__global__ void attend_generic(attn_args a, int head_dim) {
  constexpr int max_per_lane = 8;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int ps = a.arena.page_size;
  const int tokens = detail::step_tokens(a.table);
  const long long total = static_cast<long long>(tokens) * a.q_heads;
  for (long long w = static_cast<long long>(blockIdx.x) * warps + threadIdx.x / 32; w < total;
       w += static_cast<long long>(gridDim.x) * warps) {
    const int h = static_cast<int>(w % a.q_heads);
    const int kvh = h / a.group;
    const query_at qa = query_of(a, tokens, w / a.q_heads);
    const float* qp = a.q + (static_cast<std::size_t>(qa.token) * a.q_heads + h) * head_dim;
    float q[max_per_lane];
    float acc[max_per_lane];
#pragma unroll
    for (int j = 0; j < max_per_lane; ++j) {
      const int d = lane + 32 * j;
      q[j] = d < head_dim ? qp[d] * a.scale_log2 : 0.0F;
      acc[j] = 0.0F;
    }
    float m = -INFINITY;
    float l = 0.0F;
    for (int t = 0; t < qa.positions; ++t) {
      const std::int32_t page = a.table.kv_indices[qa.first_page + t / ps];
      const std::byte* kp = a.arena.at(0, page, t % ps, kvh);
      const std::byte* vp = a.arena.at(1, page, t % ps, kvh);
      auto load = [&](const std::byte* p, int d) {
        if constexpr (Bf16)
          return detail::from_bf16(reinterpret_cast<const std::uint16_t*>(p)[d]);
        else
          return reinterpret_cast<const float*>(p)[d];
      };
      float dot = 0.0F;
#pragma unroll
      for (int j = 0; j < max_per_lane; ++j) {
        const int d = lane + 32 * j;
        if (d < head_dim)
          dot += q[j] * load(kp, d);
      }
      dot = detail::group_sum(dot);
      const float top = fmaxf(m, dot);
      const float alpha = exp2f(m - top);
      const float p = exp2f(dot - top);
      l = l * alpha + p;
      m = top;
#pragma unroll
      for (int j = 0; j < max_per_lane; ++j) {
        const int d = lane + 32 * j;
        acc[j] = acc[j] * alpha + (d < head_dim ? p * load(vp, d) : 0.0F);
      }
    }
    float* op = a.out + (static_cast<std::size_t>(qa.token) * a.q_heads + h) * head_dim;
#pragma unroll
    for (int j = 0; j < max_per_lane; ++j) {
      const int d = lane + 32 * j;
      if (d < head_dim)
        op[d] = acc[j] / l;
    }
  }
}

unsigned grid_for(std::int64_t items, bool decode) {
  const std::int64_t cap =
      decode ? (std::int64_t{1} << 31) - 1 : std::int64_t{detail::sm_count()} * 16;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(items, cap)));
}

template <class KV, int D, int GC>
cudaError_t launch_fast(const attn_args& a, std::int64_t token_bound, cudaStream_t stream) {
  const std::int64_t items = token_bound * a.kv_heads * a.chunks;
  const unsigned grid = grid_for(items, a.table.decode);
  switch (detail::walk_for(false, a.table.decode, a.table.rows)) {
    case attention_walk::pipeline4:
      attend_fast<KV, D, GC, 4><<<grid, 128, 0, stream>>>(a);
      break;
    case attention_walk::pipeline2:
      attend_fast<KV, D, GC, 2><<<grid, 128, 0, stream>>>(a);
      break;
    case attention_walk::automatic:  // walk_for resolves it: unreachable
    case attention_walk::mma:        // a step the tensor-core kernel does not take
    case attention_walk::rows:       // a step the whole-row kernel does not take
    case attention_walk::rows_mma:   // nor its tensor-core form
    case attention_walk::registers:
      attend_fast<KV, D, GC, 0><<<grid, 128, 0, stream>>>(a);
      break;
  }
  return detail::launch_status();
}

template <class KV, int D>
cudaError_t launch_fast_d(attn_args a, std::int64_t token_bound, cudaStream_t stream) {
  if (a.group == 1) {
    a.chunks = 1;
    return launch_fast<KV, D, 1>(a, token_bound, stream);
  }
  if (a.group == 2) {
    a.chunks = 1;
    return launch_fast<KV, D, 2>(a, token_bound, stream);
  }
  a.chunks = (a.group + 3) / 4;
  return launch_fast<KV, D, 4>(a, token_bound, stream);
}

template <class KV>
cudaError_t launch_attention(const attn_args& a, int head_dim, std::int64_t token_bound,
                             cudaStream_t stream) {
  // The fast kernel's 16-byte loads need a 16-byte aligned arena.
  const bool aligned = reinterpret_cast<std::uintptr_t>(a.arena.base) % 16 == 0;
  switch (aligned ? head_dim : 0) {
    case 64:
      return launch_fast_d<KV, 64>(a, token_bound, stream);
    case 128:
      return launch_fast_d<KV, 128>(a, token_bound, stream);
    case 256:
      return launch_fast_d<KV, 256>(a, token_bound, stream);
    default: {
      constexpr int warps = 4;
      const std::int64_t items = detail::ceil_div(token_bound * a.q_heads, warps);
      attend_generic<sizeof(KV) == 2>
          <<<grid_for(items, a.table.decode), warps * 32, 0, stream>>>(a, head_dim);
      return detail::launch_status();
    }
  }
}

}  // namespace

cudaError_t paged_attention(const paged_attention_params& p, cudaStream_t stream) {
  attn_args a{};
  if (!detail::to_attn_args(p, a))
    return cudaErrorInvalidValue;
  const std::int64_t bound = detail::token_bound(p.table, p.arena.geometry.page_size);
  if (a.table.rows <= 0 || bound <= 0)
    return cudaSuccess;
  if (detail::prefill_takes(p)) {
    const attention_prefill k = detail::prefill_for();
    if (k == attention_prefill::wgmma_lean && detail::prefill_wgmma_lean_takes(p))
      return detail::launch_prefill_wgmma_lean(a, p.arena.geometry.head_dim, bound, stream);
    if (k != attention_prefill::mma && detail::prefill_wgmma_takes(p)) {
      // wgmma_lean where only `wgmma` takes the step runs `wgmma`.
      const bool defer = k == attention_prefill::wgmma || k == attention_prefill::wgmma_lean;
      return detail::launch_prefill_wgmma(a, p.arena.geometry.head_dim, defer, bound, stream);
    }
    return detail::launch_prefill(a, p.arena.geometry.head_dim, bound, stream);
  }
  const attention_walk walk = detail::walk_of(p, false);
  if (walk == attention_walk::mma)
    return detail::launch_decode_mma(a, p.arena.geometry.head_dim, nullptr, stream);
  if (walk == attention_walk::rows)
    return detail::launch_decode_rows(a, p.arena.geometry.head_dim, nullptr, stream);
  if (walk == attention_walk::rows_mma)
    return detail::launch_decode_rows_mma(a, p.arena.geometry.head_dim, nullptr, stream);
  if (p.arena.geometry.dtype == mstar::dtype::bfloat16)
    return launch_attention<std::uint16_t>(a, p.arena.geometry.head_dim, bound, stream);
  return launch_attention<float>(a, p.arena.geometry.head_dim, bound, stream);
}

}  // namespace mstar::kernels::cuda
