#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/result.hpp"
#include "models/vision/image.hpp"
#include "models/vision/image_decode.hpp"

namespace mstar::models::vision::internal {

/// decode_image for bytes that start with the PNG signature (libpng).
[[nodiscard]] result<rgb_image> decode_png(std::span<const std::byte> bytes,
                                           const decode_options& options);

/// decode_image for bytes that start with a JPEG SOI marker (libjpeg-turbo).
[[nodiscard]] result<rgb_image> decode_jpeg(std::span<const std::byte> bytes,
                                            const decode_options& options);

/// The out_of_range refusal of a `width` x `height` image above `limit`
/// pixels, or success; checked from the header, before pixels are allocated.
[[nodiscard]] result<void> check_pixel_limit(std::string_view format, std::int64_t width,
                                             std::int64_t height, std::int64_t limit);

/// The Orientation tag (1..8) of an EXIF block (a TIFF header and IFD0, as
/// a JPEG's APP1 after "Exif\0\0" or a PNG's eXIf chunk holds it); 1 when the
/// block is absent, malformed, or holds no valid value, as PIL reads it.
[[nodiscard]] int exif_orientation(std::span<const std::uint8_t> tiff) noexcept;

/// `image` turned upright for EXIF `orientation` as PIL's `exif_transpose`
/// does (2..8; anything else returns it unchanged).
[[nodiscard]] rgb_image apply_orientation(rgb_image image, int orientation);

/// How decoded rows are laid out before they become RGB.
struct row_layout {
  std::int64_t width = 0;
  int channels = 3;            ///< 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA (or CMYK)
  int bit_depth = 8;           ///< 8, or 16 (big-endian samples, as libpng leaves them)
  bool gray16_clamps = false;  ///< 16-bit gray without alpha: PIL clamps I;16 to 255
  bool cmyk = false;           ///< 4 channels are Adobe-inverted CMYK (JPEG)
  alpha_mode alpha = alpha_mode::drop;
};

/// Writes one row of `layout` as `layout.width` RGB pixels. Plain arithmetic
/// with no allocation, so it may run between a decoder's setjmp and longjmp.
void convert_row(const row_layout& layout, const std::uint8_t* in, std::uint8_t* out) noexcept;

/// PIL's `alpha_composite` of one channel `value` with `alpha` over opaque
/// white (its fixed-point formula, exact for every input).
[[nodiscard]] std::uint8_t over_white(std::uint8_t value, std::uint8_t alpha) noexcept;

}  // namespace mstar::models::vision::internal
