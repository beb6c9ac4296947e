#include "models/nemotron_h_config.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "core/untrusted_json.hpp"
#include "models/internal/config_readers.hpp"
#include "models/internal/json_fields.hpp"

namespace mstar::models {
namespace {

using internal::json_fields;

// Reads fields into a config, keeping the first error; later reads are skipped.
// A legacy alias, when present, wins over the current name, as in transformers.
class reader {
 public:
  explicit reader(const json_fields& fields) : fields_(fields) {}

  void integer(std::string_view key, std::int64_t& out, std::string_view alias = {}) {
    keep(fields_.integer(pick(key, alias), out), out);
  }
  void number(std::string_view key, double& out, std::string_view alias = {}) {
    keep(fields_.number(pick(key, alias), out), out);
  }
  void boolean(std::string_view key, bool& out, std::string_view alias = {}) {
    keep(fields_.boolean(pick(key, alias), out), out);
  }
  void string(std::string_view key, std::string& out) { keep(fields_.string(key, out), out); }
  void optional_integer(std::string_view key, std::optional<std::int64_t>& out) {
    keep(fields_.optional_integer(key, out), out);
  }

  void set_error(error e) {
    if (!error_)
      error_ = std::move(e);
  }
  [[nodiscard]] result<void> outcome() const {
    if (error_)
      return *error_;
    return {};
  }

 private:
  std::string_view pick(std::string_view key, std::string_view alias) const {
    return !alias.empty() && fields_.has(alias) ? alias : key;
  }

  template <class T>
  void keep(result<T> read, T& out) {
    if (error_)
      return;
    if (!read) {
      error_ = read.error();
    } else {
      out = std::move(*read);
    }
  }

  const json_fields& fields_;
  std::optional<error> error_;
};

void read_limits(const json_fields& fields, reader& in, std::array<double, 2>& out) {
  const std::string_view key = fields.has("mamba_dt_limit") ? "mamba_dt_limit" : "time_step_limit";
  const nlohmann::json* value = fields.find(key);
  if (value == nullptr)
    return;
  const auto low = value->is_array() && value->size() == 2 ? internal::tolerant_number((*value)[0])
                                                           : std::nullopt;
  const auto high = low ? internal::tolerant_number((*value)[1]) : std::nullopt;
  if (!high) {
    in.set_error(
        fields.fail(key, fmt::format("expected [min, max] numbers, got {}", json_excerpt(*value))));
    return;
  }
  out = {*low, *high};
}

void read_eos(const json_fields& fields, reader& in, std::vector<std::int64_t>& out) {
  if (fields.is_null("eos_token_id")) {
    out.clear();  // explicit null: no end-of-sequence id
    return;
  }
  const nlohmann::json* value = fields.find("eos_token_id");
  if (value == nullptr)
    return;
  std::vector<std::int64_t> ids;
  const nlohmann::json items = value->is_array() ? *value : nlohmann::json::array({*value});
  for (const auto& item : items) {
    const auto id = internal::tolerant_integer(item);
    if (!id) {
      in.set_error(fields.fail(
          "eos_token_id",
          fmt::format("expected an id or a list of ids, got {}", json_excerpt(*value))));
      return;
    }
    ids.push_back(*id);
  }
  out = std::move(ids);
}

void read_cache_dtype(const json_fields& f, reader& in, mstar::dtype& out) {
  std::string name{to_string(out)};
  in.string("mamba_ssm_cache_dtype", name);
  if (auto parsed = parse_dtype(name); !parsed) {
    in.set_error(f.fail("mamba_ssm_cache_dtype", parsed.error().message()));
  } else {
    out = *parsed;
  }
}

}  // namespace

namespace internal {

result<void> read_nemotron_h_fields(const json_fields& f, nemotron_h_config& c) {
  reader in{f};
  in.integer("vocab_size", c.vocab_size);
  in.integer("hidden_size", c.hidden_size);
  in.integer("num_attention_heads", c.num_attention_heads);
  if (f.is_null("num_key_value_heads"))
    c.num_key_value_heads = c.num_attention_heads;
  in.integer("num_key_value_heads", c.num_key_value_heads);
  in.integer("head_dim", c.head_dim, "attention_head_dim");
  in.integer("max_position_embeddings", c.max_position_embeddings);
  in.boolean("attention_bias", c.attention_bias);
  in.integer("intermediate_size", c.intermediate_size);
  in.string("mlp_hidden_act", c.mlp_hidden_act);
  in.boolean("mlp_bias", c.mlp_bias);
  in.integer("mamba_num_heads", c.mamba_num_heads);
  in.integer("mamba_head_dim", c.mamba_head_dim);
  in.integer("ssm_state_size", c.ssm_state_size);
  in.integer("n_groups", c.n_groups, "mamba_n_groups");
  in.integer("conv_kernel", c.conv_kernel, "mamba_d_conv");
  in.integer("chunk_size", c.chunk_size, "mamba_chunk_size");
  in.integer("expand", c.expand, "mamba_expand");
  in.string("mamba_hidden_act", c.mamba_hidden_act);
  in.number("time_step_min", c.time_step_min, "mamba_dt_min");
  in.number("time_step_max", c.time_step_max, "mamba_dt_max");
  in.number("time_step_floor", c.time_step_floor, "mamba_dt_init_floor");
  read_limits(f, in, c.time_step_limit);
  in.boolean("use_conv_bias", c.use_conv_bias, "mamba_conv_bias");
  in.boolean("use_bias", c.use_bias);
  in.boolean("mamba_proj_bias", c.mamba_proj_bias);
  read_cache_dtype(f, in, c.mamba_ssm_cache_dtype);
  in.number("layer_norm_epsilon", c.layer_norm_epsilon);
  in.boolean("tie_word_embeddings", c.tie_word_embeddings);
  in.boolean("residual_in_fp32", c.residual_in_fp32);
  in.boolean("rescale_prenorm_residual", c.rescale_prenorm_residual);
  in.optional_integer("pad_token_id", c.pad_token_id);
  in.optional_integer("bos_token_id", c.bos_token_id);
  read_eos(f, in, c.eos_token_ids);
  in.string(f.has("dtype") ? "dtype" : "torch_dtype", c.weights_dtype);
  return in.outcome();
}

}  // namespace internal

char pattern_char(layer_kind kind) noexcept {
  switch (kind) {
    case layer_kind::mamba2:
      return 'M';
    case layer_kind::attention:
      return '*';
    case layer_kind::mlp:
      return '-';
    case layer_kind::moe:
      return 'E';
  }
  return '?';
}

std::string_view to_string(layer_kind kind) noexcept {
  switch (kind) {
    case layer_kind::mamba2:
      return "mamba";
    case layer_kind::attention:
      return "attention";
    case layer_kind::mlp:
      return "mlp";
    case layer_kind::moe:
      return "moe";
  }
  return "unknown";
}

std::string nemotron_h_config::pattern() const {
  std::string out;
  for (const layer_kind kind : layers)
    out.push_back(pattern_char(kind));
  return out;
}

std::int64_t nemotron_h_config::count(layer_kind kind) const noexcept {
  return std::count(layers.begin(), layers.end(), kind);
}

}  // namespace mstar::models
