#pragma once

// The Qwen3.5 text forward on the CPU, float32: the reference other backends
// are compared with. Borrows the model's host weights; the pools live in host
// memory.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.hpp"
#include "models/qwen3_5_weights.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"

namespace mstar::models {

/// One step as the forward reads it: the packed rows and where their state lives.
struct qwen3_5_step {
  std::span<const std::int32_t> ids;        ///< [T] token ids, rows packed
  std::span<const std::int32_t> cu;         ///< [R+1] cumulative tokens per row
  std::span<const std::int32_t> positions;  ///< [T] rotary positions (attention layers)
  /// [T] or empty: a token's input embedding [hidden] in place of its id's
  /// row (an image placeholder's vision embedding), or null
  std::span<const float* const> embed_rows;
  bool decode = false;  ///< every row feeds one token
  const resources::kv_label_plan* kv_plan = nullptr;
  kernels::kv_arena_view kv{};
  const resources::recurrent_addressing* rec = nullptr;
  std::span<float* const> conv_state;   ///< per delta-net layer: [slots][conv_dim][W-1]
  std::span<float* const> delta_state;  ///< per delta-net layer: [slots][HV][V][K]
};

/// The CPU forward. Not thread-safe.
class qwen3_5_cpu {
 public:
  void load(const qwen3_5_config& config, const qwen3_5_host_weights& weights);
  /// Runs `step` and leaves each row's last-token logits [R, vocab] in `logits`.
  void forward(const qwen3_5_step& step, std::vector<float>& logits);

 private:
  void delta_net(const qwen3_5_layer& l, const float* x, float* out, std::int64_t tokens,
                 const qwen3_5_step& step);
  void attention(const qwen3_5_layer& l, const float* x, float* out, std::int64_t tokens,
                 const qwen3_5_step& step);
  void mlp(const qwen3_5_layer& l, const float* x, float* out, std::int64_t tokens);

  qwen3_5_config config_;
  qwen3_5_host_weights weights_;
  std::vector<float> inv_freq_;  ///< [rotary_dim / 2]
  // Per-step work buffers, only grown.
  std::vector<float> h_, x_, out_, proj_, conv_, rule_, q_, k_, v_, o_, gate_, up_, last_;
};

}  // namespace mstar::models
