#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <tuple>

#include "core/checked.hpp"
#include "core/untrusted_json.hpp"
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
  return field_error(
      "mlp_hidden_act",
      fmt::format("'{}' is not supported (relu2, silu)", text_excerpt(c.mlp_hidden_act)),
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
    return field_error(
        "mamba_hidden_act",
        fmt::format("'{}' is not supported (silu)", text_excerpt(c.mamba_hidden_act)),
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

// Every size is at most this, and every weight (or per-slot state) a product
// of sizes has at most max_elements elements: far above any real checkpoint,
// and small enough that no size arithmetic downstream can overflow int64.
constexpr std::int64_t max_size = std::int64_t{1} << 24;
constexpr std::int64_t max_elements = std::int64_t{1} << 40;
constexpr std::size_t max_layers = 1 << 16;

// `factors` multiplied, checked; the error names the product.
result<std::int64_t> product(std::string_view field, std::string_view formula,
                             std::initializer_list<std::int64_t> factors) {
  std::optional<std::int64_t> n = 1;
  for (const std::int64_t f : factors)
    n = n ? checked_mul(*n, f) : std::nullopt;
  if (!n || *n > max_elements) {
    return field_error(field,
                       fmt::format("{} is more than the 2^40 elements a tensor may have", formula));
  }
  return *n;
}

result<void> check_sizes(const nemotron_h_config& c) {
  for (const auto& [field, value] :
       {std::pair{"vocab_size", c.vocab_size}, std::pair{"hidden_size", c.hidden_size},
        std::pair{"num_attention_heads", c.num_attention_heads},
        std::pair{"num_key_value_heads", c.num_key_value_heads}, std::pair{"head_dim", c.head_dim},
        std::pair{"intermediate_size", c.intermediate_size},
        std::pair{"mamba_num_heads", c.mamba_num_heads},
        std::pair{"mamba_head_dim", c.mamba_head_dim},
        std::pair{"ssm_state_size", c.ssm_state_size}, std::pair{"n_groups", c.n_groups},
        std::pair{"conv_kernel", c.conv_kernel}, std::pair{"chunk_size", c.chunk_size}}) {
    if (value < 0 || value > max_size)
      return field_error(field, fmt::format("must be in [0, 2^24], got {}", value));
  }
  if (c.max_position_embeddings < 0 || c.max_position_embeddings > (std::int64_t{1} << 31)) {
    return field_error("max_position_embeddings",
                       fmt::format("must be in [0, 2^31], got {}", c.max_position_embeddings));
  }
  if (c.layers.size() > max_layers) {
    return field_error("hybrid_override_pattern",
                       fmt::format("{} layers are more than {}", c.layers.size(), max_layers));
  }
  // Sizes are in [0, 2^24] here (positive where a layer uses them, checked
  // later); the products are the weights' shapes.
  const std::int64_t hid = c.hidden_size;
  const std::initializer_list<
      std::tuple<const char*, const char*, std::int64_t, std::int64_t, std::int64_t>>
      products = {
          {"vocab_size", "vocab_size x hidden_size", c.vocab_size, hid, 1},
          {"head_dim", "num_attention_heads x head_dim x hidden_size", c.num_attention_heads,
           c.head_dim, hid},
          {"head_dim", "num_key_value_heads x head_dim x hidden_size", c.num_key_value_heads,
           c.head_dim, hid},
          {"intermediate_size", "intermediate_size x hidden_size", c.intermediate_size, hid, 1},
          {"mamba_head_dim", "mamba_num_heads x mamba_head_dim x hidden_size", c.mamba_num_heads,
           c.mamba_head_dim, hid},
          {"ssm_state_size", "mamba_num_heads x mamba_head_dim x ssm_state_size", c.mamba_num_heads,
           c.mamba_head_dim, c.ssm_state_size},
          {"ssm_state_size", "n_groups x ssm_state_size x hidden_size", c.n_groups,
           c.ssm_state_size, hid},
      };
  for (const auto& [field, formula, a, b, d] : products) {
    if (auto n = product(field, formula, {a, b, d}); !n)
      return n.error();
  }
  // in_proj is [2 H P + 2 G N + H, hidden]: with every size below 2^24 the
  // row count cannot overflow, the product is checked.
  if (auto n = product("mamba_num_heads", "the Mamba in_proj (2 H P + 2 G N + H) x hidden_size",
                       {c.in_proj_size(), hid});
      !n) {
    return n.error();
  }
  return {};
}

result<void> check_tokens(const nemotron_h_config& c) {
  for (const auto& [field, id] :
       {std::pair{"pad_token_id", c.pad_token_id}, std::pair{"bos_token_id", c.bos_token_id}}) {
    if (id && (*id < 0 || *id >= c.vocab_size)) {
      return field_error(field,
                         fmt::format("must be in [0, vocab_size = {}), got {}", c.vocab_size, *id));
    }
  }
  for (const std::int64_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return field_error("eos_token_id",
                         fmt::format("must be in [0, vocab_size = {}), got {}", c.vocab_size, id));
    }
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
  // Sizes first: every later check and every caller may multiply them.
  if (auto ok = check_sizes(*this); !ok)
    return ok;
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
    return fields.fail(
        "model_type",
        fmt::format("'{}' is not a Nemotron-H (nemotron_h) model", text_excerpt(*model_type)),
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
