#pragma once

// One warp's share of Mamba-2's gated RMS norm: one group of V * 128
// channels of one row, held in registers. Both gated_rms_norm's warp form
// (math.cu) and the gated GEMV (gemv.cu, which norms the row into shared
// memory) call it, so the GEMV's input is the launch's bf16 output bit for
// bit: same loads, same products, same order of the squares' sum. Only .cu
// files include it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/activation.cuh"
#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

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
    float4 a = __ldg(xr + j * 32 + lane);
    if (gr != nullptr) {
      const float4 g = __ldg(gr + j * 32 + lane);
      a.x *= silu_of(g.x);
      a.y *= silu_of(g.y);
      a.z *= silu_of(g.z);
      a.w *= silu_of(g.w);
    }
    v[j] = a;
    sum_sq += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
  }
  sum_sq = group_sum(sum_sq);
  const float scale = rsqrtf(sum_sq / static_cast<float>(group) + eps);
  const auto* wr = reinterpret_cast<const float4*>(weight);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int at = j * 32 + lane;
    const float4 w = __ldg(wr + at);
    const float4 o = make_float4(v[j].x * scale * w.x, v[j].y * scale * w.y, v[j].z * scale * w.z,
                                 v[j].w * scale * w.w);
    if (out != nullptr)
      reinterpret_cast<float4*>(out)[at] = o;
    if (out_bf16 != nullptr) {
      const uint2 packed =
          make_uint2(to_bf16(o.x) | static_cast<std::uint32_t>(to_bf16(o.y)) << 16,
                     to_bf16(o.z) | static_cast<std::uint32_t>(to_bf16(o.w)) << 16);
      reinterpret_cast<uint2*>(out_bf16)[at] = packed;
    }
  }
}

}  // namespace mstar::kernels::cuda::detail
