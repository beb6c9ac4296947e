#pragma once

// An image as a model's vision tower takes it: the image processor's patches
// and their grid (models/vision/ makes them from PNG or JPEG bytes).

#include <cstdint>
#include <vector>

namespace mstar::models {

/// One image of a request, in prompt order.
struct image_input {
  /// [t * h * w, patch_dim] float32: the processor's `pixel_values` rows.
  std::vector<float> pixel_values;
  std::int64_t t = 1;  ///< temporal patches
  std::int64_t h = 0;  ///< patch rows
  std::int64_t w = 0;  ///< patch columns
};

}  // namespace mstar::models
