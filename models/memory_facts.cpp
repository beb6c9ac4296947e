#include "models/memory_facts.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <initializer_list>

#include "models/internal/hybrid_pools.hpp"
#include "models/nemotron_h_config.hpp"
#include "models/qwen3_5_config.hpp"

namespace mstar::models {
namespace {

using u64 = std::uint64_t;

u64 u(std::int64_t n) {
  return static_cast<u64>(std::max<std::int64_t>(n, 0));
}

u64 sum(std::initializer_list<std::int64_t> widths) {
  u64 s = 0;
  for (const auto w : widths)
    s += u(w);
  return s;
}

// The work buffers grow by half again when a step outgrows them
// (reserve_buffer), so a step of `tokens` may leave 1.5 times its own bytes.
u64 work_bytes(u64 per_token, u64 per_row, std::int64_t tokens, std::int64_t rows) {
  const u64 exact = per_token * u(tokens) + per_row * u(rows);
  return exact + exact / 2 + device_fixed_reserve_bytes;
}

// Mirrors nemotron_h_cuda::impl::reserve (models/cuda/nemotron_h_cuda_layers.cpp).
u64 workspace_of(const nemotron_h_config& c, std::int64_t tokens, std::int64_t rows) {
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  const std::int64_t widest =
      std::max({c.hidden_size, c.in_proj_size(), c.intermediate_size, qd, c.d_inner()});
  const u64 f32 = sizeof(float);
  const u64 per_token = f32 * sum({3 * c.hidden_size, c.in_proj_size(), c.conv_dim(), c.d_inner(),
                                   2 * qd, 2 * kvd, c.intermediate_size}) +
                        2 * u(widest);
  const u64 per_row = f32 * sum({c.hidden_size, c.vocab_size, 1});
  return work_bytes(per_token, per_row, tokens, rows);
}

// Mirrors qwen3_5_cuda::impl::reserve (models/cuda/qwen3_5_cuda.cpp).
u64 workspace_of(const qwen3_5_config& c, std::int64_t tokens, std::int64_t rows) {
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  const std::int64_t cd = c.delta_net().conv_dim(), vd = c.value_dim();
  const std::int64_t proj_n = cd + vd + 2 * c.linear_num_value_heads;
  const std::int64_t widest = std::max({c.hidden_size, c.intermediate_size, qd, vd});
  const u64 f32 = sizeof(float);
  const u64 per_token =
      f32 * sum({3 * c.hidden_size, proj_n, cd, vd, 4 * qd, 2 * kvd, 3 * c.intermediate_size}) +
      2 * u(widest);
  const u64 per_row = f32 * sum({c.hidden_size, c.vocab_size, 1});
  return work_bytes(per_token, per_row, tokens, rows);
}

template <class Config>
result<memory_facts> facts_of(const Config& config, const safetensors_checkpoint& checkpoint,
                              mstar::dtype dtype, const pool_options& options,
                              std::int64_t step_tokens, std::int64_t step_rows) {
  memory_facts f;
  f.weight_bytes = device_weight_bytes(checkpoint, dtype, f.parameters);
  f.workspace_bytes = workspace_of(config, step_tokens, step_rows);
  f.max_context = config.max_position_embeddings;
  auto shape = internal::pool_shape_of(config, dtype);
  if (!shape)
    return shape.error();
  bool checkpointed = false;
  auto spec = internal::hybrid_pools(options, std::move(*shape), {}, checkpointed);
  if (!spec)
    return spec.error();
  f.pools = std::move(*spec);
  return f;
}

bool is_embedding(const std::string& name) {
  return name.find("embed") != std::string::npos;
}

}  // namespace

u64 device_weight_bytes(const safetensors_checkpoint& checkpoint, mstar::dtype dtype,
                        std::int64_t& parameters) {
  const u64 matrix_element = mstar::size_of(dtype);
  u64 bytes = 0;
  parameters = 0;
  bool has_head = false;
  std::int64_t embedding_elements = 0;
  for (const auto& file : checkpoint.files()) {
    for (const auto& [name, t] : file.tensors()) {
      if (name.rfind("mtp.", 0) == 0)
        continue;
      has_head = has_head || name.find("lm_head.") != std::string::npos;
      const bool matrix = t.shape.size() == 2 && !is_embedding(name);
      if (t.shape.size() == 2 && is_embedding(name) && name.find("visual") == std::string::npos)
        embedding_elements = std::max(embedding_elements, t.numel());
      bytes += u(t.numel()) * (matrix ? matrix_element : sizeof(float));
      parameters += t.numel();
    }
  }
  if (!has_head)
    bytes += u(embedding_elements) * matrix_element;
  return bytes;
}

result<memory_facts> memory_facts_of(const std::filesystem::path& folder, mstar::dtype dtype,
                                     const pool_options& options, std::int64_t step_tokens,
                                     std::int64_t step_rows) {
  auto type = read_model_type(folder);
  if (!type)
    return type.error();
  auto checkpoint = safetensors_checkpoint::open(folder);
  if (!checkpoint)
    return checkpoint.error();
  if (type->empty() || *type == "nemotron_h") {
    auto config = nemotron_h_config::load(folder);
    if (!config)
      return config.error();
    auto f = facts_of(*config, *checkpoint, dtype, options, step_tokens, step_rows);
    if (f)
      f->family = "nemotron_h";
    return f;
  }
  if (*type == "qwen3_5" || *type == "qwen3_5_text") {
    auto config = qwen3_5_config::load(folder);
    if (!config)
      return config.error();
    auto f = facts_of(*config, *checkpoint, dtype, options, step_tokens, step_rows);
    if (f)
      f->family = "qwen3_5";
    return f;
  }
  return make_error(errc::unsupported,
                    fmt::format("{}: model_type '{}' is not supported (nemotron_h, qwen3_5, "
                                "qwen3_5_text)",
                                (folder / "config.json").string(), *type));
}

}  // namespace mstar::models
