#include "kernels/math.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace mstar::kernels {

namespace {

// The first failing check, or success. Every check runs; they are cheap.
result<void> first_error(std::initializer_list<result<void>> checks) {
  for (const auto& check : checks) {
    if (!check)
      return check.error();
  }
  return {};
}

// First and one-past-last address a view can touch, for overlap checks
// (integers: comparing pointers into different objects is unspecified).
template <class T>
std::pair<std::uintptr_t, std::uintptr_t> extent_of(const view<T, 2>& v) {
  const auto first = reinterpret_cast<std::uintptr_t>(v.data);
  const std::int64_t last = (v.shape[0] - 1) * v.strides[0] + (v.shape[1] - 1) * v.strides[1];
  return {first, first + static_cast<std::uintptr_t>(last + 1) * sizeof(T)};
}

template <class A, class B>
bool overlaps(const view<A, 2>& a, const view<B, 2>& b) {
  if (a.numel() == 0 || b.numel() == 0)
    return false;
  const auto [a0, a1] = extent_of(a);
  const auto [b0, b1] = extent_of(b);
  return a0 < b1 && b0 < a1;
}

float silu_of(float v) {
  return v / (1.0F + std::exp(-v));
}

float relu2_of(float v) {
  return v > 0.0F ? v * v : 0.0F;
}

// An optional operand: checked against `shape` when present.
template <class T>
result<void> check_optional(const view<T, 2>& v, std::string_view name,
                            const std::array<std::int64_t, 2>& shape) {
  return check_view(v, name, v ? shape : v.shape);
}

// A fused kernel writes float32 and/or bf16; with elements to write, one
// of them must be there.
template <class Params>
result<void> check_some_output(const Params& p, std::int64_t elements) {
  if (elements > 0 && !p.out && !p.out_bf16)
    return make_error(errc::invalid_argument, "out, out_bf16: neither is present");
  return {};
}

// An operand updated in place (read, then written) gives every element its
// own address, each row after the previous one, or the device's blocks would
// race on it: the CUDA launcher makes the same check.
result<void> check_no_self_overlap(const view<float, 2>& v, std::string_view name) {
  const bool cols_ok = v.shape[1] <= 1 || v.strides[1] >= 1;
  const bool rows_ok = v.shape[0] <= 1 || v.strides[0] >= (v.shape[1] - 1) * v.strides[1] + 1;
  if (cols_ok && rows_ok)
    return {};
  return make_error(errc::invalid_argument, std::string{name} + ": elements overlap (strides " +
                                                std::to_string(v.strides[0]) + ", " +
                                                std::to_string(v.strides[1]) + ")");
}

template <class Fn>
result<void> elementwise(const unary_params& p, Fn fn) {
  if (auto ok = first_error(
          {check_view(p.x, "x", {any_extent, any_extent}), check_view(p.out, "out", p.x.shape)});
      !ok) {
    return ok;
  }
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    for (std::int64_t d = 0; d < p.x.shape[1]; ++d)
      p.out(t, d) = fn(p.x(t, d));
  }
  return {};
}

template <class Fn>
result<void> elementwise(const binary_params& p, Fn fn) {
  if (auto ok = first_error({check_view(p.a, "a", {any_extent, any_extent}),
                             check_view(p.b, "b", p.a.shape), check_view(p.out, "out", p.a.shape)});
      !ok) {
    return ok;
  }
  for (std::int64_t t = 0; t < p.a.shape[0]; ++t) {
    for (std::int64_t d = 0; d < p.a.shape[1]; ++d)
      p.out(t, d) = fn(p.a(t, d), p.b(t, d));
  }
  return {};
}

// Row stride for BLAS: rows must not overlap; a single row may carry any
// stride, BLAS only needs it to be at least the row length.
std::int64_t leading_dim(const view<const float, 2>& v) {
  return v.shape[0] > 1 ? v.strides[0] : std::max<std::int64_t>(v.shape[1], 1);
}

