#pragma once

// What the sequential gated-delta-rule kernels share (delta_rule.cu's scan
// kernel, internal/delta_rule_decode.cuh's decode kernels): their
// arguments, a token's scalars and the decay / beta from the raw
// projections. Only delta_rule.cu includes it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

struct rule_args {
  const float* a_log;
  const float* dt_bias;
  int hk, hv, k_dim, v_dim, group;
  float scale;
  const float* qkv;
  std::int64_t qkv_stride;
  const float* a;
  const float* b;
  std::int64_t ab_stride;
  float* out;
  const std::int32_t* cu;
  float* state;
  const std::int32_t* slots;
  const std::uint8_t* has_state;
  const std::int32_t* chunked_rows;  // [R]: rows >= 0 here run chunked; null: none
};

// A token's scalars: the key's and query's inverse norms (the query's with
// the scale), k . q, the decay and beta.
struct token_scalars {
  float inv_k, inv_q, kq, decay, beta;
};

__device__ __forceinline__ void decay_beta(float a, float b, float a_coef, float bias,
                                           token_scalars& sc) {
  const float x = a + bias;
  sc.decay = expf(a_coef * (x > 20.0F ? x : log1pf(expf(x))));
  sc.beta = 1.0F / (1.0F + expf(-b));
}

}  // namespace mstar::kernels::cuda::detail
