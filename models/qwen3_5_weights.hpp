#pragma once

// A Qwen3.5 text model's weights on the host, float32, in the layouts the
// forward reads (a few fused at load; see each field).

#include <cstdint>
#include <span>
#include <vector>

#include "models/qwen3_5_config.hpp"

namespace mstar::models {

/// One decoder layer's weights.
struct qwen3_5_layer {
  qwen3_5_mixer mixer = qwen3_5_mixer::delta_net;
  std::int32_t sub_index = 0;   ///< index among layers of its mixer (KV / recurrent pool layer)
  std::vector<float> in_norm;   ///< [hidden]: 1 + input_layernorm.weight (zero-centred norm)
  std::vector<float> mlp_norm;  ///< [hidden]: 1 + post_attention_layernorm.weight
  // gated delta net
  /// [conv_dim + value_dim + 2 HV, hidden]: in_proj_qkv, in_proj_z, in_proj_b,
  /// in_proj_a stacked (one GEMM)
  std::vector<float> in_proj;
  std::vector<float> conv_w;    ///< [conv_dim, W]
  std::vector<float> dt_bias;   ///< [HV]
  std::vector<float> a_log;     ///< [HV]
  std::vector<float> gnorm;     ///< [V]: the gated norm's weight (as is)
  std::vector<float> out_proj;  ///< [hidden, value_dim]
  // gated attention
  std::vector<float> q;               ///< [Hq * 2 D, hidden]: per head D query rows, D gate rows
  std::vector<float> k, v;            ///< [Hkv D, hidden]
  std::vector<float> o;               ///< [hidden, Hq D]
  std::vector<float> q_norm, k_norm;  ///< [D]: 1 + weight
  // SwiGLU MLP
  std::vector<float> gate, up;  ///< [inter, hidden]
  std::vector<float> down;      ///< [hidden, inter]
};

/// Host weights the forward reads (the model's own vectors).
struct qwen3_5_host_weights {
  const std::vector<float>* embeddings = nullptr;  ///< [vocab, hidden]
  const std::vector<float>* norm = nullptr;        ///< [hidden]: 1 + norm.weight
  const std::vector<float>* lm_head = nullptr;     ///< [vocab, hidden]
  std::span<const qwen3_5_layer> layers;
};

}  // namespace mstar::models
