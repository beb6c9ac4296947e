#include "kernels/encoder.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace mstar::kernels {

namespace {

// The first failing check, or success.
result<void> first_error(std::initializer_list<result<void>> checks) {
  for (const auto& check : checks) {
    if (!check)
      return check.error();
  }
  return {};
}

result<void> invalid(const std::string& message) {
  return make_error(errc::invalid_argument, message);
}

// First and one-past-last address a view can touch (integers: comparing
// pointers into different objects is unspecified).
template <class T, std::size_t Rank>
std::pair<std::uintptr_t, std::uintptr_t> extent_of(const view<T, Rank>& v) {
  std::int64_t last = 0;
  for (std::size_t d = 0; d < Rank; ++d)
    last += (v.shape[d] - 1) * v.strides[d];
  const auto first = reinterpret_cast<std::uintptr_t>(v.data);
  return {first, first + static_cast<std::uintptr_t>(last + 1) * sizeof(T)};
}

template <class A, class B, std::size_t Rank>
bool overlaps(const view<A, Rank>& a, const view<B, Rank>& b) {
  if (a.numel() == 0 || b.numel() == 0)
    return false;
  const auto [a0, a1] = extent_of(a);
  const auto [b0, b1] = extent_of(b);
  return a0 < b1 && b0 < a1;
}

float gelu_tanh_of(float x) {
  constexpr double sqrt_2_over_pi = 0.79788456080286535588;
  const double v = x;
  return static_cast<float>(0.5 * v *
                            (1.0 + std::tanh(sqrt_2_over_pi * (v + 0.044715 * v * v * v))));
}

float gelu_erf_of(float x) {
  constexpr double inv_sqrt_2 = 0.70710678118654752440;
  const double v = x;
  return static_cast<float>(0.5 * v * (1.0 + std::erf(v * inv_sqrt_2)));
}

// A [T, heads, head_dim] operand BLAS reads head by head: unit stride along
// head_dim, rows of one head spaced at least head_dim apart.
template <class T>
result<void> check_head_rows(const view<T, 3>& v, std::string_view name) {
  const std::int64_t dim = v.shape[2];
  if (dim > 1 && v.strides[2] != 1)
    return invalid(std::string{name} + ": needs unit stride along head_dim");
  if (v.shape[0] > 1 && v.strides[0] < dim) {
    return invalid(std::string{name} + ": rows overlap (stride " + std::to_string(v.strides[0]) +
                   " < " + std::to_string(dim) + ")");
  }
  return {};
}

// The longest segment, or an error when cu_seqlens does not split [0, tokens).
result<std::int64_t> longest_segment(std::span<const std::int32_t> cu, std::int64_t tokens) {
  if (cu.empty() || cu.front() != 0 || cu.back() != tokens) {
    return make_error(
        errc::invalid_argument,
        "cu_seqlens: must start at 0 and end at the token count " + std::to_string(tokens));
  }
  std::int64_t longest = 0;
  for (std::size_t s = 1; s < cu.size(); ++s) {
    if (cu[s] < cu[s - 1]) {
      return make_error(errc::invalid_argument, "cu_seqlens[" + std::to_string(s) +
                                                    "] = " + std::to_string(cu[s]) +
                                                    " is below the previous entry");
    }
    longest = std::max<std::int64_t>(longest, cu[s] - cu[s - 1]);
  }
  return longest;
}

blasint ld_of(std::int64_t stride, std::int64_t rows, std::int64_t cols) {
  return static_cast<blasint>(rows > 1 ? stride : std::max<std::int64_t>(cols, 1));
}

// Scores of one segment and head -> probabilities, in place: scale, then a
// softmax shifted by the row maximum.
void scaled_softmax_rows(float* s, std::int64_t n, float scale) {
  for (std::int64_t i = 0; i < n; ++i) {
    float* row = s + i * n;
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
      row[j] *= scale;
      max = std::max(max, row[j]);
    }
    double sum = 0.0;
    for (std::int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (std::int64_t j = 0; j < n; ++j)
      row[j] *= inv;
  }
}

}  // namespace

