#pragma once

// What the Qwen3.5 vision tower computes from the grids alone, shared by the
// CPU tower (models/qwen3_5_vision.cpp) and the CUDA one
// (models/cuda/qwen3_5_vision_cuda.cpp): the input checks, each patch's
// (row, column), its four taps into the learned position table, and the
// attention segments (one per frame).

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.hpp"
#include "models/qwen3_5_vision.hpp"

namespace mstar::models::internal {

/// The patch count of `grids`, or an error naming the bad grid or the pixel
/// count (`pixel_values` floats) that does not match them.
[[nodiscard]] result<std::int64_t> check_vision_inputs(const qwen3_5_vision_config& config,
                                                       std::size_t pixel_values,
                                                       std::span<const vision_grid> grids);

/// The layout of `patches` patches over `grids` (checked by
/// check_vision_inputs). Taps are in the order (row tap a, column tap b) ->
/// 2a + b, each weight the product of the two axes' float32 weights, as
/// transformers resamples the table (corners aligned).
void layout_patches(const qwen3_5_vision_config& config, std::span<const vision_grid> grids,
                    std::int64_t patches, vision_patch_layout& out);

/// The 2D rope's frequencies, theta^(-2i / (head_dim / 2)) for i < head_dim / 4,
/// in float32 as transformers computes them.
[[nodiscard]] std::vector<float> vision_rope_frequencies(const qwen3_5_vision_config& config);

}  // namespace mstar::models::internal
