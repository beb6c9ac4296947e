#pragma once

// One warp's share of Mamba-2's gated RMS norm: one group of V * 128
// channels of one row, held in registers. Both gated_rms_norm's warp forms
// (math.cu) and the gated GEMV (gemv.cu, which norms the row into shared
// memory) call it, so the GEMV's input is the launch's bf16 output bit for
// bit: same loads, same products, same order of the squares' sum. Only .cu
// files include it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/activation.cuh"
#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

// The three steps both bodies below take, written once so their products
// and sums are the same expressions, hence the same bits.

/// `a` times silu of `g`, lane by lane.
__device__ __forceinline__ float4 gated_quad(float4 a, float4 g) {
  a.x *= silu_of(g.x);
  a.y *= silu_of(g.y);
  a.z *= silu_of(g.z);
  a.w *= silu_of(g.w);
  return a;
}

/// The quad's squares summed, x first.
__device__ __forceinline__ float squares_of(float4 a) {
  return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
}

/// `v * scale * w` into float4 `at` of `out` and / or uint2 `at` of
/// `out_bf16` (null: not written).
__device__ __forceinline__ void store_normed(float4 v, float scale, float4 w, float* out,
                                             std::uint16_t* out_bf16, int at) {
  const float4 o =
      make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
  if (out != nullptr)
    reinterpret_cast<float4*>(out)[at] = o;
  if (out_bf16 != nullptr) {
    const uint2 packed = make_uint2(to_bf16(o.x) | static_cast<std::uint32_t>(to_bf16(o.y)) << 16,
                                    to_bf16(o.z) | static_cast<std::uint32_t>(to_bf16(o.w)) << 16);
    reinterpret_cast<uint2*>(out_bf16)[at] = packed;
  }
}

/// The group of `V * 128` channels at `x` (times silu of `gate`'s, unless
/// `gate` is null), RMS-normed over the group and scaled by `weight`, into
/// `out` (f32) and / or `out_bf16` (null: not written; either may be in
/// shared memory). Called by all 32 lanes of a warp; lane l holds float4
/// j * 32 + l, so every load is 512 contiguous bytes. x, gate, weight and
/// out are 16-byte aligned, out_bf16 8-byte aligned. Each lane reads its
/// elements before writing them, so out may alias x or gate.
template <int V>
__device__ __forceinline__ void gated_norm_group(const float* x, const float* gate,
                                                 const float* weight, float eps, float* out,
                                                 std::uint16_t* out_bf16, int lane) {
  constexpr int group = V * 128;
  const auto* xr = reinterpret_cast<const float4*>(x);
  const auto* gr = reinterpret_cast<const float4*>(gate);
  float4 v[V];
  float sum_sq = 0.0F;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    float4 a = load_coherent(xr + j * 32 + lane);
    if (gr != nullptr)
      a = gated_quad(a, load_coherent(gr + j * 32 + lane));
    v[j] = a;
    sum_sq += squares_of(a);
  }
  sum_sq = group_sum(sum_sq);
  const float scale = rsqrtf(sum_sq / static_cast<float>(group) + eps);
  const auto* wr = reinterpret_cast<const float4*>(weight);
#pragma unroll
  for (int j = 0; j < V; ++j)
    store_normed(v[j], scale, load_weight(wr + j * 32 + lane), out, out_bf16, j * 32 + lane);
}

/// Lane `lane`'s V float4 of a group at `p` (float4 j * 32 + lane in q[j]),
/// every load issued before any is used: through the read-only path for a
/// `Weight` (no kernel writes it), else coherent (common.cuh, load_coherent).
template <int V, bool Weight>
__device__ __forceinline__ void load_group_quads(const float* p, int lane, float4 (&q)[V]) {
  const auto* r = reinterpret_cast<const float4*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j)
    q[j] = Weight ? load_weight(r + j * 32 + lane) : load_coherent(r + j * 32 + lane);
}

/// `gated_norm_group` with the group's weight quads already in registers
/// (`load_group_quads` of the weight, which a chained kernel may issue
/// before its wait) and all of x's and the gate's loads in flight before
/// the first product: the same products and the same order of the sum, so
/// the same bits. Same operands and aliasing rules.
template <int V>
__device__ __forceinline__ void gated_norm_group_loaded(const float* x, const float* gate,
                                                        const float4 (&w)[V], float eps, float* out,
                                                        std::uint16_t* out_bf16, int lane) {
  constexpr int group = V * 128;
  float4 v[V];
  load_group_quads<V, false>(x, lane, v);
  if (gate != nullptr) {
    float4 g[V];
    load_group_quads<V, false>(gate, lane, g);
#pragma unroll
    for (int j = 0; j < V; ++j)
      v[j] = gated_quad(v[j], g[j]);
  }
  float sum_sq = 0.0F;
#pragma unroll
  for (int j = 0; j < V; ++j)
    sum_sq += squares_of(v[j]);
  sum_sq = group_sum(sum_sq);
  const float scale = rsqrtf(sum_sq / static_cast<float>(group) + eps);
#pragma unroll
  for (int j = 0; j < V; ++j)
    store_normed(v[j], scale, w[j], out, out_bf16, j * 32 + lane);
}

}  // namespace mstar::kernels::cuda::detail
