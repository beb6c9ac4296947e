#include "models/vision/image_processor_config.hpp"

#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <utility>

#include "core/untrusted_json.hpp"
#include "models/internal/json_fields.hpp"
#include "models/internal/json_text.hpp"

namespace mstar::models::vision {
namespace {

using internal::json_fields;

// Bounds the resized image (and pixel_values, 24 bytes a pixel for Qwen3.5) at
// 16 times Qwen3.5's own longest_edge.
constexpr std::int64_t max_pixel_bound = std::int64_t{1} << 28;

// `image_mean` / `image_std`: one number for every channel, or three.
result<std::array<double, 3>> read_channels(const json_fields& fields, std::string_view key,
                                            std::array<double, 3> fallback) {
  const nlohmann::json* value = fields.find(key);
  if (value == nullptr)
    return fallback;
  if (auto one = internal::tolerant_number(*value)) {
    return std::array<double, 3>{*one, *one, *one};
  }
  if (!value->is_array() || value->size() != 3) {
    return fields.fail(key,
                       fmt::format("expected a number or a list of 3 numbers (R, G, B), got {}",
                                   json_excerpt(*value)));
  }
  std::array<double, 3> out{};
  for (std::size_t c = 0; c < 3; ++c) {
    const auto n = internal::tolerant_number((*value)[c]);
    if (!n) {
      return fields.fail(fmt::format("{}[{}]", key, c),
                         fmt::format("expected a number, got {}", json_excerpt((*value)[c])));
    }
    out[c] = *n;
  }
  return out;
}

// `size.<key>` when present: an integer.
result<std::optional<std::int64_t>> read_size_entry(const json_fields& fields,
                                                    const nlohmann::json& size,
                                                    std::string_view key) {
  const auto it = size.find(key);
  if (it == size.end() || it->is_null())
    return std::optional<std::int64_t>{};
  const auto n = internal::tolerant_integer(*it);
  if (!n) {
    return fields.fail(fmt::format("size.{}", key),
                       fmt::format("expected an integer, got {}", json_excerpt(*it)));
  }
  return std::optional<std::int64_t>{*n};
}

// The pixel bounds: `size`, then the top-level overrides, as the processor's
// constructor applies them.
result<void> read_pixel_bounds(const json_fields& fields, image_processor_config& out) {
  if (const nlohmann::json* size = fields.find("size")) {
    if (!size->is_object())
      return fields.fail("size", fmt::format("expected an object, got {}", json_excerpt(*size)));
    auto shortest = read_size_entry(fields, *size, "shortest_edge");
    if (!shortest)
      return shortest.error();
    auto longest = read_size_entry(fields, *size, "longest_edge");
    if (!longest)
      return longest.error();
    if ((!*shortest && !fields.has("min_pixels")) || (!*longest && !fields.has("max_pixels"))) {
      return fields.fail("size",
                         "needs 'shortest_edge' and 'longest_edge' (the least and largest resized "
                         "area in pixels), or top-level 'min_pixels' and 'max_pixels'");
    }
    out.min_pixels = shortest->value_or(out.min_pixels);
    out.max_pixels = longest->value_or(out.max_pixels);
  }
  auto min_pixels = fields.integer("min_pixels", out.min_pixels);
  if (!min_pixels)
    return min_pixels.error();
  auto max_pixels = fields.integer("max_pixels", out.max_pixels);
  if (!max_pixels)
    return max_pixels.error();
  out.min_pixels = *min_pixels;
  out.max_pixels = *max_pixels;
  return {};
}

// Fields whose other values would make the reference compute something else.
result<void> check_supported(const json_fields& fields) {
  auto type = fields.string("image_processor_type", "Qwen2VLImageProcessor");
  if (!type)
    return type.error();
  if (*type != "Qwen2VLImageProcessor" && *type != "Qwen2VLImageProcessorFast" &&
      *type != "Qwen2VLImageProcessorPil") {
    return fields.fail("image_processor_type",
                       fmt::format("'{}' is not a Qwen2-VL image processor", text_excerpt(*type)),
                       errc::unsupported);
  }
  auto resample = fields.integer("resample", 3);
  if (!resample)
    return resample.error();
  if (*resample != 3) {
    return fields.fail("resample", fmt::format("only 3 (bicubic) is supported, got {}", *resample),
                       errc::unsupported);
  }
  auto convert_rgb = fields.boolean("do_convert_rgb", true);
  if (!convert_rgb)
    return convert_rgb.error();
  if (!*convert_rgb)
    return fields.fail("do_convert_rgb", "only true is supported", errc::unsupported);
  return {};
}

result<void> read_fields(const json_fields& fields, image_processor_config& out) {
  if (auto ok = check_supported(fields); !ok)
    return ok;
  for (auto [key, target] : {std::pair{"patch_size", &out.patch_size},
                             std::pair{"temporal_patch_size", &out.temporal_patch_size},
                             std::pair{"merge_size", &out.merge_size}}) {
    auto n = fields.integer(key, *target);
    if (!n)
      return n.error();
    *target = *n;
  }
  for (auto [key, target] :
       {std::pair{"do_resize", &out.do_resize}, std::pair{"do_rescale", &out.do_rescale},
        std::pair{"do_normalize", &out.do_normalize}}) {
    auto b = fields.boolean(key, *target);
    if (!b)
      return b.error();
    *target = *b;
  }
  auto rescale = fields.number("rescale_factor", out.rescale_factor);
  if (!rescale)
    return rescale.error();
  out.rescale_factor = *rescale;
  auto mean = read_channels(fields, "image_mean", out.image_mean);
  if (!mean)
    return mean.error();
  out.image_mean = *mean;
  auto std_dev = read_channels(fields, "image_std", out.image_std);
  if (!std_dev)
    return std_dev.error();
  out.image_std = *std_dev;
  return read_pixel_bounds(fields, out);
}

result<void> check_size(std::string_view name, std::int64_t value, std::int64_t limit) {
  if (value <= 0 || value > limit) {
    return make_error(errc::invalid_argument,
                      fmt::format("field '{}': must be in [1, {}], got {}", name, limit, value));
  }
  return {};
}

}  // namespace

result<void> image_processor_config::validate() const {
  for (auto ok : {check_size("patch_size", patch_size, 1024),
                  check_size("temporal_patch_size", temporal_patch_size, 64),
                  check_size("merge_size", merge_size, 1024),
                  check_size("size.shortest_edge (min_pixels)", min_pixels, max_pixel_bound),
                  check_size("size.longest_edge (max_pixels)", max_pixels, max_pixel_bound)}) {
    if (!ok)
      return ok;
  }
  for (std::size_t c = 0; c < 3; ++c) {
    if (!std::isfinite(image_mean[c])) {
      return make_error(errc::invalid_argument,
                        fmt::format("field 'image_mean[{}]': must be finite", c));
    }
    if (!std::isfinite(image_std[c]) || image_std[c] == 0.0) {
      return make_error(errc::invalid_argument,
                        fmt::format("field 'image_std[{}]': must be finite and non-zero, got {}", c,
                                    image_std[c]));
    }
  }
  if (!std::isfinite(rescale_factor) || rescale_factor <= 0.0) {
    return make_error(
        errc::invalid_argument,
        fmt::format("field 'rescale_factor': must be positive and finite, got {}", rescale_factor));
  }
  return {};
}

result<image_processor_config> image_processor_config::parse(std::string_view json_text,
                                                             std::string_view label) {
  auto doc = internal::parse_json(json_text, label);
  if (!doc)
    return doc.error();
  if (!doc->is_object())
    return make_error(errc::parse_error, fmt::format("{}: not a JSON object", label));
  const json_fields fields{*doc, std::string{label}};
  image_processor_config out;
  if (auto ok = read_fields(fields, out); !ok)
    return ok.error();
  if (auto ok = out.validate(); !ok)
    return ok.error().with_context(label);
  return out;
}

result<image_processor_config> image_processor_config::load(const std::filesystem::path& path) {
  std::error_code ec;
  const auto file =
      std::filesystem::is_directory(path, ec) ? path / "preprocessor_config.json" : path;
  auto text = internal::read_text_file(file);
  if (!text)
    return text.error();
  return parse(*text, file.string());
}

}  // namespace mstar::models::vision
