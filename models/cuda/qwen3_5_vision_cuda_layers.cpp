// qwen3_5_vision_cuda's launches: the GEMM (f32, or bf16 inputs and weights),
// LayerNorm, the patch and position embedding, one block, the merger.
// Mirrors models/qwen3_5_vision.cpp step for step.
#include "models/cuda/qwen3_5_vision_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include "models/cuda/internal/qwen3_5_vision_cuda_impl.hpp"

namespace mstar::models {
namespace kc = kernels::cuda;
using kernels::matrix;
using kernels::vector;

namespace {
constexpr float vision_layer_norm_eps = 1e-6F;  // every LayerNorm of the tower (as on the CPU)
}  // namespace

// out [t, rows] = in [t, cols] * w^T + b. With bf16 weights the input is
// first rounded into xb, which reserve() sizes for the widest GEMM input.
result<void> qwen3_5_vision_cuda::impl::linear(const float* in, std::int64_t t,
                                               const vision_linear& l, float* out_rows) {
  const cudaStream_t s = stream.get();
  const auto bias = vector(l.b.as<const float>(), l.rows);
  if (dtype == mstar::dtype::float32) {
    return check(kc::linear(blas,
                            {matrix(in, t, l.cols), matrix(l.w.as<const float>(), l.rows, l.cols),
                             bias, matrix(out_rows, t, l.rows)},
                            s),
                 "vision linear");
  }
  const auto n = static_cast<std::size_t>(t * l.cols);
  if (n * sizeof(std::uint16_t) > xb.size()) {
    return make_error(errc::internal, "vision tower: bf16 staging smaller than a GEMM input");
  }
  auto* x16 = xb.as<std::uint16_t>();
  if (auto ok = check(kc::to_bf16(in, x16, t * l.cols, s), "vision to_bf16"); !ok)
    return ok;
  kc::linear_bf16_params p;
  p.x = matrix<const std::uint16_t>(x16, t, l.cols);
  p.weight = matrix(l.w.as<const std::uint16_t>(), l.rows, l.cols);
  p.weight_static = true;  // model weights: uploaded at load
  p.bias = bias;
  p.out_f32 = matrix(out_rows, t, l.rows);
  return check(kc::linear_bf16(blas, p, s), "vision linear_bf16");
}

result<void> qwen3_5_vision_cuda::impl::norm(const float* in, std::int64_t t, const vision_norm& n,
                                             float* out_rows) {
  const std::int64_t hid = config.hidden_size;
  return check(kc::layer_norm({matrix(in, t, hid), vector(n.w.as<const float>(), hid),
                               vector(n.b.as<const float>(), hid), matrix(out_rows, t, hid),
                               vision_layer_norm_eps},
                              stream.get()),
               "vision layer_norm");
}

// x = patches * patch_w^T + patch_b + the resampled position rows (the
// layout's taps, uploaded by encode).
result<void> qwen3_5_vision_cuda::impl::embed(std::span<const float> pixel_values,
                                              std::int64_t patches) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const std::size_t bytes = pixel_values.size() * sizeof(float);
  if (bytes > pixels.size())
    return make_error(errc::internal, "vision tower: pixel buffer smaller than the patches");
  if (auto ok = check(
          cudaMemcpyAsync(pixels.data(), pixel_values.data(), bytes, cudaMemcpyHostToDevice, s),
          "vision pixels upload");
      !ok)
    return ok;
  float* xx = x.as<float>();
  if (auto ok = linear(pixels.as<const float>(), patches, patch, xx); !ok)
    return ok;
  return check(
      kc::weighted_gather_add(
          {matrix(pos_embed.as<const float>(), c.num_position_embeddings, c.hidden_size),
           matrix(tap_index.as<const std::int32_t>(), patches, 4),
           matrix(tap_weight.as<const float>(), patches, 4), matrix(xx, patches, c.hidden_size)},
          s),
      "vision position embedding");
}

// x += proj(attention(rope(qkv(norm1(x))))); x += fc2(act(fc1(norm2(x)))).
result<void> qwen3_5_vision_cuda::impl::block(const vision_block_weights& b, std::int64_t patches) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const std::int64_t hid = c.hidden_size, heads = c.num_heads, dim = c.head_dim();
  float* xx = x.as<float>();
  float* yy = y.as<float>();
  float* qq = qkv.as<float>();
  float* ii = inter.as<float>();
  if (auto ok = norm(xx, patches, b.norm1, yy); !ok)
    return ok;
  if (auto ok = linear(yy, patches, b.qkv, qq); !ok)
    return ok;
  // q, k, v of a token side by side: [patches, 3, heads, dim].
  const auto part = [qq, patches, heads, dim, hid](std::int64_t which) {
    return kernels::view<float, 3>{qq + which * hid, {patches, heads, dim}, {3 * hid, dim, 1}};
  };
  const auto pos = matrix(positions.as<const std::int32_t>(), patches, 2);
  const auto freq = vector(inv_freq.as<const float>(), dim / 4);
  for (const std::int64_t which : {0, 1}) {
    if (auto ok = check(kc::axial_rope({part(which), pos, freq}, s), "vision rope"); !ok)
      return ok;
  }
  const std::span<const std::int32_t> segments{cu.as<const std::int32_t>(),
                                               layout.cu_seqlens.size()};
  if (auto ok = check(kc::segment_attention(
                          {part(0),
                           part(1),
                           part(2),
                           segments,
                           kernels::contiguous<float, 3>(attn.as<float>(), {patches, heads, dim}),
                           0.0F,
                           {}},
                          s),
                      "vision attention");
      !ok)
    return ok;
  if (auto ok = linear(attn.as<const float>(), patches, b.proj, yy); !ok)
    return ok;
  const auto xv = matrix(xx, patches, hid);
  if (auto ok = check(kc::add({xv, matrix<const float>(yy, patches, hid), xv}, s), "vision add");
      !ok)
    return ok;
  if (auto ok = norm(xx, patches, b.norm2, yy); !ok)
    return ok;
  if (auto ok = linear(yy, patches, b.fc1, ii); !ok)
    return ok;
  const auto iv = matrix(ii, patches, c.intermediate_size);
  const auto form = c.hidden_act == "gelu" ? kernels::gelu_form::erf : kernels::gelu_form::tanh;
  if (auto ok = check(kc::gelu({iv, iv, form}, s), "vision gelu"); !ok)
    return ok;
  if (auto ok = linear(ii, patches, b.fc2, yy); !ok)
    return ok;
  return check(kc::add({xv, matrix<const float>(yy, patches, hid), xv}, s), "vision add");
}

// LayerNorm per patch, then each run of m^2 consecutive patches (one merge
// window) read as one row of m^2 * hidden, fc1, exact GELU, fc2 into `out`.
result<void> qwen3_5_vision_cuda::impl::merge(std::int64_t patches) {
  const auto& c = config;
  const std::int64_t tokens = patches / c.merge_unit();
  float* yy = y.as<float>();
  float* ii = inter.as<float>();
  if (auto ok = norm(x.as<const float>(), patches, merger_norm, yy); !ok)
    return ok;
  if (auto ok = linear(yy, tokens, merger_fc1, ii); !ok)
    return ok;
  const auto iv = matrix(ii, tokens, c.merged_hidden());
  if (auto ok = check(kc::gelu({iv, iv, kernels::gelu_form::erf}, stream.get()), "vision gelu");
      !ok)
    return ok;
  return linear(ii, tokens, merger_fc2, out.as<float>());
}

}  // namespace mstar::models

#endif
