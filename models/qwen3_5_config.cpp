#include "models/qwen3_5_config.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/untrusted_json.hpp"
#include "models/internal/json_fields.hpp"
#include "models/internal/json_text.hpp"

namespace mstar::models {
namespace {

using internal::json_fields;
using json = nlohmann::json;

// Reads `key` into `out` when present; the first failure sticks in `status`.
struct reader {
  const json_fields& fields;
  result<void> status{};

  void integer(std::string_view key, std::int64_t& out) {
    if (!status)
      return;
    auto v = fields.integer(key, out);
    v ? void(out = *v) : void(status = v.error());
  }
  void number(std::string_view key, double& out) {
    if (!status)
      return;
    auto v = fields.number(key, out);
    v ? void(out = *v) : void(status = v.error());
  }
  void boolean(std::string_view key, bool& out) {
    if (!status)
      return;
    auto v = fields.boolean(key, out);
    v ? void(out = *v) : void(status = v.error());
  }
  void string(std::string_view key, std::string& out) {
    if (!status)
      return;
    auto v = fields.string(key, out);
    v ? void(out = *v) : void(status = v.error());
  }
};

// `eos_token_id`: an id, a list of ids, or null / absent (none).
result<std::vector<std::int64_t>> read_eos(const json_fields& fields) {
  const json* value = fields.find("eos_token_id");
  std::vector<std::int64_t> out;
  if (value == nullptr)
    return out;
  if (auto id = internal::tolerant_integer(*value)) {
    out.push_back(*id);
    return out;
  }
  if (!value->is_array())
    return fields.fail("eos_token_id", "expected an id or a list of ids");
  for (std::size_t i = 0; i < value->size(); ++i) {
    auto id = internal::tolerant_integer((*value)[i]);
    if (!id)
      return fields.fail(fmt::format("eos_token_id[{}]", i), "expected an integer id");
    out.push_back(*id);
  }
  return out;
}

// `layer_types`, or transformers' default of full attention every
// `full_attention_interval` (4) layers.
result<std::vector<qwen3_5_mixer>> read_layers(const json_fields& fields, std::int64_t count) {
  std::vector<qwen3_5_mixer> out;
  const json* types = fields.find("layer_types");
  if (types == nullptr) {
    auto interval = fields.integer("full_attention_interval", 4);
    if (!interval)
      return interval.error();
    if (*interval <= 0)
      return fields.fail("full_attention_interval", "must be positive");
    for (std::int64_t i = 0; i < count; ++i) {
      out.push_back((i + 1) % *interval == 0 ? qwen3_5_mixer::attention : qwen3_5_mixer::delta_net);
    }
    return out;
  }
  if (!types->is_array())
    return fields.fail("layer_types", "expected a list of strings");
  for (std::size_t i = 0; i < types->size(); ++i) {
    const auto& t = (*types)[i];
    const auto name = t.is_string() ? t.get<std::string>() : std::string{};
    if (name == "linear_attention") {
      out.push_back(qwen3_5_mixer::delta_net);
    } else if (name == "full_attention") {
      out.push_back(qwen3_5_mixer::attention);
    } else {
      return fields.fail(fmt::format("layer_types[{}]", i),
                         fmt::format("'{}' is not linear_attention or full_attention",
                                     text_excerpt(t.is_string() ? name : t.dump())),
                         errc::unsupported);
    }
  }
  if (static_cast<std::int64_t>(out.size()) != count) {
    return fields.fail("layer_types",
                       fmt::format("has {} entries, num_hidden_layers is {}", out.size(), count));
  }
  return out;
}

// `rope_parameters` (transformers 5), or the older `rope_theta` / `rope_scaling`
// and `partial_rotary_factor` beside the other fields.
result<void> read_rope(const json_fields& fields, const std::string& prefix,
                       const std::string& label, qwen3_5_config& c) {
  reader top{fields};
  top.number("rope_theta", c.rope_theta);
  top.number("partial_rotary_factor", c.partial_rotary_factor);
  if (!top.status)
    return top.status;
  const json* rope = fields.find("rope_parameters");
  if (rope == nullptr)
    rope = fields.find("rope_scaling");
  if (rope == nullptr)
    return {};
  if (!rope->is_object())
    return fields.fail("rope_parameters", "expected an object");
  const json_fields rp{*rope, label, prefix + "rope_parameters."};
  reader in{rp};
  std::string type = "default";
  in.string("rope_type", type);
  in.number("rope_theta", c.rope_theta);
  in.number("partial_rotary_factor", c.partial_rotary_factor);
  in.boolean("mrope_interleaved", c.mrope_interleaved);
  if (!in.status)
    return in.status;
  if (type != "default") {
    return rp.fail("rope_type", fmt::format("'{}' is not supported (default)", text_excerpt(type)),
                   errc::unsupported);
  }
  if (const json* sec = rp.find("mrope_section")) {
    if (!sec->is_array() || sec->size() != 3)
      return rp.fail("mrope_section", "expected a list of three integers (t, h, w)");
    for (std::size_t i = 0; i < 3; ++i) {
      auto v = internal::tolerant_integer((*sec)[i]);
      if (!v || *v < 0)
        return rp.fail(fmt::format("mrope_section[{}]", i), "expected a non-negative integer");
      c.mrope_section[i] = *v;
    }
  }
  return {};
}

result<void> read_text(const json_fields& f, const std::string& prefix, const std::string& label,
                       qwen3_5_config& c) {
  for (const std::string_view required : {"vocab_size", "hidden_size"}) {
    if (!f.has(required))
      return f.fail(required, "missing");
  }
  if (f.has("num_experts") || f.has("num_local_experts")) {
    return f.fail(f.has("num_experts") ? "num_experts" : "num_local_experts",
                  "mixture-of-experts Qwen3.5 models are not supported", errc::unsupported);
  }
  reader in{f};
  std::int64_t num_layers = 32;
  in.integer("vocab_size", c.vocab_size);
  in.integer("hidden_size", c.hidden_size);
  in.integer("intermediate_size", c.intermediate_size);
  in.integer("num_hidden_layers", num_layers);
  in.integer("num_attention_heads", c.num_attention_heads);
  in.integer("num_key_value_heads", c.num_key_value_heads);
  in.integer("head_dim", c.head_dim);
  in.integer("linear_num_key_heads", c.linear_num_key_heads);
  in.integer("linear_num_value_heads", c.linear_num_value_heads);
  in.integer("linear_key_head_dim", c.linear_key_head_dim);
  in.integer("linear_value_head_dim", c.linear_value_head_dim);
  in.integer("linear_conv_kernel_dim", c.linear_conv_kernel_dim);
  in.number("rms_norm_eps", c.rms_norm_eps);
  in.integer("max_position_embeddings", c.max_position_embeddings);
  in.boolean("tie_word_embeddings", c.tie_word_embeddings);
  std::string act = "silu";
  in.string("hidden_act", act);
  bool bias = false;
  in.boolean("attention_bias", bias);
  if (!in.status)
    return in.status;
  if (act != "silu") {
    return f.fail("hidden_act", fmt::format("'{}' is not supported (silu)", text_excerpt(act)),
                  errc::unsupported);
  }
  if (bias)
    return f.fail("attention_bias", "true is not supported", errc::unsupported);
  if (num_layers <= 0 || num_layers > 4096)
    return f.fail("num_hidden_layers", fmt::format("must be in [1, 4096], got {}", num_layers));
  auto layers = read_layers(f, num_layers);
  if (!layers)
    return layers.error();
  c.layers = std::move(*layers);
  auto eos = read_eos(f);
  if (!eos)
    return eos.error();
  c.eos_token_ids = std::move(*eos);
  return read_rope(f, prefix, label, c);
}

result<void> positive(std::string_view field, std::int64_t value) {
  if (value > 0)
    return {};
  return make_error(errc::invalid_argument,
                    fmt::format("field '{}': must be positive, got {}", field, value));
}

}  // namespace

std::int64_t qwen3_5_config::count(qwen3_5_mixer kind) const noexcept {
  return std::count(layers.begin(), layers.end(), kind);
}

result<void> qwen3_5_config::validate() const {
  const std::pair<std::string_view, std::int64_t> sizes[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"head_dim", head_dim},
      {"linear_num_key_heads", linear_num_key_heads},
      {"linear_num_value_heads", linear_num_value_heads},
      {"linear_key_head_dim", linear_key_head_dim},
      {"linear_value_head_dim", linear_value_head_dim},
      {"linear_conv_kernel_dim", linear_conv_kernel_dim}};
  for (const auto& s : sizes) {
    if (auto ok = positive(s.first, s.second); !ok)
      return ok;
    if (s.second > (std::int64_t{1} << 24)) {
      return make_error(errc::invalid_argument,
                        fmt::format("field '{}': {} is implausibly large", s.first, s.second));
    }
  }
  auto bad = [](std::string_view field, std::string reason) {
    return make_error(errc::invalid_argument, fmt::format("field '{}': {}", field, reason));
  };
  if (num_attention_heads % num_key_value_heads != 0) {
    return bad("num_key_value_heads", fmt::format("{} does not divide num_attention_heads ({})",
                                                  num_key_value_heads, num_attention_heads));
  }
  if (linear_num_value_heads % linear_num_key_heads != 0) {
    return bad("linear_num_key_heads", fmt::format("{} does not divide linear_num_value_heads ({})",
                                                   linear_num_key_heads, linear_num_value_heads));
  }
  if (linear_conv_kernel_dim < 2)
    return bad("linear_conv_kernel_dim", "must be at least 2");
  if (!std::isfinite(rms_norm_eps) || rms_norm_eps <= 0)
    return bad("rms_norm_eps", fmt::format("must be finite and positive, got {}", rms_norm_eps));
  if (!std::isfinite(rope_theta) || rope_theta <= 0)
    return bad("rope_theta", fmt::format("must be finite and positive, got {}", rope_theta));
  const auto rot = rotary_dim();
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1) || rot % 2 != 0 || rot == 0) {
    return bad("partial_rotary_factor",
               fmt::format("{} of head_dim {} is not an even number of channels",
                           partial_rotary_factor, head_dim));
  }
  // mrope_section need not cover the rotary span: as in transformers, pair
  // i takes height when i % 3 == 1 and i < 3 h, width when i % 3 == 2 and
  // i < 3 w, else temporal; the default [11, 11, 10] on a span other than
  // 32 pairs is what a text-only checkpoint without the field runs with.
  if (!mrope_interleaved && count(qwen3_5_mixer::attention) > 0 && multimodal) {
    return make_error(errc::unsupported,
                      "field 'rope_parameters.mrope_interleaved': false (sectioned M-RoPE) is "
                      "not supported");
  }
  for (const auto id : eos_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return bad("eos_token_id", fmt::format("{} is outside the vocabulary of {}", id, vocab_size));
    }
  }
  return {};
}

