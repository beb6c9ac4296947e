#pragma once

// A Nemotron-H checkpoint's weights on the host, float32, in the
// checkpoint's layouts: what both backends (CPU and CUDA) read. Kept apart
// from the model so the CUDA code depends on the weights, not on the model
// class that drives it.

#include <cstdint>
#include <span>
#include <vector>

#include "models/nemotron_h_config.hpp"

namespace mstar::models {

/// One block's weights, float32, in the checkpoint's layouts.
struct nemotron_h_layer {
  layer_kind kind = layer_kind::mlp;
  std::int32_t sub_index = 0;  ///< index among layers of its kind (KV / recurrent pool layer)
  std::vector<float> norm;     ///< [hidden]
  // Mamba-2
  std::vector<float> in_proj;   ///< [d_inner + conv_dim + H, hidden]
  std::vector<float> conv_w;    ///< [conv_dim, W]
  std::vector<float> conv_b;    ///< [conv_dim] (empty without conv bias)
  std::vector<float> dt_bias;   ///< [H]
  std::vector<float> a_log;     ///< [H]
  std::vector<float> d;         ///< [H]
  std::vector<float> gnorm;     ///< [d_inner]
  std::vector<float> out_proj;  ///< [hidden, d_inner]
  // attention
  std::vector<float> q, k, v, o;  ///< [Hq*D, hidden], [Hkv*D, hidden] x2, [hidden, Hq*D]
  // MLP
  std::vector<float> up, down;  ///< [inter, hidden], [hidden, inter]
};

/// Host weights a backend reads or copies (the model's own vectors).
struct nemotron_h_host_weights {
  const std::vector<float>* embeddings = nullptr;  ///< [vocab, hidden]
  const std::vector<float>* norm_f = nullptr;      ///< [hidden]
  const std::vector<float>* lm_head = nullptr;     ///< [vocab, hidden]
  std::span<const nemotron_h_layer> layers;
};

}  // namespace mstar::models
