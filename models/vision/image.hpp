#pragma once

#include <cstdint>
#include <vector>

namespace mstar::models::vision {

/// An 8-bit RGB image: what every decoder produces and every later step takes.
struct rgb_image {
  std::int64_t width = 0;
  std::int64_t height = 0;
  std::vector<std::uint8_t> pixels;  ///< [height, width, 3], row-major, R G B

  /// The first byte of pixel (x, y); the caller keeps x < width and y < height.
  [[nodiscard]] const std::uint8_t* at(std::int64_t x, std::int64_t y) const noexcept {
    return pixels.data() + (y * width + x) * 3;
  }
};

/// Height and width of an image, in that order (transformers' order).
struct image_size {
  std::int64_t height = 0;
  std::int64_t width = 0;

  friend bool operator==(const image_size&, const image_size&) = default;
};

}  // namespace mstar::models::vision
