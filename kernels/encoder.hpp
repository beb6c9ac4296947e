#pragma once

// The math of a bidirectional encoder such as a vision tower, beyond what
// math.hpp offers: LayerNorm with a bias, GELU (tanh and erf forms), axial
// 2D rotary embedding over (row, column) positions, and full attention
// inside packed segments. CPU reference entry points (kernels/cpu/encoder.cpp),
// written in math.hpp's style: shapes are checked first, and on a bad shape
// nothing is written; `T` is the number of tokens (rows).

#include <cstdint>
#include <span>

#include "core/result.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::kernels {

/// Operands of `layer_norm`.
struct layer_norm_params {
  view<const float, 2> x;       ///< [T, H] float32
  view<const float, 1> weight;  ///< [H] float32
  view<const float, 1> bias{};  ///< [H] float32; absent: no bias
  view<float, 2> out;           ///< [T, H] float32; may be the same elements as x
  float eps = 1e-6F;            ///< added to the variance before the root
};

/// `out[t] = (x[t] - mean) / sqrt(var + eps) * weight + bias`, per row, with
/// the biased (population) variance, as torch.nn.LayerNorm.
[[nodiscard]] result<void> layer_norm(const layer_norm_params& p);

/// Which form of GELU `gelu` computes.
enum class gelu_form : std::uint8_t {
  tanh,  ///< `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (`gelu_pytorch_tanh`)
  erf,   ///< `0.5 x (1 + erf(x / sqrt(2)))`, the exact one (`gelu`, nn.GELU())
};

/// Operands of `gelu`.
struct gelu_params {
  view<const float, 2> x;            ///< [T, D] float32
  view<float, 2> out;                ///< [T, D] float32; may be the same elements as x
  gelu_form form = gelu_form::tanh;  ///< which formula
};

/// The Gaussian error linear unit, elementwise.
[[nodiscard]] result<void> gelu(const gelu_params& p);

/// Operands of `weighted_gather_add`.
struct weighted_gather_add_params {
  view<const float, 2> table;         ///< [V, H] float32
  view<const std::int32_t, 2> index;  ///< [T, K] int32 rows of `table`, each in [0, V)
  view<const float, 2> weight;        ///< [T, K] float32
  view<float, 2> out;                 ///< [T, H] float32, added to; overlaps none of the inputs
};

/// `out[t] += sum_k weight[t, k] * table[index[t, k]]`, the sum over k taken
/// in float32 in order before it is added (a vision tower's bilinearly
/// resampled position table: K = 4 taps per token).
[[nodiscard]] result<void> weighted_gather_add(const weighted_gather_add_params& p);

/// Operands of `axial_rope`.
struct axial_rope_params {
  view<float, 3> x;  ///< [T, heads, head_dim] float32, rotated in place; head_dim % 4 == 0
  view<const std::int32_t, 2> positions;  ///< [T, 2] int32 (row, column) of each token, >= 0
  view<const float, 1> inv_freq;          ///< [head_dim / 4] float32 per-pair frequencies
};

/// 2D rotary embedding in the half-split pairing: channel pair
/// `(i, i + head_dim / 2)` is rotated by `row * inv_freq[i]` for the first
/// `head_dim / 4` pairs and by `column * inv_freq[i - head_dim / 4]` for the
/// rest: `(a cos - b sin, b cos + a sin)`. The angle is taken in float32, as
/// transformers does.
[[nodiscard]] result<void> axial_rope(const axial_rope_params& p);

/// Operands of `segment_attention`.
struct segment_attention_params {
  view<const float, 3> q;  ///< [T, heads, head_dim] float32, unit stride along head_dim
  view<const float, 3> k;  ///< [T, heads, head_dim] float32, unit stride along head_dim
  view<const float, 3> v;  ///< [T, heads, head_dim] float32, unit stride along head_dim
  std::span<const std::int32_t> cu_seqlens;  ///< [S+1] int32: 0, then each segment's end, up to T
  view<float, 3> out;         ///< [T, heads, head_dim] float32, unit stride along head_dim, heads
                              ///< and rows not overlapping; overlaps none of q, k, v
  float scale = 0.0F;         ///< softmax scale; 0 picks 1 / sqrt(head_dim)
  std::span<float> scores{};  ///< scratch of at least L * L floats (L the longest segment);
                              ///< empty: the kernel allocates its own
};

/// Full (non-causal) attention inside each segment `[cu[s], cu[s+1])`:
/// every token attends to every token of its own segment and to no other,
/// head by head (as many key/value heads as query heads). Softmax in float32,
/// shifted by the row maximum; the products run through the BLAS `sgemm`.
[[nodiscard]] result<void> segment_attention(const segment_attention_params& p);

}  // namespace mstar::kernels
