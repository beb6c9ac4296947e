#pragma once

// Qwen3.5's vision tower on a CUDA device: the walk of the CPU tower
// (models/qwen3_5_vision.cpp), every step a kernels/cuda launcher on the
// tower's own stream: the patch embedding GEMM, the resampled position table
// (kernels::weighted_gather_add), per block LayerNorm, the fused qkv GEMM,
// the 2D rope, segment attention (one segment per frame), the output
// projection, LayerNorm, the MLP (gelu_pytorch_tanh), then the merger.
// Weights in device memory as bfloat16 (GEMMs with f32 accumulation, the
// GEMM inputs rounded to bf16) or float32 (the CPU's numbers, for parity);
// activations, norms, rope and attention are float32 either way. The grids'
// addressing (positions, position-table taps, segments) is computed on the
// host by the code the CPU tower runs (models/internal/vision_layout.hpp).
//
// `encode` takes and gives what the CPU tower's does (host patches, host
// rows), so the text model keeps one seam for both: it copies the rows over
// the image placeholders' embeddings when a step feeds them.
//
// Built in every configuration: without CUDA, `make` says so.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "models/qwen3_5_vision.hpp"

namespace mstar::models {

/// The vision tower on one device: its stream, cuBLAS handle, weights and
/// work buffers. Not thread-safe: one caller at a time.
class qwen3_5_vision_cuda {
 public:
  /// Copies `tower`'s weights to `device` (an index) in `dtype` (bfloat16 or
  /// float32); unsupported when this build has no CUDA or the machine no
  /// such device.
  [[nodiscard]] static result<std::unique_ptr<qwen3_5_vision_cuda>> make(
      int device, mstar::dtype dtype, const qwen3_5_vision& tower);
  ~qwen3_5_vision_cuda();
  qwen3_5_vision_cuda(const qwen3_5_vision_cuda&) = delete;
  qwen3_5_vision_cuda& operator=(const qwen3_5_vision_cuda&) = delete;

  /// Its configuration (the CPU tower's).
  [[nodiscard]] const qwen3_5_vision_config& config() const noexcept;
  /// The weights' dtype.
  [[nodiscard]] mstar::dtype dtype() const noexcept { return dtype_; }

  /// As qwen3_5_vision::encode: `pixel_values` [sum t*h*w, patch_dim] host
  /// floats, `grids` each image's grid; `out` becomes [merged tokens,
  /// out_hidden_size] host floats, image after image. Returns once `out` is
  /// filled (the tower's stream is synchronised). Bad grids or pixel counts
  /// are the CPU tower's errors; a device failure is an error naming the
  /// step; `out` is left empty on any error.
  [[nodiscard]] result<void> encode(std::span<const float> pixel_values,
                                    std::span<const vision_grid> grids, std::vector<float>& out);

  struct impl;

 private:
  qwen3_5_vision_cuda(std::unique_ptr<impl> p, mstar::dtype dtype);
  std::unique_ptr<impl> impl_;
  mstar::dtype dtype_;
};

}  // namespace mstar::models
