#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/result.hpp"
#include "models/vision/image.hpp"

namespace mstar::models::vision {

/// The container formats the decoder reads.
enum class image_format : std::uint8_t { png, jpeg };

/// "png" or "jpeg".
[[nodiscard]] std::string_view to_string(image_format format) noexcept;

/// The format `bytes` start with (PNG's 8-byte signature, JPEG's SOI marker
/// FF D8 FF), or nullopt for anything else.
[[nodiscard]] std::optional<image_format> detect_image_format(
    std::span<const std::byte> bytes) noexcept;

/// What becomes of transparency.
enum class alpha_mode : std::uint8_t {
  /// Dropped, as PIL's `convert("RGB")` does and as transformers 5.24's
  /// Qwen2-VL processor does with an image given as bytes (a URL, a path or
  /// base64: torchvision's `decode_image(mode=RGB)`).
  drop,
  /// Composited onto white, as the same processor does with a PIL image that
  /// has an alpha band or a `transparency` entry (its `convert_to_rgb`), with
  /// PIL's `alpha_composite` arithmetic.
  composite_on_white,
};

/// Limits and choices of one decode.
struct decode_options {
  /// Images with more pixels are refused from the header, before any pixel
  /// buffer is allocated: PIL's `MAX_IMAGE_PIXELS` (its decompression-bomb
  /// warning threshold; PIL refuses at twice this).
  std::int64_t max_pixels = 89'478'485;
  alpha_mode alpha = alpha_mode::drop;
  /// Turn the image upright by its EXIF Orientation tag (a JPEG's APP1, a
  /// PNG's eXIf), as transformers does with images it loads from bytes, paths
  /// or URLs (torchvision's `apply_exif_orientation`, PIL's `exif_transpose`;
  /// a PIL image handed to the processor is not turned).
  bool apply_exif_orientation = true;
};

/// Decodes a PNG or JPEG held in memory into 8-bit RGB as PIL's
/// `Image.open(...).convert("RGB")` does: grayscale is replicated, palettes are
/// expanded, 16-bit RGB and RGBA keep their high byte and 16-bit grayscale is
/// clamped to 255 (PIL's I;16 -> RGB conversion), CMYK JPEGs are read as
/// Adobe-inverted and converted with PIL's formula; alpha and EXIF
/// orientation follow `options`.
///
/// Errors: invalid_argument for empty input, unsupported for a format other
/// than PNG or JPEG (named when recognised), out_of_range for an image above
/// `options.max_pixels`, parse_error for truncated or corrupt data (with the
/// library's reason). Never throws; nothing leaks on any path.
[[nodiscard]] result<rgb_image> decode_image(std::span<const std::byte> bytes,
                                             const decode_options& options = {});

}  // namespace mstar::models::vision
