// qwen3_5_vision_config: the `vision_config` object of a Qwen3.5 config.json.
#include <cmath>
#include <fmt/format.h>
#include <optional>

#include "core/untrusted_json.hpp"
#include "models/internal/json_fields.hpp"
#include "models/internal/json_text.hpp"
#include "models/qwen3_5_vision.hpp"

namespace mstar::models {
namespace {

using internal::json_fields;

constexpr std::int64_t max_size = std::int64_t{1} << 20;  // any one dimension
constexpr double max_product = 2147483648.0;              // patch_dim, merged_hidden

// Reads fields into a config, keeping the first error; later reads are skipped.
class reader {
 public:
  explicit reader(const json_fields& fields) : fields_(fields) {}

  void size(std::string_view key, std::int64_t& out) {
    if (error_)
      return;
    auto read = fields_.integer(key, out);
    if (!read) {
      error_ = read.error();
    } else if (*read < 1 || *read > max_size) {
      error_ = fields_.fail(key, fmt::format("must be in [1, {}], got {}", max_size, *read));
    } else {
      out = *read;
    }
  }
  void string(std::string_view key, std::string& out) {
    if (error_)
      return;
    auto read = fields_.string(key, out);
    if (!read) {
      error_ = read.error();
    } else {
      out = std::move(*read);
    }
  }
  void set_error(error e) {
    if (!error_)
      error_ = std::move(e);
  }
  [[nodiscard]] bool failed() const { return error_.has_value(); }
  [[nodiscard]] result<void> outcome() const {
    if (error_)
      return *error_;
    return {};
  }

 private:
  const json_fields& fields_;
  std::optional<error> error_;
};

// rope_parameters: {"rope_type": "axial", "rope_theta": ...}; a bare
// `rope_theta` beside the other fields is read too (older spelling).
result<double> read_rope_theta(const json_fields& f, std::string_view label) {
  const nlohmann::json* params = f.find("rope_parameters");
  if (params != nullptr && !params->is_object()) {
    return f.fail("rope_parameters",
                  fmt::format("expected an object, got {}", json_excerpt(*params)));
  }
  static const nlohmann::json no_parameters = nlohmann::json::object();
  const nlohmann::json& parameters = params != nullptr ? *params : no_parameters;
  const json_fields rope{parameters, std::string{label}, "vision_config.rope_parameters."};
  const json_fields& holder = params != nullptr ? rope : f;
  auto type = rope.string("rope_type", "axial");
  if (!type)
    return type.error();
  if (*type != "axial") {
    return rope.fail("rope_type",
                     fmt::format("'{}' is not supported (the vision tower's rope is axial)",
                                 text_excerpt(*type)),
                     errc::unsupported);
  }
  auto theta = holder.number("rope_theta", 10000.0);
  if (theta && (!std::isfinite(*theta) || *theta <= 0.0))
    return holder.fail("rope_theta", fmt::format("must be finite and positive, got {}", *theta));
  return theta;
}

// Qwen3-VL's deepstack (features of middle blocks fed to the text model) is
// not part of Qwen3.5: only an empty list is accepted.
result<void> check_no_deepstack(const json_fields& f) {
  const nlohmann::json* value = f.find("deepstack_visual_indexes");
  if (value == nullptr || (value->is_array() && value->empty()))
    return {};
  return f.fail("deepstack_visual_indexes",
                fmt::format("{}: deepstack outputs are not supported (Qwen3.5's vision tower has "
                            "none; is this a Qwen3-VL checkpoint?)",
                            json_excerpt(*value)),
                errc::unsupported);
}

result<void> check(const json_fields& f, const qwen3_5_vision_config& c) {
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu") {
    return f.fail(
        "hidden_act",
        fmt::format("'{}' is not supported (gelu_pytorch_tanh, gelu)", text_excerpt(c.hidden_act)),
        errc::unsupported);
  }
  if (c.hidden_size % c.num_heads != 0) {
    return f.fail("num_heads",
                  fmt::format("{} does not divide hidden_size ({})", c.num_heads, c.hidden_size));
  }
  if (c.head_dim() % 4 != 0) {
    return f.fail("num_heads",
                  fmt::format("head_dim = hidden_size / num_heads = {} is not a multiple of 4 "
                              "(the 2D rotary needs it)",
                              c.head_dim()));
  }
  const double patch = static_cast<double>(c.in_channels) *
                       static_cast<double>(c.temporal_patch_size) *
                       static_cast<double>(c.patch_size) * static_cast<double>(c.patch_size);
  if (patch > max_product) {
    return f.fail("patch_size", fmt::format("a patch of in_channels * temporal_patch_size * "
                                            "patch_size^2 = {} values is too large",
                                            patch));
  }
  const double merged = static_cast<double>(c.hidden_size) *
                        static_cast<double>(c.spatial_merge_size * c.spatial_merge_size);
  if (merged > max_product) {
    return f.fail("spatial_merge_size",
                  fmt::format("hidden_size * spatial_merge_size^2 = {} is too large", merged));
  }
  return {};
}

}  // namespace

std::int64_t qwen3_5_vision_config::grid_side() const noexcept {
  auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(num_position_embeddings)));
  while (side * side > num_position_embeddings)
    --side;
  while ((side + 1) * (side + 1) <= num_position_embeddings)
    ++side;
  return side;
}

result<qwen3_5_vision_config> qwen3_5_vision_config::parse(std::string_view json_text,
                                                           std::string_view label) {
  auto doc = internal::parse_json(json_text, label);
  if (!doc)
    return doc.error();
  if (!doc->is_object())
    return make_error(errc::parse_error, fmt::format("{}: not a JSON object", label));
  const json_fields top{*doc, std::string{label}};
  const nlohmann::json* vision = top.find("vision_config");
  if (vision == nullptr)
    return top.fail("vision_config", "missing (not a Qwen3.5 vision-language config?)");
  if (!vision->is_object()) {
    return top.fail("vision_config",
                    fmt::format("expected an object, got {}", json_excerpt(*vision)));
  }
  const json_fields f{*vision, std::string{label}, "vision_config."};
  qwen3_5_vision_config c;
  reader in{f};
  in.size("depth", c.depth);
  in.size("hidden_size", c.hidden_size);
  in.string("hidden_act", c.hidden_act);
  in.size("intermediate_size", c.intermediate_size);
  in.size("num_heads", c.num_heads);
  in.size("in_channels", c.in_channels);
  in.size("patch_size", c.patch_size);
  in.size("spatial_merge_size", c.spatial_merge_size);
  in.size("temporal_patch_size", c.temporal_patch_size);
  in.size("out_hidden_size", c.out_hidden_size);
  in.size("num_position_embeddings", c.num_position_embeddings);
  if (!in.failed()) {
    auto theta = read_rope_theta(f, label);
    if (!theta) {
      in.set_error(theta.error());
    } else {
      c.rope_theta = *theta;
    }
  }
  if (!in.failed()) {
    if (auto ok = check_no_deepstack(f); !ok)
      in.set_error(ok.error());
  }
  if (auto ok = in.outcome(); !ok)
    return ok.error();
  if (auto ok = check(f, c); !ok)
    return ok.error();
  return c;
}

result<qwen3_5_vision_config> qwen3_5_vision_config::load(const std::filesystem::path& path) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  auto text = internal::read_text_file(file);
  if (!text)
    return text.error();
  return parse(*text, file.string());
}

}  // namespace mstar::models