result<qwen3_5_config> qwen3_5_config::parse(std::string_view json_text, std::string_view label) {
  auto doc = internal::parse_json(json_text, label);
  if (!doc)
    return doc.error();
  if (!doc->is_object())
    return make_error(errc::parse_error, fmt::format("{}: not a JSON object", label));
  const std::string lab{label};
  const json_fields top{*doc, lab};
  auto type = top.string("model_type", "");
  if (!type)
    return type.error();
  qwen3_5_config out;
  if (*type == "qwen3_5") {
    const json* text = top.find("text_config");
    if (text == nullptr || !text->is_object())
      return top.fail("text_config", "missing or not an object");
    const json_fields tf{*text, lab, "text_config."};
    if (auto ok = read_text(tf, "text_config.", lab, out); !ok)
      return ok.error();
    reader in{top};
    in.boolean("tie_word_embeddings", out.tie_word_embeddings);
    in.integer("image_token_id", out.image_token_id);
    in.integer("vision_start_token_id", out.vision_start_token_id);
    in.integer("vision_end_token_id", out.vision_end_token_id);
    in.string("dtype", out.weights_dtype);
    if (!in.status)
      return in.status.error();
    out.multimodal = top.has("vision_config");
    if (out.eos_token_ids.empty()) {
      auto eos = read_eos(top);
      if (!eos)
        return eos.error();
      out.eos_token_ids = std::move(*eos);
    }
  } else if (*type == "qwen3_5_text") {
    if (auto ok = read_text(top, "", lab, out); !ok)
      return ok.error();
  } else {
    return top.fail(
        "model_type",
        fmt::format("'{}' is not a Qwen3.5 model (qwen3_5, qwen3_5_text)", text_excerpt(*type)),
        errc::unsupported);
  }
  if (out.weights_dtype.empty()) {
    reader in{top};
    in.string("torch_dtype", out.weights_dtype);
  }
  if (auto ok = out.validate(); !ok)
    return ok.error().with_context(label);
  return out;
}

result<qwen3_5_config> qwen3_5_config::load(const std::filesystem::path& path) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  auto text = internal::read_text_file(file);
  if (!text)
    return text.error();
  return parse(*text, file.string());
}

result<std::string> read_model_type(const std::filesystem::path& folder) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(folder, ec) ? folder / "config.json" : folder;
  auto text = internal::read_text_file(file);
  if (!text)
    return text.error();
  auto doc = internal::parse_json(*text, file.string());
  if (!doc)
    return doc.error();
  if (!doc->is_object())
    return make_error(errc::parse_error, fmt::format("{}: not a JSON object", file.string()));
  return json_fields{*doc, file.string()}.string("model_type", "");
}

}  // namespace mstar::models
