#include <cstddef>

#include "models/vision/internal/decoders.hpp"

namespace mstar::models::vision::internal {
namespace {

std::uint32_t read_u16(std::span<const std::uint8_t> b, std::size_t at, bool little) noexcept {
  return little ? (b[at] | (b[at + 1] << 8)) : ((b[at] << 8) | b[at + 1]);
}

std::uint32_t read_u32(std::span<const std::uint8_t> b, std::size_t at, bool little) noexcept {
  const std::uint32_t lo = read_u16(b, at + (little ? 0 : 2), little);
  const std::uint32_t hi = read_u16(b, at + (little ? 2 : 0), little);
  return lo | (hi << 16);
}

// Where pixel (x, y) of the turned image comes from in the original
// `width` x `height` one, for EXIF orientation 2..8 (PIL's exif_transpose:
// 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise,
// 7 transverse, 8 rotate 90 counter-clockwise).
struct source_pixel {
  std::int64_t x;
  std::int64_t y;
};

source_pixel source_of(int orientation, std::int64_t x, std::int64_t y, std::int64_t width,
                       std::int64_t height) noexcept {
  switch (orientation) {
    case 2:
      return {width - 1 - x, y};
    case 3:
      return {width - 1 - x, height - 1 - y};
    case 4:
      return {x, height - 1 - y};
    case 5:
      return {y, x};
    case 6:
      return {y, height - 1 - x};
    case 7:
      return {width - 1 - y, height - 1 - x};
    case 8:
      return {width - 1 - y, x};
    default:
      return {x, y};
  }
}

}  // namespace

int exif_orientation(std::span<const std::uint8_t> tiff) noexcept {
  if (tiff.size() < 8)
    return 1;
  bool little = false;
  if (tiff[0] == 'I' && tiff[1] == 'I') {
    little = true;
  } else if (tiff[0] != 'M' || tiff[1] != 'M') {
    return 1;
  }
  if (read_u16(tiff, 2, little) != 42)
    return 1;
  const std::size_t ifd = read_u32(tiff, 4, little);
  if (ifd > tiff.size() - 2)
    return 1;
  const std::size_t entries = read_u16(tiff, ifd, little);
  for (std::size_t i = 0; i < entries; ++i) {
    const std::size_t entry = ifd + 2 + 12 * i;
    if (tiff.size() < 12 || entry > tiff.size() - 12)
      return 1;
    if (read_u16(tiff, entry, little) != 0x0112)
      continue;
    const std::uint32_t type = read_u16(tiff, entry + 2, little);
    std::uint32_t value = 0;
    if (type == 3) {  // SHORT, the type the standard gives Orientation
      value = read_u16(tiff, entry + 8, little);
    } else if (type == 4) {  // LONG, seen in the wild
      value = read_u32(tiff, entry + 8, little);
    }
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

rgb_image apply_orientation(rgb_image image, int orientation) {
  if (orientation < 2 || orientation > 8)
    return image;
  const bool swaps = orientation >= 5;
  rgb_image out;
  out.width = swaps ? image.height : image.width;
  out.height = swaps ? image.width : image.height;
  out.pixels.resize(image.pixels.size());
  for (std::int64_t y = 0; y < out.height; ++y) {
    for (std::int64_t x = 0; x < out.width; ++x) {
      const source_pixel s = source_of(orientation, x, y, image.width, image.height);
      const std::uint8_t* from = image.at(s.x, s.y);
      std::uint8_t* to = out.pixels.data() + (y * out.width + x) * 3;
      to[0] = from[0];
      to[1] = from[1];
      to[2] = from[2];
    }
  }
  return out;
}

}  // namespace mstar::models::vision::internal