result<void> check_blas_operand(const view<const float, 2>& v, std::string_view name) {
  if (v.shape[1] > 1 && v.strides[1] != 1) {
    return make_error(errc::invalid_argument,
                      std::string{name} + ": needs unit stride along dim 1");
  }
  if (leading_dim(v) < v.shape[1]) {
    return make_error(errc::invalid_argument, std::string{name} + ": rows overlap (stride " +
                                                  std::to_string(v.strides[0]) + " < " +
                                                  std::to_string(v.shape[1]) + ")");
  }
  return {};
}

}  // namespace

result<void> embedding(const embedding_params& p) {
  if (auto ok = first_error({check_view(p.ids, "ids", {any_extent}),
                             check_view(p.table, "table", {any_extent, any_extent}),
                             check_view(p.out, "out", {p.ids.shape[0], p.table.shape[1]})});
      !ok) {
    return ok;
  }
  const std::int64_t vocab = p.table.shape[0];
  for (std::int64_t t = 0; t < p.ids.shape[0]; ++t) {
    if (p.ids(t) < 0 || p.ids(t) >= vocab) {
      return make_error(errc::out_of_range, "ids[" + std::to_string(t) +
                                                "] = " + std::to_string(p.ids(t)) +
                                                " is outside [0, " + std::to_string(vocab) + ")");
    }
  }
  for (std::int64_t t = 0; t < p.ids.shape[0]; ++t) {
    for (std::int64_t h = 0; h < p.table.shape[1]; ++h)
      p.out(t, h) = p.table(p.ids(t), h);
  }
  return {};
}

result<void> rms_norm(const rms_norm_params& p) {
  if (auto ok = first_error({check_view(p.x, "x", {any_extent, any_extent}),
                             check_view(p.weight, "weight", {p.x.shape[1]}),
                             check_view(p.out, "out", p.x.shape)});
      !ok) {
    return ok;
  }
  const std::int64_t hidden = p.x.shape[1];
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    double sum_sq = 0.0;
    for (std::int64_t h = 0; h < hidden; ++h)
      sum_sq += double{p.x(t, h)} * double{p.x(t, h)};
    const auto scale =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + p.eps));
    for (std::int64_t h = 0; h < hidden; ++h)
      p.out(t, h) = p.x(t, h) * scale * p.weight(h);
  }
  return {};
}

result<void> add_rms_norm(const add_rms_norm_params& p) {
  const auto& shape = p.residual.shape;
  if (auto ok = first_error(
          {check_view(p.residual, "residual", {any_extent, any_extent}),
           check_optional(p.delta, "delta", shape), check_view(p.weight, "weight", {shape[1]}),
           check_optional(p.out, "out", shape), check_optional(p.out_bf16, "out_bf16", shape),
           check_some_output(p, p.residual.numel()),
           check_no_self_overlap(p.residual, "residual")});
      !ok) {
    return ok;
  }
  if (p.delta) {
    if (auto ok = add({p.residual, p.delta, p.residual}); !ok)
      return ok;
  }
  // Without a float32 output the norm goes to a scratch copy first.
  std::vector<float> scratch;
  view<float, 2> normed = p.out;
  if (!normed) {
    scratch.resize(static_cast<std::size_t>(p.residual.numel()));
    normed = matrix(scratch.data(), shape[0], shape[1]);
  }
  if (auto ok = rms_norm({p.residual, p.weight, normed, p.eps}); !ok)
    return ok;
  if (p.out_bf16) {
    for (std::int64_t t = 0; t < shape[0]; ++t) {
      for (std::int64_t h = 0; h < shape[1]; ++h)
        p.out_bf16(t, h) = float_to_bf16_bits(normed(t, h));
    }
  }
  return {};
}

