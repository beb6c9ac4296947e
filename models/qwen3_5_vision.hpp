#pragma once

// Qwen3.5's vision tower on the CPU in float32: transformers 5.24's
// Qwen3_5VisionModel, from an image processor's patches to the merged
// embeddings that take the place of the image placeholder tokens in the text
// model. Per patch: a linear patch embedding (the Conv3d whose stride equals
// its kernel), plus the learned position table resampled bilinearly to the
// image's grid; then `depth` pre-norm blocks (LayerNorm, attention with a
// fused qkv and 2D rotary over (row, column), each image frame attending only
// to itself; LayerNorm, MLP); then the merger: LayerNorm per patch, each
// window of spatial_merge_size^2 patches concatenated, fc1, exact GELU, fc2.
// There are no deepstack outputs in Qwen3.5.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "models/safetensors.hpp"

namespace mstar::models {

/// One image's (or video's) patch grid, as an image processor reports it in
/// `image_grid_thw`: `t` frames (each temporal_patch_size input frames deep)
/// of `h` rows by `w` columns of patches; h and w are multiples of
/// spatial_merge_size.
struct vision_grid {
  std::int64_t t = 1;  ///< frames
  std::int64_t h = 0;  ///< patch rows
  std::int64_t w = 0;  ///< patch columns
};

/// The `vision_config` object of a Qwen3.5 `config.json` (transformers'
/// Qwen3_5VisionConfig); absent fields take transformers' defaults.
struct qwen3_5_vision_config {
  std::int64_t depth = 27;                       ///< blocks
  std::int64_t hidden_size = 1152;               ///< width of the blocks
  std::string hidden_act = "gelu_pytorch_tanh";  ///< the blocks' MLP activation
  std::int64_t intermediate_size = 4304;         ///< the blocks' MLP width
  std::int64_t num_heads = 16;                   ///< attention heads
  std::int64_t in_channels = 3;                  ///< colour channels
  std::int64_t patch_size = 16;                  ///< patch side, in pixels
  std::int64_t spatial_merge_size = 2;           ///< side of a merged window, in patches
  std::int64_t temporal_patch_size = 2;          ///< input frames per patch
  std::int64_t out_hidden_size = 3584;           ///< width of the merged embeddings
  std::int64_t num_position_embeddings = 2304;   ///< rows of the learned position table
  double rope_theta = 10000.0;                   ///< `rope_parameters.rope_theta`

  /// The `vision_config` of a whole config.json text, checked: sizes
  /// positive, hidden_size a multiple of num_heads with head_dim a multiple
  /// of 4, hidden_act `gelu_pytorch_tanh` or `gelu`, no deepstack layers.
  /// Errors name the field ("config.json: field 'vision_config.num_heads': ...").
  [[nodiscard]] static result<qwen3_5_vision_config> parse(std::string_view json_text,
                                                           std::string_view label = "config.json");

  /// parse() of `path`: a model folder (its config.json) or the file itself.
  [[nodiscard]] static result<qwen3_5_vision_config> load(const std::filesystem::path& path);

  /// Channels per attention head.
  [[nodiscard]] std::int64_t head_dim() const noexcept { return hidden_size / num_heads; }
  /// Values in one patch: in_channels * temporal_patch_size * patch_size^2.
  [[nodiscard]] std::int64_t patch_dim() const noexcept {
    return in_channels * temporal_patch_size * patch_size * patch_size;
  }
  /// Patches merged into one output token: spatial_merge_size^2.
  [[nodiscard]] std::int64_t merge_unit() const noexcept {
    return spatial_merge_size * spatial_merge_size;
  }
  /// Width of the merger's input: hidden_size * merge_unit().
  [[nodiscard]] std::int64_t merged_hidden() const noexcept { return hidden_size * merge_unit(); }
  /// Side of the square position grid: floor(sqrt(num_position_embeddings)).
  [[nodiscard]] std::int64_t grid_side() const noexcept;
};

/// Per-patch addressing of one encode, derived from the grids alone (what
/// the CPU and CUDA towers both read); patches in the processor's order (per
/// image and frame, merge window by merge window).
struct vision_patch_layout {
  std::vector<std::int32_t> positions;   ///< [patches, 2] (row, column) in the frame
  std::vector<std::int32_t> tap_index;   ///< [patches, 4] rows of the position table
  std::vector<float> tap_weight;         ///< [patches, 4] their bilinear weights
  std::vector<std::int32_t> cu_seqlens;  ///< [frames + 1] 0, then each frame's end
  std::int64_t longest = 0;              ///< patches in the largest frame
};

/// One block's weights, float32, linear layers in nn.Linear's [out, in] layout.
struct qwen3_5_vision_block {
  std::vector<float> norm1_w, norm1_b;  ///< [hidden] each
  std::vector<float> qkv_w, qkv_b;      ///< [3 * hidden, hidden], [3 * hidden]: q, k, v rows
  std::vector<float> proj_w, proj_b;    ///< [hidden, hidden], [hidden]
  std::vector<float> norm2_w, norm2_b;  ///< [hidden] each
  std::vector<float> fc1_w, fc1_b;      ///< [intermediate, hidden], [intermediate]
  std::vector<float> fc2_w, fc2_b;      ///< [hidden, intermediate], [hidden]
};

/// The vision tower's weights, float32 (bf16 / f16 checkpoints are widened).
struct qwen3_5_vision_weights {
  std::vector<float> patch_w;                ///< [hidden, patch_dim]: the Conv3d kernel, flattened
  std::vector<float> patch_b;                ///< [hidden]
  std::vector<float> pos_embed;              ///< [num_position_embeddings, hidden]
  std::vector<qwen3_5_vision_block> blocks;  ///< depth of them
  std::vector<float> merger_norm_w, merger_norm_b;  ///< [hidden] each
  std::vector<float> merger_fc1_w, merger_fc1_b;    ///< [merged_hidden, merged_hidden], [..]
  std::vector<float> merger_fc2_w, merger_fc2_b;    ///< [out_hidden, merged_hidden], [out_hidden]

