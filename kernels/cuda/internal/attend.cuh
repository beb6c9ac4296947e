#pragma once

// The fast paged-attention block, shared by the one-pass kernel
// (attention.cu) and the split-KV decode kernel (attention_split.cu): lane
// layout, the register walk over K/V (attention_walk::registers; the tiled
// walks are in attend_tiles.cuh), the online softmax over a range of
// positions and the merge of the block's slots through shared memory.

#include <cmath>
#include <cstdint>

#include "kernels/cuda/internal/paged.cuh"

namespace mstar::kernels::cuda::detail {

inline constexpr float log2e = 1.4426950408889634F;

/// Everything an attention kernel reads, in device form.
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

/// The device form of `p`; false for a dtype, head count or head_dim (over
/// 256) the kernels cannot take. Leaves `chunks` at 1.
inline bool to_attn_args(const paged_attention_params& p, attn_args& a) {
  a = attn_args{};
  if (!to_arena_args(p.arena, p.layer, a.arena))
    return false;
  const int hkv = p.arena.geometry.num_kv_heads;
  const int d = p.arena.geometry.head_dim;
  if (p.num_qo_heads <= 0 || p.num_qo_heads % hkv != 0 || d > 256)
    return false;
  a.table = to_table_args(p.table);
  a.q = p.q;
  a.out = p.out;
  a.q_heads = p.num_qo_heads;
  a.kv_heads = hkv;
  a.group = p.num_qo_heads / hkv;
  a.chunks = 1;
  const float scale = p.scale != 0.0F ? p.scale : 1.0F / std::sqrt(static_cast<float>(d));
  a.scale_log2 = scale * log2e;
  return true;
}

/// The query token a work item names, its row's first page, and how many
/// positions it attends. Prefill items run latest token first: they carry
/// the most work.
struct query_at {
  int token;
  int first_page;
  int positions;
};

__device__ __forceinline__ query_at query_of(const attn_args& a, int tokens, long long ti) {
  const int ps = a.arena.page_size;
  query_at q{};
  q.token = a.table.decode ? static_cast<int>(ti) : tokens - 1 - static_cast<int>(ti);
  const int r = a.table.decode ? q.token : row_of_token(a.table.qo, a.table.rows, q.token);
  const row_info s = row_at(a.table, ps, r);
  q.first_page = s.first_page;
  q.positions = s.length - s.new_tokens + (q.token - s.first_token) + 1;
  return q;
}

/// Lane layout of the fast kernels: a K/V head vector is split over `lanes`
/// consecutive lanes, `elems` elements each, loaded as `vecs` 16-byte words.
template <class KV, int D>
struct layout {
  static constexpr int lanes =
      D * static_cast<int>(sizeof(KV)) / 16 < 32 ? D * static_cast<int>(sizeof(KV)) / 16 : 32;
  static constexpr int elems = D / lanes;
  static constexpr int vecs = elems * static_cast<int>(sizeof(KV)) / 16;
  static constexpr int threads = 128;
  static constexpr int slots = threads / lanes;     // tokens in flight per block per step
  static constexpr int unroll = vecs == 1 ? 2 : 1;  // positions per slot per step
  static constexpr int step = slots * unroll;       // positions per block per step
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

/// This lane's slice of K and V at positions t0 .. t0 + U - 1 (those below
/// `end`).
template <class KV, int D, int U>
__device__ __forceinline__ void load_kv(const attn_args& a, int first_page, int kvh, int lane,
                                        int t0, int end, uint4 (&kraw)[U][layout<KV, D>::vecs],
                                        uint4 (&vraw)[U][layout<KV, D>::vecs]) {
  constexpr int vecs = layout<KV, D>::vecs;
  const int ps = a.arena.page_size;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int t = t0 + u;
    if (t < end) {
      const std::int32_t page = a.table.kv_indices[first_page + t / ps];
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

/// Online softmax over positions t0 .. t0 + U - 1 for the GC heads: scores
/// (reduced over the slot's lanes), rescale, accumulate V. Positions at or
/// past `end` score -inf; a slot past the end leaves its state unchanged.
template <class KV, int D, int GC, int U>
__device__ __forceinline__ void consume(const float (&q)[GC][layout<KV, D>::elems],
                                        float (&acc)[GC][layout<KV, D>::elems], float (&m)[GC],
                                        float (&l)[GC], const uint4 (&kraw)[U][layout<KV, D>::vecs],
                                        const uint4 (&vraw)[U][layout<KV, D>::vecs], int t0,
                                        int end) {
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
      dot = group_sum<L::lanes>(dot);
      s[u][g] = t0 + u < end ? dot : -INFINITY;
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
    if (t0 + u >= end)
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

/// The GC query heads h0 .. h0 + GC - 1 of `token` (this lane's slice,
/// scaled into the exp2 domain); heads past `valid` read as zeros.
template <class KV, int D, int GC>
__device__ __forceinline__ void load_q(const attn_args& a, int token, int h0, int valid, int lane,
                                       float (&q)[GC][layout<KV, D>::elems]) {
  constexpr int E = layout<KV, D>::elems;
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    const float* qp = a.q + (static_cast<std::size_t>(token) * a.q_heads + h0 + g) * D;
#pragma unroll
    for (int e = 0; e < E; ++e)
      q[g][e] = g < valid ? qp[lane * E + e] * a.scale_log2 : 0.0F;
  }
}

/// Each slot's online softmax over its share of positions [begin, end): the
/// slot walks every `slots`-th group of `unroll` positions, software
/// pipelined (the next positions' K and V are in flight while the current
/// ones are consumed). A slot that sees no position ends with m = -inf.
template <class KV, int D, int GC>
__device__ __forceinline__ void walk(const attn_args& a, int first_page, int kvh, int lane,
                                     int slot, int begin, int end,
                                     const float (&q)[GC][layout<KV, D>::elems],
                                     float (&acc)[GC][layout<KV, D>::elems], float (&m)[GC],
                                     float (&l)[GC]) {
  using L = layout<KV, D>;
  constexpr int U = L::unroll;
#pragma unroll
  for (int g = 0; g < GC; ++g) {
#pragma unroll
    for (int e = 0; e < L::elems; ++e)
      acc[g][e] = 0.0F;
    m[g] = -INFINITY;
    l[g] = 0.0F;
  }
  // The loop bound is the block's, not the slot's: slots sharing a warp
  // must run the same iterations around the shuffles.
  uint4 kraw[U][L::vecs];
  uint4 vraw[U][L::vecs];
  load_kv<KV, D, U>(a, first_page, kvh, lane, begin + slot * U, end, kraw, vraw);
  for (int base = begin; base < end; base += L::step) {
    const int t0 = base + slot * U;
    uint4 kcur[U][L::vecs];
    uint4 vcur[U][L::vecs];
    copy_raw<U, L::vecs>(kraw, kcur);
    copy_raw<U, L::vecs>(vraw, vcur);
    if (base + L::step < end)
      load_kv<KV, D, U>(a, first_page, kvh, lane, t0 + L::step, end, kraw, vraw);
    consume<KV, D, GC, U>(q, acc, m, l, kcur, vcur, t0, end);
  }
}

/// Shared memory of one fast block: every slot's softmax state.
template <class KV, int D, int GC>
struct slot_scratch {
  float acc[layout<KV, D>::slots][GC][D];
  float m[layout<KV, D>::slots][GC];
  float l[layout<KV, D>::slots][GC];
};

/// Merges the block's slots for heads g < valid: calls sink(g, d, o, l, m)
/// once per (g, d), with the unnormalised output o, the softmax sum l and
/// the maximum m (l = 0 and m = -inf when no slot saw a position). Every
/// thread of the block must call it (two barriers); the scratch is free
/// again on return.
template <class KV, int D, int GC, class Sink>
__device__ __forceinline__ void merge_slots(slot_scratch<KV, D, GC>& s, int lane, int slot,
                                            int valid, const float (&acc)[GC][layout<KV, D>::elems],
                                            const float (&m)[GC], const float (&l)[GC],
                                            Sink&& sink) {
  using L = layout<KV, D>;
  constexpr int E = L::elems;
#pragma unroll
  for (int g = 0; g < GC; ++g) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      s.acc[slot][g][lane * E + e] = acc[g][e];
    if (lane == 0) {
      s.m[slot][g] = m[g];
      s.l[slot][g] = l[g];
    }
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < GC * D; i += L::threads) {
    const int g = i / D;
    const int d = i % D;
    if (g >= valid)
      continue;
    float top = -INFINITY;
#pragma unroll
    for (int sl = 0; sl < L::slots; ++sl)
      top = fmaxf(top, s.m[sl][g]);
    float total_l = 0.0F;
    float o = 0.0F;
#pragma unroll
    for (int sl = 0; sl < L::slots; ++sl) {
      if (s.m[sl][g] == -INFINITY)
        continue;  // a slot that saw no position
      const float f = exp2f(s.m[sl][g] - top);
      total_l += s.l[sl][g] * f;
      o += s.acc[sl][g][d] * f;
    }
    sink(g, d, o, total_l, top);
  }
  __syncthreads();
}

}  // namespace mstar::kernels::cuda::detail
