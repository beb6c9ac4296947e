#pragma once

// The MLP activations as every CUDA kernel of ours takes them, and one quad
// of activate's bf16 output. activate's quad kernel (fused.cu) and the
// activation GEMV (gemv.cu, which builds its input row in shared memory)
// both call `activated_quad_bf16`, so the GEMV's input is activate's bf16
// output bit for bit. Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

/// `v * sigmoid(v)` (silu; also the gated norm's gate).
__device__ __forceinline__ float silu_of(float v) {
  return v / (1.0F + expf(-v));
}

/// `max(v, 0)^2` (squared ReLU).
__device__ __forceinline__ float relu2_of(float v) {
  return v > 0.0F ? v * v : 0.0F;
}

struct silu_fn {
  __device__ float operator()(float v) const { return silu_of(v); }
};
struct relu2_fn {
  __device__ float operator()(float v) const { return relu2_of(v); }
};
/// No function: the quad as it is (to_bf16's rounding only).
struct identity_fn {
  __device__ float operator()(float v) const { return v; }
};

/// `fn` of each of `v`'s four values, times `up`'s when `up` is not null.
template <class Fn>
__device__ __forceinline__ float4 activated_quad(float4 v, const float4* up, Fn fn) {
  v = make_float4(fn(v.x), fn(v.y), fn(v.z), fn(v.w));
  if (up != nullptr) {
    const float4 u = *up;
    v = make_float4(v.x * u.x, v.y * u.y, v.z * u.z, v.w * u.w);
  }
  return v;
}

/// Four floats as four bf16 values (to_bf16's rounding), the first in the low half of `.x`.
__device__ __forceinline__ uint2 pack_bf16_quad(float4 v) {
  return uint2{static_cast<unsigned>(to_bf16(v.x)) | (static_cast<unsigned>(to_bf16(v.y)) << 16U),
               static_cast<unsigned>(to_bf16(v.z)) | (static_cast<unsigned>(to_bf16(v.w)) << 16U)};
}

}  // namespace mstar::kernels::cuda::detail
