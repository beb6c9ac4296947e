#include <algorithm>
#include <fmt/format.h>

#include "models/vision/internal/decoders.hpp"

namespace mstar::models::vision::internal {
namespace {

// One sample of a row: 8-bit, or the high byte of a big-endian 16-bit one
// (PIL reads 16-bit RGB, RGBA and gray + alpha PNGs through "RGB;16B"-style
// raw modes, which keep the most significant byte).
std::uint8_t sample(const std::uint8_t* in, std::int64_t index, int bit_depth) noexcept {
  return bit_depth == 16 ? in[2 * index] : in[index];
}

// PIL's MULDIV255: a * b / 255 rounded, in integers.
int muldiv255(int a, int b) noexcept {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

void convert_gray(const row_layout& layout, const std::uint8_t* in, std::uint8_t* out) noexcept {
  for (std::int64_t x = 0; x < layout.width; ++x) {
    std::uint8_t v = 0;
    if (layout.gray16_clamps) {
      // I;16 -> RGB in PIL clamps the 16-bit value instead of scaling it.
      const int wide = (in[2 * x] << 8) | in[2 * x + 1];
      v = static_cast<std::uint8_t>(std::min(wide, 255));
    } else {
      v = sample(in, x, layout.bit_depth);
    }
    out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = v;
  }
}

void convert_gray_alpha(const row_layout& layout, const std::uint8_t* in,
                        std::uint8_t* out) noexcept {
  const bool composite = layout.alpha == alpha_mode::composite_on_white;
  for (std::int64_t x = 0; x < layout.width; ++x) {
    std::uint8_t v = 0;
    if (layout.gray16_clamps) {
      const int wide = (in[4 * x] << 8) | in[4 * x + 1];
      v = static_cast<std::uint8_t>(std::min(wide, 255));
    } else {
      v = sample(in, 2 * x, layout.bit_depth);
    }
    if (composite)
      v = over_white(v, sample(in, 2 * x + 1, layout.bit_depth));
    out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = v;
  }
}

void convert_color(const row_layout& layout, const std::uint8_t* in, std::uint8_t* out) noexcept {
  const int channels = layout.channels;
  const bool composite = channels == 4 && layout.alpha == alpha_mode::composite_on_white;
  for (std::int64_t x = 0; x < layout.width; ++x) {
    const std::int64_t base = x * channels;
    for (int c = 0; c < 3; ++c) {
      std::uint8_t v = sample(in, base + c, layout.bit_depth);
      if (composite)
        v = over_white(v, sample(in, base + 3, layout.bit_depth));
      out[3 * x + c] = v;
    }
  }
}

// PIL reads four-component JPEGs as "CMYK;I" (Adobe's inverted convention)
// and converts CMYK to RGB as nk - nk * C / 255 with nk = 255 - K.
void convert_cmyk(const row_layout& layout, const std::uint8_t* in, std::uint8_t* out) noexcept {
  for (std::int64_t x = 0; x < layout.width; ++x) {
    const std::uint8_t* p = in + 4 * x;
    const int nk = p[3];  // 255 - (255 - k)
    for (int c = 0; c < 3; ++c) {
      const int v = nk - muldiv255(255 - p[c], nk);
      out[3 * x + c] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
    }
  }
}

}  // namespace

std::uint8_t over_white(std::uint8_t value, std::uint8_t alpha) noexcept {
  if (alpha == 0)
    return 255;
  // Pillow's AlphaComposite.c with an opaque white destination: 7 fractional
  // bits, the division by 255 done with its shift trick.
  constexpr std::uint32_t precision_bits = 7;
  constexpr std::uint32_t white = 255;
  const std::uint32_t a = alpha;
  const std::uint32_t blend = white * (255 - a);
  const std::uint32_t out_alpha_255 = a * 255 + blend;
  const std::uint32_t coef1 = a * 255 * 255 * (1U << precision_bits) / out_alpha_255;
  const std::uint32_t coef2 = 255 * (1U << precision_bits) - coef1;
  const std::uint32_t t = value * coef1 + white * coef2 + (0x80U << precision_bits);
  return static_cast<std::uint8_t>(((((t >> 8) + t) >> 8) >> precision_bits));
}

void convert_row(const row_layout& layout, const std::uint8_t* in, std::uint8_t* out) noexcept {
  if (layout.cmyk) {
    convert_cmyk(layout, in, out);
  } else if (layout.channels == 1) {
    convert_gray(layout, in, out);
  } else if (layout.channels == 2) {
    convert_gray_alpha(layout, in, out);
  } else {
    convert_color(layout, in, out);
  }
}

result<void> check_pixel_limit(std::string_view format, std::int64_t width, std::int64_t height,
                               std::int64_t limit) {
  if (width <= 0 || height <= 0) {
    return make_error(errc::parse_error, fmt::format("{}: the header declares a {} x {} image",
                                                     format, width, height));
  }
  if (width > limit / height) {
    return make_error(errc::out_of_range,
                      fmt::format("{}: a {} x {} image ({} pixels) is above the limit of {} pixels "
                                  "(refused before decoding)",
                                  format, width, height, width * height, limit));
  }
  return {};
}

}  // namespace mstar::models::vision::internal