  /// Reads every tensor under `prefix` (a Qwen3.5 checkpoint's
  /// `model.visual.`), checking each shape against `config`; an absent
  /// tensor or a wrong shape is an error naming the tensor.
  [[nodiscard]] static result<qwen3_5_vision_weights> load(
      const qwen3_5_vision_config& config, const safetensors_checkpoint& checkpoint,
      std::string_view prefix = "model.visual.");
};

/// The vision tower, ready to encode. Not thread-safe: `encode` reuses
/// scratch buffers, so one caller at a time.
class qwen3_5_vision {
 public:
  /// Loads the config.json and the `model.visual.*` weights of a model folder.
  [[nodiscard]] static result<qwen3_5_vision> load(const std::filesystem::path& folder);

  /// The tower of `config` over the `model.visual.*` weights of `checkpoint`.
  [[nodiscard]] static result<qwen3_5_vision> load(qwen3_5_vision_config config,
                                                   const safetensors_checkpoint& checkpoint);

  /// Its configuration.
  [[nodiscard]] const qwen3_5_vision_config& config() const noexcept { return config_; }
  /// Its weights (float32), e.g. for a device copy (models/cuda/qwen3_5_vision_cuda.hpp).
  [[nodiscard]] const qwen3_5_vision_weights& weights() const noexcept { return weights_; }

  /// Output tokens of `grids`: the sum of t * h * w / spatial_merge_size^2.
  [[nodiscard]] std::int64_t merged_tokens(std::span<const vision_grid> grids) const noexcept;

  /// Encodes images packed one after another: `pixel_values` holds
  /// [sum t*h*w, patch_dim] float32 rows in the image processor's order
  /// (per image, merge window by merge window), `grids` each image's grid.
  /// `out` becomes [merged_tokens(grids), out_hidden_size] float32, image
  /// after image; packing never mixes images, so each image's rows equal
  /// those of encoding it alone. Bad grids or a pixel count that does not
  /// match them are errors naming the image; then `out` is left empty.
  [[nodiscard]] result<void> encode(std::span<const float> pixel_values,
                                    std::span<const vision_grid> grids, std::vector<float>& out);

 private:
  struct scratch {
    std::vector<float> x, y, qkv, attn, inter, scores;  // activations, reused across calls
    vision_patch_layout layout;                         // positions, taps, segments
  };

  qwen3_5_vision(qwen3_5_vision_config config, qwen3_5_vision_weights weights);

  [[nodiscard]] result<std::int64_t> check_inputs(std::span<const float> pixel_values,
                                                  std::span<const vision_grid> grids) const;
  void embed(std::span<const float> pixel_values, std::span<const vision_grid> grids,
             std::int64_t patches);
  void block(const qwen3_5_vision_block& b, std::int64_t patches);
  void merge(std::int64_t patches, std::vector<float>& out);

  qwen3_5_vision_config config_;
  qwen3_5_vision_weights weights_;
  std::vector<float> inv_freq_;  // [head_dim / 4] the 2D rope's frequencies
  scratch scratch_;
};

}  // namespace mstar::models
