#pragma once

// Dense model math on float32 activations: embedding, norms, linear layers,
// activations, softmax and rotary embedding. These are the CPU reference
// entry points (kernels/cpu/math.cpp); the CUDA issue adds launchers taking
// the same params structs. Every entry point checks shapes first and writes
// nothing when they are wrong; `T` is the number of tokens (rows).

#include <cstdint>

#include "core/result.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::kernels {

/// Operands of `embedding`.
struct embedding_params {
  view<const std::int32_t, 1> ids;  ///< [T] int32 token ids, each in [0, V)
  view<const float, 2> table;       ///< [V, H] float32 embedding rows
  view<float, 2> out;               ///< [T, H] float32
};

/// `out[t] = table[ids[t]]`. An id outside `[0, V)` is an `out_of_range`
/// error naming its position and value; then nothing is written.
[[nodiscard]] result<void> embedding(const embedding_params& p);

/// Operands of `rms_norm`.
struct rms_norm_params {
  view<const float, 2> x;       ///< [T, H] float32
  view<const float, 1> weight;  ///< [H] float32
  view<float, 2> out;           ///< [T, H] float32; may be the same elements as x
  float eps = 1e-6F;            ///< added to the mean square before the root
};

/// `out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight`, per row.
[[nodiscard]] result<void> rms_norm(const rms_norm_params& p);

/// Operands of `add_rms_norm`. At least one of `out` / `out_bf16` is
/// present (unless there are no elements).
struct add_rms_norm_params {
  view<float, 2> residual;       ///< [T, H] float32, updated in place; no two elements share an
                                 ///< address: column stride >= 1, row stride >= (H-1) * it + 1
  view<const float, 2> delta{};  ///< [T, H] float32 added to residual; absent: no add. Overlaps
                                 ///< residual only element for element
  view<const float, 1> weight;   ///< [H] float32
  view<float, 2> out{};          ///< [T, H] float32; may be the same elements as residual or
                                 ///< delta; absent: no float32 output
  view<std::uint16_t, 2> out_bf16{};  ///< [T, H] bfloat16 bits (`float_to_bf16_bits` of the
                                      ///< float32 result); overlaps nothing else; absent: none
  float eps = 1e-6F;                  ///< added to the mean square before the root
};

/// One step of a residual stream into the next block: `residual += delta`
/// (when present), then `rms_norm(residual) * weight` into `out` and/or
/// `out_bf16`. The same values as `add` then `rms_norm` (then rounding); on
/// the device one kernel replaces the three, the bf16 output being a bf16
/// GEMM's input.
[[nodiscard]] result<void> add_rms_norm(const add_rms_norm_params& p);

/// Operands of `gated_rms_norm`. At least one of `out` / `out_bf16` is
/// present (unless there are no elements).
struct gated_rms_norm_params {
  view<const float, 2> x;       ///< [T, D] float32 (the scan output)
  view<const float, 2> gate{};  ///< [T, D] float32 (z); absent: no gating
  view<const float, 1> weight;  ///< [D] float32
  view<float, 2> out{};  ///< [T, D] float32; may be the same elements as x or gate; absent: none
  std::int64_t group_size = 0;        ///< channels per group, dividing D; 0: one group of D
  float eps = 1e-6F;                  ///< added to each group's mean square
  view<std::uint16_t, 2> out_bf16{};  ///< [T, D] bfloat16 bits (`float_to_bf16_bits` of the
                                      ///< float32 result); overlaps nothing else; absent: none
};

/// Mamba-2's gated RMS norm (gate applied before the norm): with
/// `h = x * silu(gate)`, each group of `group_size` consecutive channels of
/// `h` is divided by its own root mean square, then scaled by `weight`. The
/// bf16 output is what the out projection of a bf16 model reads.
[[nodiscard]] result<void> gated_rms_norm(const gated_rms_norm_params& p);

/// Operands of `linear`.
struct linear_params {
  view<const float, 2> x;       ///< [T, K] float32, unit stride along K
  view<const float, 2> weight;  ///< [N, K] float32 (nn.Linear's layout), unit stride along K
  view<const float, 1> bias{};  ///< [N] float32; absent: no bias
  view<float, 2> out;           ///< [T, N] float32, unit stride along N; overlaps neither x
                                ///< nor weight
};

/// `out = x * weight^T (+ bias)`, through the BLAS `sgemm`.
[[nodiscard]] result<void> linear(const linear_params& p);

/// Operands of an elementwise activation.
struct unary_params {
  view<const float, 2> x;  ///< [T, D] float32
  view<float, 2> out;      ///< [T, D] float32; may be the same elements as x
};