result<void> layer_norm(const layer_norm_params& p) {
  if (auto ok =
          first_error({check_view(p.x, "x", {any_extent, any_extent}),
                       check_view(p.weight, "weight", {p.x.shape[1]}),
                       check_view(p.bias, "bias", p.bias ? std::array{p.x.shape[1]} : p.bias.shape),
                       check_view(p.out, "out", p.x.shape)});
      !ok) {
    return ok;
  }
  const std::int64_t hidden = p.x.shape[1];
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    double sum = 0.0;
    for (std::int64_t h = 0; h < hidden; ++h)
      sum += p.x(t, h);
    const double mean = sum / static_cast<double>(hidden);
    double sum_sq = 0.0;
    for (std::int64_t h = 0; h < hidden; ++h) {
      const double d = p.x(t, h) - mean;
      sum_sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + p.eps);
    for (std::int64_t h = 0; h < hidden; ++h) {
      const auto normed = static_cast<float>((p.x(t, h) - mean) * inv);
      p.out(t, h) = normed * p.weight(h) + (p.bias ? p.bias(h) : 0.0F);
    }
  }
  return {};
}

result<void> gelu(const gelu_params& p) {
  if (auto ok = first_error(
          {check_view(p.x, "x", {any_extent, any_extent}), check_view(p.out, "out", p.x.shape)});
      !ok) {
    return ok;
  }
  float (*fn)(float) = gelu_tanh_of;
  switch (p.form) {
    case gelu_form::tanh:
      fn = gelu_tanh_of;
      break;
    case gelu_form::erf:
      fn = gelu_erf_of;
      break;
  }
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    for (std::int64_t d = 0; d < p.x.shape[1]; ++d)
      p.out(t, d) = fn(p.x(t, d));
  }
  return {};
}

result<void> weighted_gather_add(const weighted_gather_add_params& p) {
  if (auto ok = first_error({check_view(p.table, "table", {any_extent, any_extent}),
                             check_view(p.index, "index", {any_extent, any_extent}),
                             check_view(p.weight, "weight", p.index.shape),
                             check_view(p.out, "out", {p.index.shape[0], p.table.shape[1]})});
      !ok) {
    return ok;
  }
  if (overlaps(p.out, p.table) || overlaps(p.out, p.index) || overlaps(p.out, p.weight))
    return invalid("out: overlaps table, index or weight");
  for (std::int64_t t = 0; t < p.index.shape[0]; ++t) {
    for (std::int64_t k = 0; k < p.index.shape[1]; ++k) {
      if (p.index(t, k) < 0 || p.index(t, k) >= p.table.shape[0]) {
        return make_error(errc::out_of_range,
                          "index[" + std::to_string(t) + ", " + std::to_string(k) +
                              "] = " + std::to_string(p.index(t, k)) + " is outside [0, " +
                              std::to_string(p.table.shape[0]) + ")");
      }
    }
  }
  for (std::int64_t t = 0; t < p.index.shape[0]; ++t) {
    for (std::int64_t h = 0; h < p.table.shape[1]; ++h) {
      float sum = 0.0F;
      for (std::int64_t k = 0; k < p.index.shape[1]; ++k)
        sum += p.table(p.index(t, k), h) * p.weight(t, k);
      p.out(t, h) += sum;
    }
  }
  return {};
}