result<void> gated_rms_norm(const gated_rms_norm_params& p) {
  if (auto ok = first_error(
          {check_view(p.x, "x", {any_extent, any_extent}),
           check_optional(p.gate, "gate", p.x.shape),
           check_view(p.weight, "weight", {p.x.shape[1]}), check_optional(p.out, "out", p.x.shape),
           check_optional(p.out_bf16, "out_bf16", p.x.shape), check_some_output(p, p.x.numel())});
      !ok) {
    return ok;
  }
  const std::int64_t channels = p.x.shape[1];
  const std::int64_t group = p.group_size == 0 ? channels : p.group_size;
  if (group <= 0 || channels % group != 0) {
    return make_error(errc::invalid_argument, "group_size: " + std::to_string(p.group_size) +
                                                  " does not divide " + std::to_string(channels) +
                                                  " channels");
  }
  std::vector<float> gated(static_cast<std::size_t>(group));
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    for (std::int64_t g0 = 0; g0 < channels; g0 += group) {
      double sum_sq = 0.0;
      for (std::int64_t c = 0; c < group; ++c) {
        const float v = p.gate ? p.x(t, g0 + c) * silu_of(p.gate(t, g0 + c)) : p.x(t, g0 + c);
        gated[static_cast<std::size_t>(c)] = v;
        sum_sq += double{v} * double{v};
      }
      const auto scale =
          static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(group) + p.eps));
      for (std::int64_t c = 0; c < group; ++c) {
        const float v = gated[static_cast<std::size_t>(c)] * scale * p.weight(g0 + c);
        if (p.out)
          p.out(t, g0 + c) = v;
        if (p.out_bf16)
          p.out_bf16(t, g0 + c) = float_to_bf16_bits(v);
      }
    }
  }
  return {};
}

result<void> linear(const linear_params& p) {
  if (auto ok = first_error(
          {check_view(p.x, "x", {any_extent, any_extent}),
           check_view(p.weight, "weight", {any_extent, p.x.shape[1]}),
           check_view(p.bias, "bias", p.bias ? std::array{p.weight.shape[0]} : p.bias.shape),
           check_view(p.out, "out", {p.x.shape[0], p.weight.shape[0]}),
           check_blas_operand(p.x, "x"), check_blas_operand(p.weight, "weight"),
           check_blas_operand(p.out, "out")});
      !ok) {
    return ok;
  }
  if (overlaps(p.x, p.out) || overlaps(p.weight, p.out)) {
    return make_error(errc::invalid_argument, "out: overlaps x or weight");
  }
  const std::int64_t rows = p.x.shape[0];
  const std::int64_t inner = p.x.shape[1];
  const std::int64_t cols = p.weight.shape[0];
  if (rows == 0 || cols == 0)
    return {};
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t n = 0; n < cols; ++n)
      p.out(t, n) = p.bias ? p.bias(n) : 0.0F;
  }
  if (inner == 0)
    return {};
  // beta = 1 accumulates onto the bias rows just written (or onto zeros).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
              static_cast<blasint>(cols), static_cast<blasint>(inner), 1.0F, p.x.data,
              static_cast<blasint>(leading_dim(p.x)), p.weight.data,
              static_cast<blasint>(leading_dim(p.weight)), 1.0F, p.out.data,
              static_cast<blasint>(leading_dim(p.out)));
  return {};
}

result<void> silu(const unary_params& p) {
  return elementwise(p, silu_of);
}

result<void> relu2(const unary_params& p) {
  return elementwise(p, relu2_of);
}

result<void> activate(const activation_params& p) {
  if (auto ok = first_error(
          {check_view(p.x, "x", {any_extent, any_extent}), check_optional(p.out, "out", p.x.shape),
           check_optional(p.out_bf16, "out_bf16", p.x.shape), check_optional(p.up, "up", p.x.shape),
           check_some_output(p, p.x.numel())});
      !ok) {
    return ok;
  }
  float (*fn)(float) = silu_of;
  switch (p.fn) {
    case activation::silu:
      fn = silu_of;
      break;
    case activation::relu2:
      fn = relu2_of;
      break;
  }
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    for (std::int64_t d = 0; d < p.x.shape[1]; ++d) {
      const float a = fn(p.x(t, d));
      const float v = p.up ? a * p.up(t, d) : a;
      if (p.out)
        p.out(t, d) = v;
      if (p.out_bf16)
        p.out_bf16(t, d) = float_to_bf16_bits(v);
    }
  }
  return {};
}

result<void> add(const binary_params& p) {
  return elementwise(p, [](float a, float b) { return a + b; });
}

result<void> mul(const binary_params& p) {
  return elementwise(p, [](float a, float b) { return a * b; });
}

