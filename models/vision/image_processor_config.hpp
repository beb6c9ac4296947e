#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "core/result.hpp"

namespace mstar::models::vision {

/// The `preprocessor_config.json` of a Qwen2-VL-family image processor
/// (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5), as transformers 5.24 reads it.
///
/// Absent fields take the processor class's defaults. The pixel bounds are
/// read from `size` {"shortest_edge", "longest_edge"} (Qwen3-VL and Qwen3.5
/// write these) and overridden by top-level `min_pixels` / `max_pixels`
/// (Qwen2-VL's spelling), as the processor's constructor does. Qwen3.5 ships
/// patch_size 16, temporal_patch_size 2, merge_size 2, mean and std 0.5 and
/// size {65536, 16777216}. Unknown fields are ignored; fields this runtime
/// would compute differently (another `resample`, `do_convert_rgb` false,
/// another processor type) are refused. Every error names the field.
struct image_processor_config {
  std::int64_t patch_size = 14;              ///< spatial patch side, pixels
  std::int64_t temporal_patch_size = 2;      ///< frames per patch; an image is repeated
  std::int64_t merge_size = 2;               ///< patches merged per side into one token
  std::int64_t min_pixels = 56 * 56;         ///< size.shortest_edge: the least resized area
  std::int64_t max_pixels = 28 * 28 * 1280;  ///< size.longest_edge: the largest resized area
  std::array<double, 3> image_mean{0.48145466, 0.4578275, 0.40821073};  ///< OpenAI CLIP's
  std::array<double, 3> image_std{0.26862954, 0.26130258, 0.27577711};  ///< OpenAI CLIP's
  double rescale_factor = 1.0 / 255.0;
  bool do_resize = true;
  bool do_rescale = true;
  bool do_normalize = true;

  /// Parses the JSON text of a config; `label` names it in messages. Runs validate().
  [[nodiscard]] static result<image_processor_config> parse(
      std::string_view json_text, std::string_view label = "preprocessor_config.json");

  /// Reads `path`: a preprocessor_config.json file, or a folder holding one.
  [[nodiscard]] static result<image_processor_config> load(const std::filesystem::path& path);

  /// Checks sizes (positive; patch_size and merge_size at most 1024,
  /// temporal_patch_size at most 64, pixel bounds at most 2^28, 16 times
  /// Qwen3.5's, which keeps pixel_values below 7 GB), a non-zero std and a
  /// positive finite rescale_factor. Errors name the field.
  [[nodiscard]] result<void> validate() const;

  /// Sides of a resized image are multiples of this: patch_size * merge_size.
  [[nodiscard]] std::int64_t factor() const noexcept { return patch_size * merge_size; }

  /// Values per patch: 3 channels * temporal_patch_size * patch_size^2.
  [[nodiscard]] std::int64_t patch_dim() const noexcept {
    return 3 * temporal_patch_size * patch_size * patch_size;
  }
};

}  // namespace mstar::models::vision
