// The Qwen3.5 vision tower's grid-derived inputs: checks, patch positions,
// position-table taps, attention segments, rope frequencies.
#include "models/internal/vision_layout.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace mstar::models::internal {
namespace {

constexpr std::int64_t max_extent = std::int64_t{1} << 20;

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

}  // namespace

result<std::int64_t> check_vision_inputs(const qwen3_5_vision_config& config,
                                         std::size_t pixel_values,
                                         std::span<const vision_grid> grids) {
  const std::int64_t merge = config.spatial_merge_size;
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
  const std::int64_t want = patches * config.patch_dim();
  if (static_cast<std::int64_t>(pixel_values) != want) {
    return make_error(errc::invalid_argument,
                      fmt::format("pixel_values: {} floats, grid_thw needs {} patches x {} "
                                  "values (in_channels * temporal_patch_size * patch_size^2) = {}",
                                  pixel_values, patches, config.patch_dim(), want));
  }
  return patches;
}

// Patches come merge window by merge window, as the processor emits them, so
// patch i of a frame sits at window i / m^2, offset i % m^2.
void layout_patches(const qwen3_5_vision_config& config, std::span<const vision_grid> grids,
                    std::int64_t patches, vision_patch_layout& out) {
  const std::int64_t m = config.spatial_merge_size;
  const std::int64_t side = config.grid_side();
  const auto n = static_cast<std::size_t>(patches);
  out.positions.resize(2 * n);
  out.tap_index.resize(4 * n);
  out.tap_weight.resize(4 * n);
  out.cu_seqlens.assign(1, 0);
  out.longest = 0;
  std::size_t p = 0;
  for (const auto& g : grids) {
    for (std::int64_t f = 0; f < g.t; ++f) {
      for (std::int64_t i = 0; i < g.h * g.w; ++i, ++p) {
        const std::int64_t window = i / (m * m);
        const std::int64_t row = window / (g.w / m) * m + i % (m * m) / m;
        const std::int64_t col = window % (g.w / m) * m + i % m;
        out.positions[2 * p] = static_cast<std::int32_t>(row);
        out.positions[2 * p + 1] = static_cast<std::int32_t>(col);
        const taps th = axis_taps(row, g.h, side);
        const taps tw = axis_taps(col, g.w, side);
        for (int a = 0; a < 2; ++a) {
          for (int b = 0; b < 2; ++b) {
            const auto k = 4 * p + static_cast<std::size_t>(2 * a + b);
            out.tap_index[k] = static_cast<std::int32_t>(th.at[a] * side + tw.at[b]);
            out.tap_weight[k] = th.weight[a] * tw.weight[b];
          }
        }
      }
      out.cu_seqlens.push_back(static_cast<std::int32_t>(p));
      out.longest = std::max(out.longest, g.h * g.w);
    }
  }
}

std::vector<float> vision_rope_frequencies(const qwen3_5_vision_config& c) {
  const std::int64_t spatial = c.head_dim() / 2;
  std::vector<float> out(static_cast<std::size_t>(spatial / 2));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(spatial);
    out[i] = 1.0F / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  return out;
}

}  // namespace mstar::models::internal
