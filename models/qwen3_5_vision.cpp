// The Qwen3.5 vision forward on the CPU (float32): patch and position
// embedding, the blocks over every image packed, the merger.
#include "models/qwen3_5_vision.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "kernels/encoder.hpp"
#include "kernels/math.hpp"
#include "models/internal/cpu_ops.hpp"

namespace mstar::models {
namespace {

using kernels::matrix;
using kernels::vector;

constexpr float norm_eps = 1e-6F;  // every LayerNorm of the tower (fixed in transformers)
constexpr std::int64_t max_extent = std::int64_t{1} << 20;

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

// One axis of the bilinear resampling of the side x side position table to
// `size` patches, corners aligned: the two table rows and their weights, in
// float32 as transformers computes them.
struct taps {
  std::int64_t at[2];
  float weight[2];
};

taps axis_taps(std::int64_t index, std::int64_t size, std::int64_t side) {
  const float src = static_cast<float>(index) * static_cast<float>(side - 1) /
                    static_cast<float>(std::max<std::int64_t>(size - 1, 1));
  const float floor = std::floor(src);
  const float frac = src - floor;
  taps out{};
  for (int o = 0; o < 2; ++o) {
    const auto raw = static_cast<std::int64_t>(floor) + o;
    out.at[o] = std::clamp<std::int64_t>(raw, 0, side - 1);
    out.weight[o] = std::max(1.0F - std::fabs(frac - static_cast<float>(o)), 0.0F);
  }
  return out;
}

// Rotary frequencies of the 2D rope: theta^(-2i / (head_dim / 2)) for
// i < head_dim / 4, in float32 as transformers computes them.
std::vector<float> rope_frequencies(const qwen3_5_vision_config& c) {
  const std::int64_t spatial = c.head_dim() / 2;
  std::vector<float> out(static_cast<std::size_t>(spatial / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(spatial);
    out[i] = 1.0F / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  return out;
}

}  // namespace

qwen3_5_vision::qwen3_5_vision(qwen3_5_vision_config config, qwen3_5_vision_weights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      inv_freq_(rope_frequencies(config_)) {}

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
  const std::int64_t merge = config_.spatial_merge_size;
  std::int64_t patches = 0;
  for (std::size_t i = 0; i < grids.size(); ++i) {
    const auto& g = grids[i];
    const auto seen = fmt::format("grid_thw[{}] = ({}, {}, {})", i, g.t, g.h, g.w);
    for (const std::int64_t extent : {g.t, g.h, g.w}) {
      if (extent < 1 || extent > max_extent) {
        return make_error(errc::invalid_argument,
                          fmt::format("{}: every extent must be in [1, {}]", seen, max_extent));
      }
    }
    if (g.h % merge != 0 || g.w % merge != 0) {
      return make_error(
          errc::invalid_argument,
          fmt::format("{}: h and w must be multiples of spatial_merge_size {}", seen, merge));
    }
    patches += g.t * g.h * g.w;
    if (patches > std::numeric_limits<std::int32_t>::max()) {
      return make_error(errc::invalid_argument,
                        fmt::format("{}: more than 2^31 - 1 patches in all", seen));
    }
  }
  const std::int64_t want = patches * config_.patch_dim();
  if (static_cast<std::int64_t>(pixel_values.size()) != want) {
    return make_error(errc::invalid_argument,
                      fmt::format("pixel_values: {} floats, grid_thw needs {} patches x {} "
                                  "values (in_channels * temporal_patch_size * patch_size^2) = {}",
                                  pixel_values.size(), patches, config_.patch_dim(), want));
  }
  return patches;
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
// frame). Patches come merge window by merge window, as the processor emits
// them, so patch p of a frame sits at window p / m^2, offset p % m^2.
void qwen3_5_vision::embed(std::span<const float> pixel_values, std::span<const vision_grid> grids,
                           std::int64_t patches) {
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size;
  const std::int64_t m = c.spatial_merge_size;
  const std::int64_t side = c.grid_side();
  auto& s = scratch_;
  s.x.resize(static_cast<std::size_t>(patches * hid));
  linear(pixel_values.data(), patches, c.patch_dim(), weights_.patch_w, weights_.patch_b,
         s.x.data());
  s.positions.resize(static_cast<std::size_t>(2 * patches));
  s.cu_seqlens.assign(1, 0);
  std::int64_t p = 0;
  for (const auto& g : grids) {
    for (std::int64_t f = 0; f < g.t; ++f) {
      for (std::int64_t i = 0; i < g.h * g.w; ++i, ++p) {
        const std::int64_t window = i / (m * m);
        const std::int64_t row = window / (g.w / m) * m + i % (m * m) / m;
        const std::int64_t col = window % (g.w / m) * m + i % m;
        s.positions[static_cast<std::size_t>(2 * p)] = static_cast<std::int32_t>(row);
        s.positions[static_cast<std::size_t>(2 * p + 1)] = static_cast<std::int32_t>(col);
        const taps th = axis_taps(row, g.h, side);
        const taps tw = axis_taps(col, g.w, side);
        float* x = s.x.data() + p * hid;
        for (std::int64_t d = 0; d < hid; ++d) {
          float sum = 0.0F;
          for (int a = 0; a < 2; ++a) {
            for (int b = 0; b < 2; ++b) {
              const std::int64_t at = th.at[a] * side + tw.at[b];
              sum += weights_.pos_embed[static_cast<std::size_t>(at * hid + d)] *
                     (th.weight[a] * tw.weight[b]);
            }
          }
          x[d] += sum;
        }
      }
      s.cu_seqlens.push_back(static_cast<std::int32_t>(p));
    }
  }
  std::int64_t longest = 0;
  for (std::size_t i = 1; i < s.cu_seqlens.size(); ++i)
    longest = std::max<std::int64_t>(longest, s.cu_seqlens[i] - s.cu_seqlens[i - 1]);
  s.scores.resize(static_cast<std::size_t>(longest * longest));
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
  const auto positions = matrix<const std::int32_t>(s.positions.data(), patches, 2);
  const auto freq = vector<const float>(inv_freq_.data(), size_of(inv_freq_));
  must(kernels::axial_rope({part(0), positions, freq}));
  must(kernels::axial_rope({part(1), positions, freq}));
  must(kernels::segment_attention(
      {part(0), part(1), part(2), s.cu_seqlens,
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
