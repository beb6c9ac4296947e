#include "models/step_cost.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace mstar::models {
namespace {

constexpr std::int64_t f32 = sizeof(float);

std::int64_t element_bytes(mstar::dtype dtype) {
  return static_cast<std::int64_t>(mstar::size_of(dtype));
}

// What the two families share: the embedding, the final norm, the LM head
// and the compute dtype.
cost_model base_of(std::int64_t vocab, std::int64_t hidden, mstar::dtype dtype) {
  cost_model m;
  m.hidden = hidden;
  m.vocab = vocab;
  m.vector_params = hidden;  // the final norm
  m.matrix_element = element_bytes(dtype);
  m.kv_element = element_bytes(dtype);
  return m;
}

}  // namespace

cost_model cost_model_of(const nemotron_h_config& c, mstar::dtype dtype) {
  cost_model m = base_of(c.vocab_size, c.hidden_size, dtype);
  m.family = "nemotron_h";
  const std::int64_t hid = c.hidden_size;
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  const std::int64_t heads = c.mamba_num_heads;
  for (const auto kind : c.layers) {
    m.vector_params += hid;  // the block's pre-norm
    switch (kind) {
      case layer_kind::mamba2:
        m.gemm_params += c.in_proj_size() * hid + hid * c.d_inner();  // in_proj, out_proj
        m.vector_params += c.conv_dim() * c.conv_kernel + (c.use_conv_bias ? c.conv_dim() : 0) +
                           3 * heads + c.d_inner();
        m.widest_projection = std::max(m.widest_projection, c.in_proj_size());
        break;
      case layer_kind::attention:
        m.gemm_params += (2 * qd + 2 * kvd) * hid;
        m.widest_projection = std::max(m.widest_projection, qd);
        break;
      case layer_kind::mlp:
        m.gemm_params += 2 * c.intermediate_size * hid;
        m.widest_projection = std::max(m.widest_projection, c.intermediate_size);
        break;
      case layer_kind::moe:
        break;  // refused by validate(): never loaded
    }
  }
  m.attention_layers = c.count(layer_kind::attention);
  m.q_heads = c.num_attention_heads;
  m.kv_heads = c.num_key_value_heads;
  m.head_dim = c.head_dim;
  m.recurrent_layers = c.count(layer_kind::mamba2);
  const std::int64_t state_elems = heads * c.mamba_head_dim * c.ssm_state_size;
  m.state_bytes = f32 * (state_elems + c.conv_dim() * (c.conv_kernel - 1));
  m.scan_flops = 5 * state_elems + 2 * c.conv_kernel * c.conv_dim();
  return m;
}

cost_model cost_model_of(const qwen3_5_config& c, mstar::dtype dtype) {
  cost_model m = base_of(c.vocab_size, c.hidden_size, dtype);
  m.family = "qwen3_5";
  const std::int64_t hid = c.hidden_size;
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  const auto net = c.delta_net();
  const std::int64_t hv = c.linear_num_value_heads;
  const std::int64_t proj_n = net.conv_dim() + c.value_dim() + 2 * hv;
  for (const auto mixer : c.layers) {
    // Both norms and the SwiGLU MLP (gate and up fused: one GEMM of 2 x inter rows).
    m.vector_params += 2 * hid;
    m.gemm_params += 3 * c.intermediate_size * hid;
    m.widest_projection = std::max(m.widest_projection, 2 * c.intermediate_size);
    switch (mixer) {
      case qwen3_5_mixer::delta_net:
        m.gemm_params += (proj_n + c.value_dim()) * hid;
        m.vector_params += net.conv_dim() * net.conv_kernel_size + 2 * hv + c.linear_value_head_dim;
        m.widest_projection = std::max(m.widest_projection, proj_n);
        break;
      case qwen3_5_mixer::attention:
        // q carries its gate: 2 D rows per query head.
        m.gemm_params += (3 * qd + 2 * kvd) * hid;
        m.vector_params += 2 * c.head_dim;
        m.widest_projection = std::max(m.widest_projection, 2 * qd);
        break;
    }
  }
  m.attention_layers = c.count(qwen3_5_mixer::attention);
  m.q_heads = c.num_attention_heads;
  m.kv_heads = c.num_key_value_heads;
  m.head_dim = c.head_dim;
  m.recurrent_layers = c.count(qwen3_5_mixer::delta_net);
  const std::int64_t state_elems = hv * net.head_v_dim * net.head_k_dim;
  m.state_bytes = f32 * (state_elems + net.conv_dim() * (net.conv_kernel_size - 1));
  m.scan_flops = 7 * state_elems + 2 * net.conv_kernel_size * net.conv_dim();
  return m;
}

