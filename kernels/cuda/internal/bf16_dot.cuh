#pragma once

// The one-row GEMV's inner product of eight bf16 pairs (gemv.cu, and
// gemv_chain.cu, which gives its bits): one place, so that both sum in
// the same order.

#include <cuda_runtime.h>

namespace mstar::kernels::cuda::detail {

__device__ __forceinline__ float lo_bf16(unsigned v) {
  return __uint_as_float(v << 16U);
}
__device__ __forceinline__ float hi_bf16(unsigned v) {
  return __uint_as_float(v & 0xffff0000U);
}

// acc += the eight products of a weight piece and an input piece.
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
  acc = fmaf(lo_bf16(w.x), lo_bf16(x.x), acc);
  acc = fmaf(hi_bf16(w.x), hi_bf16(x.x), acc);
  acc = fmaf(lo_bf16(w.y), lo_bf16(x.y), acc);
  acc = fmaf(hi_bf16(w.y), hi_bf16(x.y), acc);
  acc = fmaf(lo_bf16(w.z), lo_bf16(x.z), acc);
  acc = fmaf(hi_bf16(w.z), hi_bf16(x.z), acc);
  acc = fmaf(lo_bf16(w.w), lo_bf16(x.w), acc);
  return fmaf(hi_bf16(w.w), hi_bf16(x.w), acc);
}

}  // namespace mstar::kernels::cuda::detail
