#pragma once

// The CUDA vision tower's private state: device weights, work buffers, the
// host layout and the launches of one encode. Only
// models/cuda/qwen3_5_vision_cuda*.cpp include this, in CUDA builds.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/launch.hpp"
#include "models/cuda/qwen3_5_vision_cuda.hpp"

namespace mstar::models {
namespace qwen_vision_cuda {
namespace kc = kernels::cuda;

// A GEMM's weight [rows, cols] in the tower's dtype, and its f32 bias.
struct vision_linear {
  kc::device_buffer w, b;
  std::int64_t rows = 0, cols = 0;
};

// A LayerNorm's f32 weight and bias.
struct vision_norm {
  kc::device_buffer w, b;
};

struct vision_block_weights {
  vision_norm norm1, norm2;
  vision_linear qkv, proj, fc1, fc2;
};

}  // namespace qwen_vision_cuda

struct qwen3_5_vision_cuda::impl {
  using vision_linear = qwen_vision_cuda::vision_linear;
  using vision_norm = qwen_vision_cuda::vision_norm;
  using vision_block_weights = qwen_vision_cuda::vision_block_weights;

  int device = 0;
  std::string name;
  mstar::dtype dtype = mstar::dtype::float32;
  qwen3_5_vision_config config;
  kernels::cuda::stream stream;
  kernels::cuda::blas_handle blas;
  vision_linear patch;
  kernels::cuda::device_buffer pos_embed, inv_freq;  // f32 [positions, hidden], [head_dim / 4]
  std::vector<vision_block_weights> blocks;
  vision_norm merger_norm;
  vision_linear merger_fc1, merger_fc2;
  // Work buffers, grown per encode (the stream is idle between encodes).
  kernels::cuda::device_buffer pixels, x, y, qkv, attn, inter, out, xb;  // f32; xb bf16 GEMM inputs
  kernels::cuda::device_buffer positions, tap_index, tap_weight, cu;     // the layout, uploaded
  vision_patch_layout layout;                                            // host

  [[nodiscard]] result<void> check(cudaError_t err, std::string_view what) const {
    if (err == cudaSuccess)
      return {};
    return kernels::cuda::cuda_error(err, what).with_context(name);
  }
  [[nodiscard]] result<kernels::cuda::device_buffer> floats(const std::vector<float>& w) const;
  [[nodiscard]] result<vision_linear> linear_weights(const std::vector<float>& w,
                                                     const std::vector<float>& b, std::int64_t rows,
                                                     std::int64_t cols) const;
  [[nodiscard]] result<vision_norm> norm_weights(const std::vector<float>& w,
                                                 const std::vector<float>& b) const;
  [[nodiscard]] result<void> upload(const qwen3_5_vision_weights& w);
  [[nodiscard]] result<void> reserve(std::int64_t patches, std::size_t frames);
  template <class T>
  [[nodiscard]] result<void> put(kernels::cuda::device_buffer& dst, const std::vector<T>& src,
                                 std::string_view what);

  [[nodiscard]] result<void> linear(const float* in, std::int64_t t, const vision_linear& l,
                                    float* out_rows);
  [[nodiscard]] result<void> norm(const float* in, std::int64_t t, const vision_norm& n,
                                  float* out_rows);
  [[nodiscard]] result<void> embed(std::span<const float> pixel_values, std::int64_t patches);
  [[nodiscard]] result<void> block(const vision_block_weights& b, std::int64_t patches);
  [[nodiscard]] result<void> merge(std::int64_t patches);
};

}  // namespace mstar::models
