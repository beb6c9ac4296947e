#include "models/vision/image_processor.hpp"

#include <fmt/format.h>
#include <optional>

#include "models/vision/bicubic_resize.hpp"
#include "models/vision/smart_resize.hpp"

namespace mstar::models::vision {
namespace {

// Per-channel affine map x -> (x - shift) / divisor in float32, as the
// torchvision backend computes it: with rescale and normalize both on, mean
// and std become float32 tensors multiplied by 1 / rescale_factor (as float32).
struct channel_map {
  std::array<float, 3> shift{0.0F, 0.0F, 0.0F};
  std::array<float, 3> divisor{1.0F, 1.0F, 1.0F};
  bool multiply = false;  ///< rescale only: x * rescale_factor instead
  float factor = 1.0F;
};

channel_map make_channel_map(const image_processor_config& config) {
  channel_map m;
  if (config.do_normalize) {
    const float inverse =
        config.do_rescale ? static_cast<float>(1.0 / config.rescale_factor) : 1.0F;
    for (std::size_t c = 0; c < 3; ++c) {
      const float mean = static_cast<float>(config.image_mean[c]);
      const float std_dev = static_cast<float>(config.image_std[c]);
      m.shift[c] = config.do_rescale ? mean * inverse : mean;
      m.divisor[c] = config.do_rescale ? std_dev * inverse : std_dev;
    }
  } else if (config.do_rescale) {
    m.multiply = true;
    m.factor = static_cast<float>(config.rescale_factor);
  }
  return m;
}

float apply(const channel_map& m, std::size_t c, std::uint8_t x) {
  const auto v = static_cast<float>(x);
  return m.multiply ? v * m.factor : (v - m.shift[c]) / m.divisor[c];
}

// Copies the image into patch rows in the processor's order.
void patchify(const rgb_image& image, const image_processor_config& config, const channel_map& m,
              image_patches& out) {
  const std::int64_t p = config.patch_size;
  const std::int64_t merge = config.merge_size;
  const std::int64_t frames = config.temporal_patch_size;
  const std::int64_t grid_h = image.height / p;
  const std::int64_t grid_w = image.width / p;
  float* dst = out.pixel_values.data();
  for (std::int64_t bh = 0; bh < grid_h / merge; ++bh) {
    for (std::int64_t bw = 0; bw < grid_w / merge; ++bw) {
      for (std::int64_t mh = 0; mh < merge; ++mh) {
        for (std::int64_t mw = 0; mw < merge; ++mw) {
          const std::int64_t y0 = (bh * merge + mh) * p;
          const std::int64_t x0 = (bw * merge + mw) * p;
          for (std::size_t c = 0; c < 3; ++c) {
            for (std::int64_t t = 0; t < frames; ++t) {
              for (std::int64_t y = 0; y < p; ++y) {
                const std::uint8_t* src = image.at(x0, y0 + y) + c;
                for (std::int64_t x = 0; x < p; ++x)
                  *dst++ = apply(m, c, src[3 * x]);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

result<image_patches> preprocess_image(const rgb_image& image,
                                       const image_processor_config& config) {
  if (auto ok = config.validate(); !ok)
    return ok.error();
  constexpr std::int64_t max_side = std::int64_t{1} << 31;
  if (image.width <= 0 || image.height <= 0 || image.width > max_side || image.height > max_side ||
      image.pixels.size() / 3 != static_cast<std::size_t>(image.width * image.height) ||
      image.pixels.size() % 3 != 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("image: {} x {} (w x h) with {} bytes is not an RGB image",
                                  image.width, image.height, image.pixels.size()));
  }
  image_size size{image.height, image.width};
  if (config.do_resize) {
    auto target = smart_resize(image.height, image.width, config.factor(), config.min_pixels,
                               config.max_pixels);
    if (!target)
      return target.error();
    size = *target;
  } else if (image.height % config.factor() != 0 || image.width % config.factor() != 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("image: with do_resize false, a {} x {} (h x w) image must have "
                                  "sides that are multiples of patch_size * merge_size = {}",
                                  image.height, image.width, config.factor()));
  }
  // torchvision returns the tensor itself when the size is kept.
  std::optional<rgb_image> resized_copy;
  if (size != image_size{image.height, image.width})
    resized_copy = resize_bicubic_antialias(image, size);
  const rgb_image& resized = resized_copy ? *resized_copy : image;

  image_patches out;
  out.resized = size;
  out.grid_thw = {1, size.height / config.patch_size, size.width / config.patch_size};
  out.num_patches = out.grid_thw[1] * out.grid_thw[2];
  out.patch_dim = config.patch_dim();
  out.pixel_values.resize(static_cast<std::size_t>(out.num_patches * out.patch_dim));
  patchify(resized, config, make_channel_map(config), out);
  return out;
}

result<image_patches> preprocess_image(std::span<const std::byte> encoded,
                                       const image_processor_config& config,
                                       const decode_options& options) {
  auto image = decode_image(encoded, options);
  if (!image)
    return image.error();
  return preprocess_image(*image, config);
}

std::int64_t image_token_count(const std::array<std::int64_t, 3>& grid_thw,
                               std::int64_t merge_size) noexcept {
  if (merge_size <= 0)
    return 0;
  return grid_thw[0] * grid_thw[1] * grid_thw[2] / (merge_size * merge_size);
}

result<std::int64_t> image_token_count(image_size size, const image_processor_config& config) {
  if (auto ok = config.validate(); !ok)
    return ok.error();
  image_size target = size;
  if (config.do_resize) {
    auto resized = smart_resize(size.height, size.width, config.factor(), config.min_pixels,
                                config.max_pixels);
    if (!resized)
      return resized.error();
    target = *resized;
  }
  return image_token_count({1, target.height / config.patch_size, target.width / config.patch_size},
                           config.merge_size);
}

}  // namespace mstar::models::vision
