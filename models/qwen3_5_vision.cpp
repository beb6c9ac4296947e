// The Qwen3.5 vision forward on the CPU (float32): patch and position
// embedding, the blocks over every image packed, the merger.
#include "models/qwen3_5_vision.hpp"

#include "kernels/encoder.hpp"
#include "kernels/math.hpp"
#include "models/internal/cpu_ops.hpp"
#include "models/internal/vision_layout.hpp"

namespace mstar::models {
namespace {

using kernels::matrix;
using kernels::vector;

constexpr float norm_eps = 1e-6F;  // every LayerNorm of the tower (fixed in transformers)

using internal::must;  // shapes are checked by encode

std::int64_t size_of(const std::vector<float>& v) {
  return static_cast<std::int64_t>(v.size());
}

// out [t, n] = x [t, k] * w [n, k]^T + b [n].
void linear(const float* x, std::int64_t t, std::int64_t k, const std::vector<float>& w,
            const std::vector<float>& b, float* out) {
  const std::int64_t n = size_of(b);
  must(kernels::linear(
      {matrix(x, t, k), matrix(w.data(), n, k), vector(b.data(), n), matrix(out, t, n)}));
}

void layer_norm(const float* x, std::int64_t t, const std::vector<float>& w,
                const std::vector<float>& b, float* out) {
  const std::int64_t h = size_of(w);
  must(kernels::layer_norm(
      {matrix(x, t, h), vector(w.data(), h), vector(b.data(), h), matrix(out, t, h), norm_eps}));
}

void add_into(float* x, const float* delta, std::int64_t t, std::int64_t h) {
  const auto xv = matrix(x, t, h);
  must(kernels::add({xv, matrix(delta, t, h), xv}));
}

}  // namespace

qwen3_5_vision::qwen3_5_vision(qwen3_5_vision_config config, qwen3_5_vision_weights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      inv_freq_(internal::vision_rope_frequencies(config_)) {}

result<qwen3_5_vision> qwen3_5_vision::load(qwen3_5_vision_config config,
                                            const safetensors_checkpoint& checkpoint) {
  auto weights = qwen3_5_vision_weights::load(config, checkpoint);
  if (!weights)
    return weights.error();
  return qwen3_5_vision{std::move(config), std::move(*weights)};
}

result<qwen3_5_vision> qwen3_5_vision::load(const std::filesystem::path& folder) {
  auto config = qwen3_5_vision_config::load(folder);
  if (!config)
    return config.error();
  auto checkpoint = safetensors_checkpoint::open(folder);
  if (!checkpoint)
    return checkpoint.error();
  return load(std::move(*config), *checkpoint);
}

std::int64_t qwen3_5_vision::merged_tokens(std::span<const vision_grid> grids) const noexcept {
  std::int64_t patches = 0;
  for (const auto& g : grids)
    patches += g.t * g.h * g.w;
  return patches / config_.merge_unit();
}

result<std::int64_t> qwen3_5_vision::check_inputs(std::span<const float> pixel_values,
                                                  std::span<const vision_grid> grids) const {
  return internal::check_vision_inputs(config_, pixel_values.size(), grids);
}

result<void> qwen3_5_vision::encode(std::span<const float> pixel_values,
                                    std::span<const vision_grid> grids, std::vector<float>& out) {
  out.clear();
  const auto patches = check_inputs(pixel_values, grids);
  if (!patches)
    return patches.error();
  if (*patches == 0)
    return {};  // nothing to encode (and no scratch to address)
  embed(pixel_values, grids, *patches);
  for (const auto& b : weights_.blocks)
    block(b, *patches);
  merge(*patches, out);
  return {};
}

// x = patches * patch_w^T + patch_b + the resampled position rows; also the
// rope's (row, column) of every patch and the attention segments (one per
// frame), from the grids (internal/vision_layout.hpp).
void qwen3_5_vision::embed(std::span<const float> pixel_values, std::span<const vision_grid> grids,
                           std::int64_t patches) {
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size;
  auto& s = scratch_;
  s.x.resize(static_cast<std::size_t>(patches * hid));
  linear(pixel_values.data(), patches, c.patch_dim(), weights_.patch_w, weights_.patch_b,
         s.x.data());
  internal::layout_patches(c, grids, patches, s.layout);
  must(kernels::weighted_gather_add(
      {matrix<const float>(weights_.pos_embed.data(), c.num_position_embeddings, hid),
       matrix<const std::int32_t>(s.layout.tap_index.data(), patches, 4),
       matrix<const float>(s.layout.tap_weight.data(), patches, 4),
       matrix(s.x.data(), patches, hid)}));
  s.scores.resize(static_cast<std::size_t>(s.layout.longest * s.layout.longest));
  s.y.resize(s.x.size());
}

// x += proj(attention(rope(qkv(norm1(x))))); x += fc2(act(fc1(norm2(x)))).
void qwen3_5_vision::block(const qwen3_5_vision_block& b, std::int64_t patches) {
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size;
  const std::int64_t heads = c.num_heads;
  const std::int64_t dim = c.head_dim();
  auto& s = scratch_;
  s.qkv.resize(static_cast<std::size_t>(patches * 3 * hid));
  s.attn.resize(s.x.size());
  s.inter.resize(static_cast<std::size_t>(patches * c.intermediate_size));
  layer_norm(s.x.data(), patches, b.norm1_w, b.norm1_b, s.y.data());
  linear(s.y.data(), patches, hid, b.qkv_w, b.qkv_b, s.qkv.data());
  // q, k, v of a token side by side: [patches, 3, heads, dim].
  const auto part = [&s, patches, heads, dim, hid](std::int64_t which) {
    return kernels::view<float, 3>{
        s.qkv.data() + which * hid, {patches, heads, dim}, {3 * hid, dim, 1}};
  };
  const auto positions = matrix<const std::int32_t>(s.layout.positions.data(), patches, 2);
  const auto freq = vector<const float>(inv_freq_.data(), size_of(inv_freq_));
  must(kernels::axial_rope({part(0), positions, freq}));
  must(kernels::axial_rope({part(1), positions, freq}));
  must(kernels::segment_attention(
      {part(0), part(1), part(2), s.layout.cu_seqlens,
       kernels::contiguous<float, 3>(s.attn.data(), {patches, heads, dim}), 0.0F, s.scores}));
  linear(s.attn.data(), patches, hid, b.proj_w, b.proj_b, s.y.data());
  add_into(s.x.data(), s.y.data(), patches, hid);
  layer_norm(s.x.data(), patches, b.norm2_w, b.norm2_b, s.y.data());
  linear(s.y.data(), patches, hid, b.fc1_w, b.fc1_b, s.inter.data());
  const auto iv = matrix(s.inter.data(), patches, c.intermediate_size);
  const auto form = c.hidden_act == "gelu" ? kernels::gelu_form::erf : kernels::gelu_form::tanh;
  must(kernels::gelu({iv, iv, form}));
  linear(s.inter.data(), patches, c.intermediate_size, b.fc2_w, b.fc2_b, s.y.data());
  add_into(s.x.data(), s.y.data(), patches, hid);
}

// The merger: LayerNorm per patch, then each run of m^2 consecutive patches
// (one merge window) read as one row of m^2 * hidden, fc1, exact GELU (the
// merger's nn.GELU(), whatever hidden_act says), fc2.
void qwen3_5_vision::merge(std::int64_t patches, std::vector<float>& out) {
  const auto& c = config_;
  const auto& w = weights_;
  auto& s = scratch_;
  const std::int64_t tokens = patches / c.merge_unit();
  const std::int64_t width = c.merged_hidden();
  layer_norm(s.x.data(), patches, w.merger_norm_w, w.merger_norm_b, s.y.data());
  s.inter.resize(static_cast<std::size_t>(tokens * width));
  linear(s.y.data(), tokens, width, w.merger_fc1_w, w.merger_fc1_b, s.inter.data());
  const auto iv = matrix(s.inter.data(), tokens, width);
  must(kernels::gelu({iv, iv, kernels::gelu_form::erf}));
  out.resize(static_cast<std::size_t>(tokens * c.out_hidden_size));
  linear(s.inter.data(), tokens, width, w.merger_fc2_w, w.merger_fc2_b, out.data());
}

}  // namespace mstar::models
