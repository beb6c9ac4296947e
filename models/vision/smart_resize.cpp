#include "models/vision/smart_resize.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace mstar::models::vision {
namespace {

constexpr std::int64_t max_side = std::int64_t{1} << 31;
constexpr std::int64_t max_factor = std::int64_t{1} << 16;
constexpr std::int64_t max_pixel_bound = std::int64_t{1} << 40;
// Areas up to 2^53 are exact in a double, so the divisions below round as
// Python's int / int does.
constexpr std::int64_t max_area = std::int64_t{1} << 53;

// Python's round() of a float: to the nearest integer, ties to even.
std::int64_t round_half_even(double x) {
  const double lower = std::floor(x);
  const double diff = x - lower;
  auto n = static_cast<std::int64_t>(lower);
  if (diff > 0.5 || (diff == 0.5 && n % 2 != 0))
    ++n;
  return n;
}

// Python's repr of a float for the aspect-ratio message ("250.0", "200.5").
std::string python_float(double x) {
  std::string text = fmt::format("{}", x);
  if (text.find_first_of(".en") == std::string::npos)
    text += ".0";
  return text;
}

result<void> check_range(std::string_view name, std::int64_t value, std::int64_t limit) {
  if (value <= 0 || value > limit) {
    return make_error(
        errc::invalid_argument,
        fmt::format("smart_resize: {} must be in [1, {}], got {}", name, limit, value));
  }
  return {};
}

}  // namespace

result<image_size> smart_resize(std::int64_t height, std::int64_t width, std::int64_t factor,
                                std::int64_t min_pixels, std::int64_t max_pixels) {
  for (auto ok : {check_range("height", height, max_side), check_range("width", width, max_side),
                  check_range("factor", factor, max_factor),
                  check_range("min_pixels", min_pixels, max_pixel_bound),
                  check_range("max_pixels", max_pixels, max_pixel_bound)}) {
    if (!ok)
      return ok.error();
  }
  const double ratio =
      static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  if (ratio > 200) {
    return make_error(
        errc::invalid_argument,
        fmt::format("absolute aspect ratio must be smaller than 200, got {}", python_float(ratio)));
  }
  if (height > max_area / width) {
    return make_error(
        errc::invalid_argument,
        fmt::format("smart_resize: a {} x {} image is above 2^53 pixels", height, width));
  }
  const auto h = static_cast<double>(height);
  const auto w = static_cast<double>(width);
  const auto f = static_cast<double>(factor);
  std::int64_t h_bar = round_half_even(h / f) * factor;
  std::int64_t w_bar = round_half_even(w / f) * factor;
  const auto area = static_cast<double>(height * width);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<std::int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<std::int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h_bar = static_cast<std::int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<std::int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return image_size{h_bar, w_bar};
}

}  // namespace mstar::models::vision
