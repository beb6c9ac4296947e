#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/internal/paged.cuh"

namespace mstar::kernels::cuda {
namespace {

using detail::arena_args;
using detail::table_args;

constexpr float log2e = 1.4426950408889634F;

struct attn_args {
  arena_args arena;
  table_args table;
  const float* q;
  float* out;
  int q_heads;
  int kv_heads;
  int group;   // q heads per kv head
  int chunks;  // ceil(group / heads per block)
  float scale_log2;
};

// The query token a work item w names, its row, and how many positions it
// attends. Prefill items run latest token first: they carry the most work.
struct query_at {
  int token;
  int first_page;
  int positions;
};

__device__ __forceinline__ query_at query_of(const attn_args& a, int tokens, long long ti) {
  const int ps = a.arena.page_size;
  query_at q{};
  q.token = a.table.decode ? static_cast<int>(ti) : tokens - 1 - static_cast<int>(ti);
  const int r = a.table.decode ? q.token : detail::row_of_token(a.table.qo, a.table.rows, q.token);
  const detail::row_info s = detail::row_at(a.table, ps, r);
  q.first_page = s.first_page;
  q.positions = s.length - s.new_tokens + (q.token - s.first_token) + 1;
  return q;
}

// Lane layout of the fast kernel: a K/V head vector is split over `lanes`
// consecutive lanes, `elems` elements each, loaded as `vecs` 16-byte words.
template <class KV, int D>
struct layout {
  static constexpr int lanes =
      D * static_cast<int>(sizeof(KV)) / 16 < 32 ? D * static_cast<int>(sizeof(KV)) / 16 : 32;
  static constexpr int elems = D / lanes;
  static constexpr int vecs = elems * static_cast<int>(sizeof(KV)) / 16;
  static constexpr int threads = 128;
  static constexpr int slots = threads / lanes;     // tokens in flight per block per step
  static constexpr int unroll = vecs == 1 ? 2 : 1;  // positions per slot per step
};

template <class KV, int E>
__device__ __forceinline__ void unpack(const uint4* raw, float* f) {
  const auto* words = reinterpret_cast<const std::uint32_t*>(raw);
  if constexpr (sizeof(KV) == 4) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      f[e] = __uint_as_float(words[e]);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e)
      f[e] = __uint_as_float(e % 2 == 0 ? words[e / 2] << 16 : words[e / 2] & 0xffff0000U);
  }
}

template <int U, int V>
__device__ __forceinline__ void copy_raw(const uint4 (&from)[U][V], uint4 (&to)[U][V]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      to[u][j] = from[u][j];
  }
}

// This lane's slice of K and V at positions t0 .. t0 + U - 1 (those that exist).
template <class KV, int D, int U>
__device__ __forceinline__ void load_kv(const attn_args& a, const query_at& qa, int kvh, int lane,
                                        int t0, uint4 (&kraw)[U][layout<KV, D>::vecs],
                                        uint4 (&vraw)[U][layout<KV, D>::vecs]) {
  constexpr int vecs = layout<KV, D>::vecs;
  const int ps = a.arena.page_size;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int t = t0 + u;
    if (t < qa.positions) {
      const std::int32_t page = a.table.kv_indices[qa.first_page + t / ps];
      const auto* kp = reinterpret_cast<const uint4*>(a.arena.at(0, page, t % ps, kvh));
      const auto* vp = reinterpret_cast<const uint4*>(a.arena.at(1, page, t % ps, kvh));
#pragma unroll
      for (int j = 0; j < vecs; ++j) {
        kraw[u][j] = kp[lane * vecs + j];
        vraw[u][j] = vp[lane * vecs + j];
      }
    }
  }
}

// Online softmax over positions t0 .. t0 + U - 1 for the GC heads: scores
// (reduced over the slot's lanes), rescale, accumulate V. A slot past the end
// sees only -inf scores and leaves its state unchanged.
template <class KV, int D, int GC, int U>
__device__ __forceinline__ void consume(const float (&q)[GC][layout<KV, D>::elems],
                                        float (&acc)[GC][layout<KV, D>::elems], float (&m)[GC],
                                        float (&l)[GC], const uint4 (&kraw)[U][layout<KV, D>::vecs],
                                        const uint4 (&vraw)[U][layout<KV, D>::vecs], int t0,
                                        int positions) {
  using L = layout<KV, D>;
  constexpr int E = L::elems;
  float s[U][GC];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float k[E];
    unpack<KV, E>(kraw[u], k);
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      float dot = 0.0F;
#pragma unroll
      for (int e = 0; e < E; ++e)
        dot += q[g][e] * k[e];
      dot = detail::group_sum<L::lanes>(dot);
      s[u][g] = t0 + u < positions ? dot : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    float top = m[g];
#pragma unroll
    for (int u = 0; u < U; ++u)
      top = fmaxf(top, s[u][g]);
    const float ref = top == -INFINITY ? 0.0F : top;  // nothing seen yet: keep zeros
    const float alpha = exp2f(m[g] - ref);
    m[g] = top;
    l[g] *= alpha;
#pragma unroll
    for (int e = 0; e < E; ++e)
      acc[g][e] *= alpha;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float p = exp2f(s[u][g] - ref);
      l[g] += p;
      s[u][g] = p;
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (t0 + u >= positions)
      break;
    float v[E];
    unpack<KV, E>(vraw[u], v);
#pragma unroll
    for (int g = 0; g < GC; ++g) {
#pragma unroll
      for (int e = 0; e < E; ++e)
        acc[g][e] += s[u][g] * v[e];
    }
  }
}