result<void> softmax(const softmax_params& p) {
  if (auto ok = first_error(
          {check_view(p.x, "x", {any_extent, any_extent}), check_view(p.out, "out", p.x.shape)});
      !ok) {
    return ok;
  }
  const std::int64_t n = p.x.shape[1];
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t i = 0; i < n; ++i)
      max = std::max(max, p.x(t, i));
    if (max == -std::numeric_limits<float>::infinity()) {
      for (std::int64_t i = 0; i < n; ++i)
        p.out(t, i) = 0.0F;
      continue;
    }
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float e = std::exp(p.x(t, i) - max);
      p.out(t, i) = e;
      sum += e;
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (std::int64_t i = 0; i < n; ++i)
      p.out(t, i) *= inv;
  }
  return {};
}

result<void> rope(const rope_params& p) {
  const std::int64_t head_dim = p.x.shape[2];
  const std::int64_t rotary = p.rotary_dim == 0 ? head_dim : p.rotary_dim;
  if (auto ok = first_error({check_view(p.x, "x", {any_extent, any_extent, any_extent}),
                             check_view(p.positions, "positions", {p.x.shape[0]}),
                             check_view(p.inv_freq, "inv_freq",
                                        p.inv_freq ? std::array{rotary / 2} : p.inv_freq.shape)});
      !ok) {
    return ok;
  }
  if (rotary <= 0 || rotary % 2 != 0 || rotary > head_dim) {
    return make_error(errc::invalid_argument,
                      "rotary_dim: " + std::to_string(p.rotary_dim) +
                          " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  }
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    if (p.positions(t) < 0) {
      return make_error(errc::out_of_range, "positions[" + std::to_string(t) + "] = " +
                                                std::to_string(p.positions(t)) + " is negative");
    }
  }
  const std::int64_t half = rotary / 2;
  const bool interleaved = p.style == rope_style::interleaved;
  for (std::int64_t i = 0; i < half; ++i) {
    const double freq = p.inv_freq ? double{p.inv_freq(i)}
                                   : std::pow(double{p.theta}, -2.0 * static_cast<double>(i) /
                                                                   static_cast<double>(rotary));
    const std::int64_t ca = interleaved ? 2 * i : i;
    const std::int64_t cb = interleaved ? 2 * i + 1 : i + half;
    for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
      const double angle = static_cast<double>(p.positions(t)) * freq;
      const auto cos = static_cast<float>(std::cos(angle));
      const auto sin = static_cast<float>(std::sin(angle));
      for (std::int64_t h = 0; h < p.x.shape[1]; ++h) {
        const float a = p.x(t, h, ca);
        const float b = p.x(t, h, cb);
        p.x(t, h, ca) = a * cos - b * sin;
        p.x(t, h, cb) = b * cos + a * sin;
      }
    }
  }
  return {};
}

result<void> mrope(const mrope_params& p) {
  const std::int64_t head_dim = p.x.shape[2];
  const std::int64_t half = p.inv_freq.shape[0];
  if (auto ok = first_error({check_view(p.x, "x", {any_extent, any_extent, any_extent}),
                             check_view(p.positions, "positions", {3, p.x.shape[0]}),
                             check_view(p.inv_freq, "inv_freq", {any_extent})});
      !ok) {
    return ok;
  }
  if (half <= 0 || 2 * half > head_dim) {
    return make_error(errc::invalid_argument, "inv_freq: " + std::to_string(half) +
                                                  " pairs do not fit head_dim " +
                                                  std::to_string(head_dim));
  }
  for (std::int64_t i = 0; i < half; ++i) {
    std::int64_t c = 0;
    if (i % 3 == 1 && i < 3 * p.sections[1])
      c = 1;
    else if (i % 3 == 2 && i < 3 * p.sections[2])
      c = 2;
    const double freq = p.inv_freq(i);
    for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
      const double angle = static_cast<double>(p.positions(c, t)) * freq;
      const auto cos = static_cast<float>(std::cos(angle));
      const auto sin = static_cast<float>(std::sin(angle));
      for (std::int64_t h = 0; h < p.x.shape[1]; ++h) {
        const float a = p.x(t, h, i);
        const float b = p.x(t, h, i + half);
        p.x(t, h, i) = a * cos - b * sin;
        p.x(t, h, i + half) = b * cos + a * sin;
      }
    }
  }
  return {};
}

}  // namespace mstar::kernels
