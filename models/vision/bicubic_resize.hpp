#pragma once

#include <cstdint>
#include <vector>

#include "models/vision/image.hpp"

namespace mstar::models::vision {

/// One axis of an antialiased bicubic resize: for each output index, the
/// first input index, the number of taps and their fixed-point weights.
struct resize_weights {
  std::vector<std::int64_t> first;    ///< [out] first input index read
  std::vector<std::int64_t> count;    ///< [out] taps used (<= stride)
  std::vector<std::int16_t> weights;  ///< [out, stride] weights scaled by 2^precision
  std::int64_t stride = 0;            ///< taps reserved per output index
  unsigned precision = 0;             ///< fractional bits of the weights
};

/// The weights torch 2.15 computes for a uint8 antialiased bicubic resize of
/// one axis from `in_size` to `out_size` (both positive): Keys' cubic with
/// a = -0.5 stretched by the scale when shrinking, each output's weights
/// normalised to sum to one in float64, then rounded to int16 with as many
/// fractional bits as the largest weight allows (at most 22).
[[nodiscard]] resize_weights bicubic_resize_weights(std::int64_t in_size, std::int64_t out_size);

/// Resizes `image` to `size` (both sides positive) as torchvision 0.29's
/// `resize(uint8 tensor, size, interpolation=BICUBIC, antialias=True)` does
/// on a CPU, bit for bit: the uint8 path of torch's `_upsample_bicubic2d_aa`,
/// a horizontal pass then a vertical one (each skipped when that side keeps
/// its length), integer accumulation with rounding, each pass clamped to
/// 0..255. PIL's BICUBIC resize uses the same filter with 22-bit weights and
/// differs from this by a unit here and there. The same size returns a copy.
[[nodiscard]] rgb_image resize_bicubic_antialias(const rgb_image& image, image_size size);

}  // namespace mstar::models::vision
