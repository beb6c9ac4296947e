#include "models/vision/bicubic_resize.hpp"

#include <algorithm>
#include <cmath>

namespace mstar::models::vision {
namespace {

// Keys' cubic convolution kernel with a = -0.5, written as torch writes it
// (the same polynomial as PIL's, but the order of operations fixes the last
// bits of each weight).
double cubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0)
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// One output row (or column) of a pass: the taps of `w` applied to `count`
// input pixels `step` bytes apart, each of the 3 channels.
void apply_taps(const std::uint8_t* in, std::int64_t step, const std::int16_t* w,
                std::int64_t count, unsigned precision, std::uint8_t* out) {
  for (int c = 0; c < 3; ++c) {
    std::int64_t acc = std::int64_t{1} << (precision - 1);
    for (std::int64_t j = 0; j < count; ++j)
      acc += static_cast<std::int64_t>(in[j * step + c]) * w[j];
    out[c] = static_cast<std::uint8_t>(std::clamp<std::int64_t>(acc >> precision, 0, 255));
  }
}

rgb_image horizontal_pass(const rgb_image& in, std::int64_t out_width) {
  const resize_weights rw = bicubic_resize_weights(in.width, out_width);
  rgb_image out;
  out.width = out_width;
  out.height = in.height;
  out.pixels.resize(static_cast<std::size_t>(out.width * out.height * 3));
  for (std::int64_t y = 0; y < in.height; ++y) {
    const std::uint8_t* row = in.pixels.data() + y * in.width * 3;
    std::uint8_t* dst = out.pixels.data() + y * out_width * 3;
    for (std::int64_t x = 0; x < out_width; ++x) {
      apply_taps(row + rw.first[x] * 3, 3, rw.weights.data() + x * rw.stride, rw.count[x],
                 rw.precision, dst + x * 3);
    }
  }
  return out;
}

rgb_image vertical_pass(const rgb_image& in, std::int64_t out_height) {
  const resize_weights rw = bicubic_resize_weights(in.height, out_height);
  rgb_image out;
  out.width = in.width;
  out.height = out_height;
  out.pixels.resize(static_cast<std::size_t>(out.width * out.height * 3));
  const std::int64_t row_bytes = in.width * 3;
  for (std::int64_t y = 0; y < out_height; ++y) {
    const std::uint8_t* src = in.pixels.data() + rw.first[y] * row_bytes;
    std::uint8_t* dst = out.pixels.data() + y * row_bytes;
    for (std::int64_t x = 0; x < in.width; ++x) {
      apply_taps(src + x * 3, row_bytes, rw.weights.data() + y * rw.stride, rw.count[y],
                 rw.precision, dst + x * 3);
    }
  }
  return out;
}

}  // namespace

resize_weights bicubic_resize_weights(std::int64_t in_size, std::int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  // The kernel spans 2 input pixels each side, stretched by the scale when
  // shrinking (the antialias part).
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double inv_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  resize_weights rw;
  rw.stride = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
  rw.first.resize(static_cast<std::size_t>(out_size));
  rw.count.resize(static_cast<std::size_t>(out_size));
  std::vector<double> weights(static_cast<std::size_t>(out_size * rw.stride), 0.0);
  double max_weight = 0.0;
  for (std::int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const std::int64_t first =
        std::max(static_cast<std::int64_t>(center - support + 0.5), std::int64_t{0});
    const std::int64_t count =
        std::clamp(std::min(static_cast<std::int64_t>(center + support + 0.5), in_size) - first,
                   std::int64_t{0}, rw.stride);
    double* w = weights.data() + i * rw.stride;
    double total = 0.0;
    for (std::int64_t j = 0; j < count; ++j) {
      w[j] = cubic_filter((static_cast<double>(j + first) - center + 0.5) * inv_scale);
      total += w[j];
    }
    if (total != 0.0) {
      for (std::int64_t j = 0; j < count; ++j) {
        w[j] /= total;
        max_weight = std::max(max_weight, w[j]);
      }
    }
    rw.first[i] = first;
    rw.count[i] = count;
  }
  // As many fractional bits as keep twice the largest weight below 2^15.
  unsigned precision = 0;
  for (; precision < 22; ++precision) {
    const auto next = static_cast<int>(0.5 + max_weight * (1 << (precision + 1)));
    if (next >= (1 << 15))
      break;
  }
  rw.precision = precision;
  rw.weights.resize(weights.size());
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const double v = weights[k] * (1 << precision);
    rw.weights[k] =
        static_cast<std::int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return rw;
}

rgb_image resize_bicubic_antialias(const rgb_image& image, image_size size) {
  if (size.width == image.width && size.height == image.height)
    return image;
  rgb_image out = size.width != image.width ? horizontal_pass(image, size.width) : image;
  if (size.height != out.height)
    out = vertical_pass(out, size.height);
  return out;
}

}  // namespace mstar::models::vision
