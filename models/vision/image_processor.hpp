#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/result.hpp"
#include "models/vision/image.hpp"
#include "models/vision/image_decode.hpp"
#include "models/vision/image_processor_config.hpp"

namespace mstar::models::vision {

/// What the vision tower takes for one image: transformers' `pixel_values`
/// and `image_grid_thw`.
struct image_patches {
  /// [num_patches, patch_dim] row-major float32. Rows run over merge groups
  /// (grid_h / merge, grid_w / merge, in raster order), then the merge_size^2
  /// patches of a group in raster order; a row is [channel, frame, y, x] with
  /// the image repeated over the temporal_patch_size frames.
  std::vector<float> pixel_values;
  std::int64_t num_patches = 0;                   ///< grid_t * grid_h * grid_w
  std::int64_t patch_dim = 0;                     ///< 3 * temporal_patch_size * patch_size^2
  std::array<std::int64_t, 3> grid_thw{0, 0, 0};  ///< {1, height / patch, width / patch}
  image_size resized;                             ///< the size the image was resized to
};

/// Runs transformers 5.24's `Qwen2VLImageProcessor` (the torchvision backend
/// that AutoImageProcessor picks for Qwen3.5 when torchvision is installed)
/// on a decoded image: smart_resize, the antialiased bicubic resize of a uint8
/// image (skipped when the size is kept), rescale and normalize fused as
/// (x - mean / rescale) / (std / rescale) in float32, then patchify.
///
/// Errors: smart_resize's (aspect ratio above 200), and with do_resize false
/// an image whose sides are not multiples of patch_size * merge_size.
[[nodiscard]] result<image_patches> preprocess_image(const rgb_image& image,
                                                     const image_processor_config& config);

/// decode_image, then preprocess_image; errors are those of either step.
[[nodiscard]] result<image_patches> preprocess_image(std::span<const std::byte> encoded,
                                                     const image_processor_config& config,
                                                     const decode_options& options = {});

/// The placeholder tokens an image of `grid_thw` becomes in the prompt:
/// grid_t * grid_h * grid_w / merge_size^2.
[[nodiscard]] std::int64_t image_token_count(const std::array<std::int64_t, 3>& grid_thw,
                                             std::int64_t merge_size) noexcept;

/// The same count for an image of `size` before resizing, without touching
/// pixels (what a scheduler needs to budget a request); smart_resize's errors.
[[nodiscard]] result<std::int64_t> image_token_count(image_size size,
                                                     const image_processor_config& config);

}  // namespace mstar::models::vision
