#pragma once

#include <cstdint>

#include "core/result.hpp"
#include "models/vision/image.hpp"

namespace mstar::models::vision {

/// The size the Qwen2-VL image processor resizes a `height` x `width` image
/// to, as transformers 5.24's `smart_resize`: both sides multiples of
/// `factor` (patch_size * merge_size), the area within [min_pixels,
/// max_pixels], the aspect ratio kept as closely as possible. Python's
/// rounding is reproduced: `round` ties to even (80 / 32 = 2.5 gives 2), and
/// the scale is the float64 square root of the area ratio.
///
/// Errors (invalid_argument): a side or argument that is not positive, or
/// beyond the range where float64 arithmetic stays exact (sides above 2^31,
/// an area above 2^53, factor above 2^16, pixel bounds above 2^40); and, with the reference's
/// message, an aspect ratio above 200 ("absolute aspect ratio must be smaller
/// than 200, got 250.0"). Tiny images are scaled up to min_pixels, as the
/// reference does; there is no lower bound on the sides.
[[nodiscard]] result<image_size> smart_resize(std::int64_t height, std::int64_t width,
                                              std::int64_t factor, std::int64_t min_pixels,
                                              std::int64_t max_pixels);

}  // namespace mstar::models::vision
