#pragma once

// The Mamba-2 mixer's kernel parameters from a Nemotron-H config and one
// layer's weight addresses (host or device): what the CPU and the CUDA
// forward both hand to the conv and SSD kernels. The in_proj output packs
// [z | x B C | dt] per token.

#include "kernels/conv.hpp"
#include "kernels/ssd.hpp"
#include "models/nemotron_h_config.hpp"

namespace mstar::models::internal {

/// The causal conv's weights (`conv_b` null without a bias), SiLU applied.
inline kernels::conv_weights conv_weights_of(const nemotron_h_config& c, const float* conv_w,
                                             const float* conv_b) {
  return {conv_w, conv_b, static_cast<std::int32_t>(c.conv_dim()),
          static_cast<std::int32_t>(c.conv_kernel), true};
}

/// The SSD's per-head weights and sizes, dt clamped to the config's limits.
inline kernels::ssd_weights ssd_weights_of(const nemotron_h_config& c, const float* dt_bias,
                                           const float* a_log, const float* d) {
  return {dt_bias,
          a_log,
          d,
          static_cast<std::int32_t>(c.mamba_num_heads),
          static_cast<std::int32_t>(c.mamba_head_dim),
          static_cast<std::int32_t>(c.ssm_state_size),
          static_cast<std::int32_t>(c.n_groups),
          static_cast<float>(c.time_step_limit[0]),
          static_cast<float>(c.time_step_limit[1])};
}

/// The SSD's inputs: x, B, C from the conv output `xbc` [T, conv_dim], dt
/// from the in_proj output `zxbcdt` [T, in_proj_size].
inline kernels::ssd_inputs ssd_inputs_of(const nemotron_h_config& c, const float* xbc,
                                         const float* zxbcdt) {
  const std::int64_t di = c.d_inner(), cd = c.conv_dim();
  const std::int64_t gn = c.n_groups * c.ssm_state_size;
  return {xbc, zxbcdt + di + cd, xbc + di, xbc + di + gn, cd, c.in_proj_size(), cd};
}

}  // namespace mstar::models::internal