result<void> axial_rope(const axial_rope_params& p) {
  const std::int64_t head_dim = p.x.shape[2];
  if (auto ok = first_error({check_view(p.x, "x", {any_extent, any_extent, any_extent}),
                             check_view(p.positions, "positions", {p.x.shape[0], 2}),
                             check_view(p.inv_freq, "inv_freq", {head_dim / 4})});
      !ok) {
    return ok;
  }
  if (head_dim % 4 != 0)
    return invalid("x: head_dim " + std::to_string(head_dim) + " is not a multiple of 4");
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    for (std::int64_t a = 0; a < 2; ++a) {
      if (p.positions(t, a) < 0) {
        return make_error(errc::out_of_range,
                          "positions[" + std::to_string(t) + ", " + std::to_string(a) +
                              "] = " + std::to_string(p.positions(t, a)) + " is negative");
      }
    }
  }
  const std::int64_t quarter = head_dim / 4;
  const std::int64_t half = head_dim / 2;
  for (std::int64_t t = 0; t < p.x.shape[0]; ++t) {
    for (std::int64_t i = 0; i < half; ++i) {
      const std::int64_t axis = i < quarter ? 0 : 1;
      const float angle = static_cast<float>(p.positions(t, axis)) * p.inv_freq(i - axis * quarter);
      const float cos = std::cos(angle);
      const float sin = std::sin(angle);
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

result<void> segment_attention(const segment_attention_params& p) {
  const auto& shape = p.q.shape;
  if (auto ok = first_error(
          {check_view(p.q, "q", {any_extent, any_extent, any_extent}), check_view(p.k, "k", shape),
           check_view(p.v, "v", shape), check_view(p.out, "out", shape), check_head_rows(p.q, "q"),
           check_head_rows(p.k, "k"), check_head_rows(p.v, "v"), check_head_rows(p.out, "out")});
      !ok) {
    return ok;
  }
  const bool heads_apart = shape[1] <= 1 || p.out.strides[1] >= shape[2];
  const bool rows_apart =
      shape[0] <= 1 || p.out.strides[0] >= (shape[1] - 1) * p.out.strides[1] + shape[2];
  if (!heads_apart || !rows_apart) {
    return invalid("out: elements overlap (strides " + std::to_string(p.out.strides[0]) + ", " +
                   std::to_string(p.out.strides[1]) + ")");
  }
  if (overlaps(p.out, p.q) || overlaps(p.out, p.k) || overlaps(p.out, p.v))
    return invalid("out: overlaps q, k or v");
  const auto longest = longest_segment(p.cu_seqlens, shape[0]);
  if (!longest)
    return longest.error();
  const auto need = static_cast<std::size_t>(*longest * *longest);
  if (!p.scores.empty() && p.scores.size() < need) {
    return invalid("scores: " + std::to_string(p.scores.size()) + " floats, the longest segment (" +
                   std::to_string(*longest) + " tokens) needs " + std::to_string(need));
  }
  std::vector<float> own;
  float* scores = p.scores.data();
  if (p.scores.empty()) {
    own.resize(need);
    scores = own.data();
  }
  const std::int64_t heads = shape[1];
  const std::int64_t dim = shape[2];
  const float scale = p.scale != 0.0F ? p.scale : 1.0F / std::sqrt(static_cast<float>(dim));
  for (std::size_t s = 0; s + 1 < p.cu_seqlens.size(); ++s) {
    const std::int64_t start = p.cu_seqlens[s];
    const std::int64_t n = p.cu_seqlens[s + 1] - start;
    if (n == 0 || dim == 0)
      continue;
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* q = &p.q(start, h, 0);
      const float* k = &p.k(start, h, 0);
      const float* v = &p.v(start, h, 0);
      float* o = &p.out(start, h, 0);
      const auto bn = static_cast<blasint>(n);
      const auto bd = static_cast<blasint>(dim);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bn, bn, bd, 1.0F, q,
                  ld_of(p.q.strides[0], n, dim), k, ld_of(p.k.strides[0], n, dim), 0.0F, scores,
                  bn);
      scaled_softmax_rows(scores, n, scale);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bn, bd, bn, 1.0F, scores, bn, v,
                  ld_of(p.v.strides[0], n, dim), 0.0F, o, ld_of(p.out.strides[0], n, dim));
    }
  }
  return {};
}

}  // namespace mstar::kernels
