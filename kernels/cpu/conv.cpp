#include "kernels/conv.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <vector>

namespace mstar::kernels {
namespace {

float silu(float y) {
  return y / (1.0f + std::exp(-y));
}

// One row of `n` tokens through every channel. `window` is scratch of W
// floats; the slot (if any) is read before and written after the row.
void conv_row(const conv_weights& w, const float* x, std::size_t x_stride, std::size_t n,
              float* out, float* slot, bool resume, std::vector<float>& window) {
  const auto c_count = static_cast<std::size_t>(w.channels);
  const auto width = static_cast<std::size_t>(w.width);
  const std::size_t keep = width - 1;
  for (std::size_t c = 0; c < c_count; ++c) {
    float* cslot = slot + c * keep;
    for (std::size_t j = 0; j < keep; ++j)
      window[j] = resume ? cslot[j] : 0.0f;
    const float* wc = w.weight + c * width;
    const float b = w.bias != nullptr ? w.bias[c] : 0.0f;
    for (std::size_t t = 0; t < n; ++t) {
      window[keep] = x[t * x_stride + c];
      float y = b;
      for (std::size_t j = 0; j < width; ++j)
        y += wc[j] * window[j];
      out[t * c_count + c] = w.silu ? silu(y) : y;
      std::copy(window.begin() + 1, window.begin() + static_cast<std::ptrdiff_t>(width),
                window.begin());
    }
    std::copy(window.begin(), window.begin() + static_cast<std::ptrdiff_t>(keep), cslot);
  }
}

std::size_t stride_or(std::int64_t stride, std::int32_t channels) {
  return static_cast<std::size_t>(stride != 0 ? stride : channels);
}

}  // namespace

void causal_conv_varlen(const causal_conv_varlen_params& p) {
  assert(p.w.width >= 2 && "a causal conv needs at least two taps");
  const auto c_count = static_cast<std::size_t>(p.w.channels);
  const std::size_t slot_elems = c_count * static_cast<std::size_t>(p.w.width - 1);
  const std::size_t stride = stride_or(p.x_stride, p.w.channels);
  std::vector<float> window(static_cast<std::size_t>(p.w.width));
  const std::size_t rows = p.cu_seqlens.empty() ? 0 : p.cu_seqlens.size() - 1;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto begin = static_cast<std::size_t>(p.cu_seqlens[r]);
    const auto n = static_cast<std::size_t>(p.cu_seqlens[r + 1]) - begin;
    float* out = p.out + begin * c_count;
    const std::int32_t slot = p.slot_indices[r];
    if (slot < 0) {
      std::fill(out, out + n * c_count, 0.0f);
      continue;
    }
    if (n == 0)
      continue;
    conv_row(p.w, p.x + begin * stride, stride, n, out,
             p.state + static_cast<std::size_t>(slot) * slot_elems, p.has_state[r] != 0, window);
  }
}

void causal_conv_update(const causal_conv_update_params& p) {
  assert(p.w.width >= 2 && "a causal conv needs at least two taps");
  const auto c_count = static_cast<std::size_t>(p.w.channels);
  const std::size_t slot_elems = c_count * static_cast<std::size_t>(p.w.width - 1);
  const std::size_t stride = stride_or(p.x_stride, p.w.channels);
  std::vector<float> window(static_cast<std::size_t>(p.w.width));
  for (std::size_t b = 0; b < static_cast<std::size_t>(p.batch); ++b) {
    float* out = p.out + b * c_count;
    const std::int32_t slot = p.slot_indices[b];
    if (slot < 0) {
      std::fill(out, out + c_count, 0.0f);
      continue;
    }
    const bool resume = p.has_state.empty() || p.has_state[b] != 0;
    conv_row(p.w, p.x + b * stride, stride, 1, out,
             p.state + static_cast<std::size_t>(slot) * slot_elems, resume, window);
  }
}

}  // namespace mstar::kernels