/// `out = x * sigmoid(x)`.
[[nodiscard]] result<void> silu(const unary_params& p);

/// `out = max(x, 0)^2` (squared ReLU, Nemotron-H's MLP activation).
[[nodiscard]] result<void> relu2(const unary_params& p);

/// Which function `activate` applies.
enum class activation : std::uint8_t {
  silu,   ///< `x * sigmoid(x)`, as `silu`
  relu2,  ///< `max(x, 0)^2`, as `relu2`
};

/// Operands of `activate`. At least one of `out` / `out_bf16` is present
/// (unless there are no elements).
struct activation_params {
  view<const float, 2> x;  ///< [T, D] float32
  view<float, 2> out{};    ///< [T, D] float32; may be the same elements as x; absent: none
  view<std::uint16_t, 2> out_bf16{};  ///< [T, D] bfloat16 bits (`float_to_bf16_bits` of the
                                      ///< float32 result); overlaps nothing else; absent: none
  activation fn = activation::silu;   ///< the function applied
  /// [T, D] float32; present: the result is `fn(x) * up` (a gated linear
  /// unit: SwiGLU with silu), as `fn` then `mul`; absent: `fn(x)`.
  view<const float, 2> up{};
};

/// `silu` or `relu2` (by `fn`), times `up` when given, into float32 and/or
/// bfloat16 outputs: the bf16 output is what the down projection of a bf16
/// model reads.
[[nodiscard]] result<void> activate(const activation_params& p);

/// Operands of an elementwise binary operation.
struct binary_params {
  view<const float, 2> a;  ///< [T, D] float32
  view<const float, 2> b;  ///< [T, D] float32; a zero stride broadcasts (a bias row: {0, 1})
  view<float, 2> out;      ///< [T, D] float32; may be the same elements as a or b
};

/// `out = a + b`.
[[nodiscard]] result<void> add(const binary_params& p);

/// `out = a * b`.
[[nodiscard]] result<void> mul(const binary_params& p);

/// Operands of `softmax`.
struct softmax_params {
  view<const float, 2> x;  ///< [T, N] float32 scores; -inf entries get probability 0
  view<float, 2> out;      ///< [T, N] float32; may be the same elements as x
};

/// Row-wise softmax, shifted by the row maximum so large scores do not
/// overflow. A row with no finite entry comes out all zeros.
[[nodiscard]] result<void> softmax(const softmax_params& p);

/// How rotary embedding pairs up the channels of a head.
enum class rope_style : std::uint8_t {
  interleaved,  ///< GPT-J: channel pairs (2i, 2i + 1)
  half_split,   ///< GPT-NeoX / Llama: channel pairs (i, i + rotary_dim / 2)
};

/// Operands of `rope`.
struct rope_params {
  view<float, 3> x;                       ///< [T, heads, head_dim] float32, rotated in place
  view<const std::int32_t, 1> positions;  ///< [T] int32 token positions, >= 0
  view<const float, 1> inv_freq{};        ///< [rotary_dim / 2] float32 per-pair frequencies (scaled
                                          ///< variants); absent: theta^(-2i / rotary_dim)
  float theta = 10000.0F;                 ///< frequency base when inv_freq is absent
  std::int64_t rotary_dim = 0;  ///< even, <= head_dim; 0: head_dim. Later channels pass through
  rope_style style = rope_style::half_split;  ///< channel pairing
};

/// Rotates each channel pair `(a, b)` of the first `rotary_dim` channels of
/// every head by the angle `positions[t] * inv_freq[i]`:
/// `(a cos - b sin, b cos + a sin)`.
[[nodiscard]] result<void> rope(const rope_params& p);

/// Operands of `mrope`.
struct mrope_params {
  view<float, 3> x;                       ///< [T, heads, head_dim] float32, rotated in place
  view<const std::int32_t, 2> positions;  ///< [3, T] int32: temporal, height, width positions
  view<const float, 1> inv_freq;          ///< [rotary_dim / 2] float32 per-pair frequencies
  /// Frequency pairs of the height and width components; interleaved, pair i
  /// takes height when i % 3 == 1 and i < 3 * sections[1], width when
  /// i % 3 == 2 and i < 3 * sections[2], else temporal.
  std::int64_t sections[3] = {0, 0, 0};
};

/// Multimodal rotary embedding (Qwen2-VL's M-RoPE, interleaved sections, half-split
/// channel pairs): as `rope`, each pair's angle taking its component's position.
/// For text tokens the three positions are equal and this is `rope`.
[[nodiscard]] result<void> mrope(const mrope_params& p);

}  // namespace mstar::kernels