result<cost_model> cost_model_of(const std::filesystem::path& folder, mstar::dtype dtype) {
  auto type = read_model_type(folder);
  if (!type)
    return type.error();
  if (type->empty() || *type == "nemotron_h") {
    auto config = nemotron_h_config::load(folder);
    if (!config)
      return config.error();
    return cost_model_of(*config, dtype);
  }
  if (*type == "qwen3_5" || *type == "qwen3_5_text") {
    auto config = qwen3_5_config::load(folder);
    if (!config)
      return config.error();
    return cost_model_of(*config, dtype);
  }
  return make_error(errc::unsupported,
                    fmt::format("{}: model_type '{}' is not supported (nemotron_h, qwen3_5, "
                                "qwen3_5_text)",
                                (folder / "config.json").string(), *type));
}

step_cost cost_of(const cost_model& m, const step_shape& s) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  const double rows = d(s.rows), t = d(s.tokens_per_row), ctx = d(s.context_per_row);
  const double tokens = rows * t;
  step_cost c;
  c.weight_bytes = d(m.matrix_element) * d(m.gemm_params + m.head_params()) +
                   d(f32) * d(m.vector_params) + d(f32) * d(m.hidden) * tokens;
  // K and V of every KV head, per position and layer.
  const double kv_position = 2.0 * d(m.kv_heads * m.head_dim * m.kv_element);
  c.kv_bytes = d(m.attention_layers) * kv_position * rows * (ctx + t + t);
  c.state_bytes =
      d(m.recurrent_layers) * d(m.state_bytes) * rows * (s.context_per_row > 0 ? 2.0 : 1.0);
  c.gemm_flops = 2.0 * d(m.gemm_params) * tokens + 2.0 * d(m.head_params()) * rows;
  const double keys_per_row = t * ctx + t * (t + 1) / 2;
  c.attention_flops = 4.0 * d(m.q_heads * m.head_dim) * d(m.attention_layers) * rows * keys_per_row;
  c.scan_flops = d(m.scan_flops) * d(m.recurrent_layers) * tokens;
  return c;
}

step_cost mean_decode_cost(const cost_model& model, std::int64_t rows, std::int64_t prompt_len,
                           std::int64_t new_tokens) {
  step_cost mean;
  if (new_tokens < 2)
    return mean;
  for (std::int64_t j = 1; j < new_tokens; ++j) {
    const step_cost c = cost_of(model, {rows, 1, prompt_len + j - 1});
    mean.weight_bytes += c.weight_bytes;
    mean.kv_bytes += c.kv_bytes;
    mean.state_bytes += c.state_bytes;
    mean.gemm_flops += c.gemm_flops;
    mean.attention_flops += c.attention_flops;
    mean.scan_flops += c.scan_flops;
  }
  const auto steps = static_cast<double>(new_tokens - 1);
  for (double* v : {&mean.weight_bytes, &mean.kv_bytes, &mean.state_bytes, &mean.gemm_flops,
                    &mean.attention_flops, &mean.scan_flops})
    *v /= steps;
  return mean;
}

roofline_point place(const step_cost& cost, double seconds, double copy_bytes_per_s,
                     double peak_flops_per_s) {
  roofline_point p;
  if (seconds <= 0 || copy_bytes_per_s <= 0 || peak_flops_per_s <= 0)
    return p;
  p.bytes_per_s = cost.bytes() / seconds;
  p.flops_per_s = cost.flops() / seconds;
  p.bandwidth_fraction = p.bytes_per_s / copy_bytes_per_s;
  p.compute_fraction = p.flops_per_s / peak_flops_per_s;
  p.bound = p.bandwidth_fraction >= p.compute_fraction ? "bandwidth" : "compute";
  return p;
}

}  // namespace mstar::models
