#include <cmath>
#include <fmt/format.h>

#include "models/internal/config_readers.hpp"
#include "models/internal/json_fields.hpp"
#include "models/internal/json_text.hpp"
#include "models/nemotron_h_config.hpp"

namespace mstar::models {

namespace {

error field_error(std::string_view field, std::string_view reason,
                  errc code = errc::invalid_argument) {
  return make_error(code, fmt::format("field '{}': {}", field, reason));
}

result<void> positive(std::string_view field, std::int64_t value) {
  if (value > 0)
    return {};
  return field_error(field, fmt::format("must be positive, got {}", value));
}

result<void> divides(std::string_view field, std::int64_t value, std::string_view of_field,
                     std::int64_t of) {
  if (of % value == 0)
    return {};
  return field_error(field, fmt::format("{} does not divide {} ({})", value, of_field, of));
}

result<void> check_attention(const nemotron_h_config& c) {
  for (auto ok :
       {positive("num_attention_heads", c.num_attention_heads),
        positive("num_key_value_heads", c.num_key_value_heads), positive("head_dim", c.head_dim)}) {
    if (!ok)
      return ok;
  }
  return divides("num_key_value_heads", c.num_key_value_heads, "num_attention_heads",
                 c.num_attention_heads);
}

result<void> check_mlp(const nemotron_h_config& c) {
  if (auto ok = positive("intermediate_size", c.intermediate_size); !ok)
    return ok;
  if (c.mlp_hidden_act == "relu2" || c.mlp_hidden_act == "silu")
    return {};
  return field_error("mlp_hidden_act",
                     fmt::format("'{}' is not supported (relu2, silu)", c.mlp_hidden_act),
                     errc::unsupported);
}

result<void> check_mamba(const nemotron_h_config& c) {
  for (auto ok :
       {positive("mamba_num_heads", c.mamba_num_heads),
        positive("mamba_head_dim", c.mamba_head_dim), positive("ssm_state_size", c.ssm_state_size),
        positive("n_groups", c.n_groups), positive("chunk_size", c.chunk_size)}) {
    if (!ok)
      return ok;
  }
  if (c.conv_kernel < 2) {
    return field_error("conv_kernel", fmt::format("must be at least 2, got {}", c.conv_kernel));
  }
  if (auto ok = divides("n_groups", c.n_groups, "mamba_num_heads", c.mamba_num_heads); !ok) {
    return ok;
  }
  if (c.mamba_hidden_act != "silu") {
    return field_error("mamba_hidden_act",
                       fmt::format("'{}' is not supported (silu)", c.mamba_hidden_act),
                       errc::unsupported);
  }
  const auto [low, high] = c.time_step_limit;
  if (std::isnan(low) || std::isnan(high) || low > high || low < 0) {
    return field_error("time_step_limit",
                       fmt::format("[{}, {}] is not a range 0 <= min <= max", low, high));
  }
  if (!std::isfinite(c.time_step_min) || c.time_step_min < 0) {
    return field_error("time_step_min",
                       fmt::format("must be finite and >= 0, got {}", c.time_step_min));
  }
  return {};
}

result<void> check_tokens(const nemotron_h_config& c) {
  for (const auto& [field, id] :
       {std::pair{"pad_token_id", c.pad_token_id}, std::pair{"bos_token_id", c.bos_token_id}}) {
    if (id && *id < 0)
      return field_error(field, fmt::format("must be >= 0, got {}", *id));
  }
  for (const std::int64_t id : c.eos_token_ids) {
    if (id < 0)
      return field_error("eos_token_id", fmt::format("must be >= 0, got {}", id));
  }
  return {};
}

}  // namespace

result<void> nemotron_h_config::validate() const {
  for (auto ok : {positive("vocab_size", vocab_size), positive("hidden_size", hidden_size)}) {
    if (!ok)
      return ok;
  }
  if (layers.empty())
    return field_error("hybrid_override_pattern", "lists no layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] == layer_kind::moe) {
      return make_error(errc::unsupported,
                        fmt::format("layer {} of pattern \"{}\": MoE layers (E) are not supported "
                                    "yet",
                                    i, pattern()));
    }
  }
  if (!std::isfinite(layer_norm_epsilon) || layer_norm_epsilon <= 0) {
    return field_error("layer_norm_epsilon",
                       fmt::format("must be finite and positive, got {}", layer_norm_epsilon));
  }
  if (count(layer_kind::attention) > 0) {
    if (auto ok = check_attention(*this); !ok)
      return ok;
  }
  if (count(layer_kind::mlp) > 0) {
    if (auto ok = check_mlp(*this); !ok)
      return ok;
  }
  if (count(layer_kind::mamba2) > 0) {
    if (auto ok = check_mamba(*this); !ok)
      return ok;
  }
  return check_tokens(*this);
}

result<nemotron_h_config> nemotron_h_config::parse(std::string_view json_text,
                                                   std::string_view label) {
  auto doc = internal::parse_json(json_text, label);
  if (!doc)
    return doc.error();
  if (!doc->is_object()) {
    return make_error(errc::parse_error, fmt::format("{}: not a JSON object", label));
  }
  const internal::json_fields fields{*doc, std::string{label}};
  auto model_type = fields.string("model_type", "nemotron_h");
  if (!model_type)
    return model_type.error();
  if (*model_type != "nemotron_h") {
    return fields.fail("model_type",
                       fmt::format("'{}' is not a Nemotron-H (nemotron_h) model", *model_type),
                       errc::unsupported);
  }
  for (const std::string_view required : {"vocab_size", "hidden_size"}) {
    if (!fields.has(required))
      return fields.fail(required, "missing");
  }
  nemotron_h_config out;
  if (auto ok = internal::read_nemotron_h_fields(fields, out); !ok)
    return ok.error();
  auto layers = internal::read_layer_pattern(fields);
  if (!layers)
    return layers.error();
  out.layers = std::move(*layers);
  if (auto ok = out.validate(); !ok)
    return ok.error().with_context(label);
  return out;
}

result<nemotron_h_config> nemotron_h_config::load(const std::filesystem::path& path) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  auto text = internal::read_text_file(file);
  if (!text)
    return text.error();
  return parse(*text, file.string());
}

}  // namespace mstar::models