// Block per (query token, kv head, chunk of GC query heads). Each slot of
// `lanes` threads walks every `slots`-th group of `unroll` positions with its
// own online softmax; the slots merge through shared memory at the end.
template <class KV, int D, int GC>
__global__ void __launch_bounds__(128) attend_fast(attn_args a) {
  using L = layout<KV, D>;
  constexpr int E = L::elems;
  constexpr int U = L::unroll;
  __shared__ float s_acc[L::slots][GC][D];
  __shared__ float s_m[L::slots][GC];
  __shared__ float s_l[L::slots][GC];
  const int lane = static_cast<int>(threadIdx.x) % L::lanes;
  const int slot = static_cast<int>(threadIdx.x) / L::lanes;
  const int tokens = detail::step_tokens(a.table);
  const long long total = static_cast<long long>(tokens) * a.kv_heads * a.chunks;
  for (long long w = blockIdx.x; w < total; w += gridDim.x) {
    const int chunk = static_cast<int>(w % a.chunks);
    const int kvh = static_cast<int>((w / a.chunks) % a.kv_heads);
    const query_at qa = query_of(a, tokens, w / (static_cast<long long>(a.chunks) * a.kv_heads));
    const int h0 = kvh * a.group + chunk * GC;
    float q[GC][E];
    float acc[GC][E];
    float m[GC];
    float l[GC];
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      const bool valid = chunk * GC + g < a.group;
      const float* qp = a.q + (static_cast<std::size_t>(qa.token) * a.q_heads + h0 + g) * D;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        q[g][e] = valid ? qp[lane * E + e] * a.scale_log2 : 0.0F;
        acc[g][e] = 0.0F;
      }
      m[g] = -INFINITY;
      l[g] = 0.0F;
    }
    // The loop bound is the block's, not the slot's: slots sharing a warp
    // must run the same iterations around the shuffles.
    constexpr int step = L::slots * U;
    // Software pipelined: the next positions' K and V are in flight while
    // the current ones are consumed.
    uint4 kraw[U][L::vecs];
    uint4 vraw[U][L::vecs];
    load_kv<KV, D, U>(a, qa, kvh, lane, slot * U, kraw, vraw);
    for (int base = 0; base < qa.positions; base += step) {
      const int t0 = base + slot * U;
      uint4 kcur[U][L::vecs];
      uint4 vcur[U][L::vecs];
      copy_raw<U, L::vecs>(kraw, kcur);
      copy_raw<U, L::vecs>(vraw, vcur);
      if (base + step < qa.positions)
        load_kv<KV, D, U>(a, qa, kvh, lane, t0 + step, kraw, vraw);
      consume<KV, D, GC, U>(q, acc, m, l, kcur, vcur, t0, qa.positions);
    }
#pragma unroll
    for (int g = 0; g < GC; ++g) {
#pragma unroll
      for (int e = 0; e < E; ++e)
        s_acc[slot][g][lane * E + e] = acc[g][e];
      if (lane == 0) {
        s_m[slot][g] = m[g];
        s_l[slot][g] = l[g];
      }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < GC * D; i += L::threads) {
      const int g = i / D;
      const int d = i % D;
      if (chunk * GC + g >= a.group)
        continue;
      float top = -INFINITY;
#pragma unroll
      for (int sl = 0; sl < L::slots; ++sl)
        top = fmaxf(top, s_m[sl][g]);
      float total_l = 0.0F;
      float o = 0.0F;
#pragma unroll
      for (int sl = 0; sl < L::slots; ++sl) {
        if (s_m[sl][g] == -INFINITY)
          continue;  // a slot that saw no position
        const float f = exp2f(s_m[sl][g] - top);
        total_l += s_l[sl][g] * f;
        o += s_acc[sl][g][d] * f;
      }
      a.out[(static_cast<std::size_t>(qa.token) * a.q_heads + h0 + g) * D + d] = o / total_l;
    }
    __syncthreads();
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
  attend_fast<KV, D, GC><<<grid_for(items, a.table.decode), 128, 0, stream>>>(a);
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
  if (!detail::to_arena_args(p.arena, p.layer, a.arena))
    return cudaErrorInvalidValue;
  const int hkv = p.arena.num_kv_heads;
  const int d = p.arena.head_dim;
  if (p.num_qo_heads <= 0 || p.num_qo_heads % hkv != 0 || d > 256)
    return cudaErrorInvalidValue;
  a.table = detail::to_table_args(p.table);
  a.q = p.q;
  a.out = p.out;
  a.q_heads = p.num_qo_heads;
  a.kv_heads = hkv;
  a.group = p.num_qo_heads / hkv;
  a.chunks = 1;
  const float scale = p.scale != 0.0F ? p.scale : 1.0F / std::sqrt(static_cast<float>(d));
  a.scale_log2 = scale * log2e;
  const std::int64_t bound = detail::token_bound(p.table, p.arena.page_size);
  if (a.table.rows <= 0 || bound <= 0)
    return cudaSuccess;
  if (p.arena.dtype == mstar::dtype::bfloat16)
    return launch_attention<std::uint16_t>(a, d, bound, stream);
  return launch_attention<float>(a, d, bound, stream);
}

}  // namespace mstar::kernels::cuda
