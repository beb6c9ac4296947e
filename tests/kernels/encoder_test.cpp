#include "kernels/encoder.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <numbers>
#include <vector>

#include "tests/kernels/random_tensors.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

using mstar::test::contains;
using shape1 = std::array<std::int64_t, 1>;
using shape2 = std::array<std::int64_t, 2>;
using shape3 = std::array<std::int64_t, 3>;

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want,
                     double tolerance = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1 + std::abs(want[i]))) << "element " << i;
}

TEST(layer_norm, matches_brute_force_with_and_without_bias) {
  test::random_tensors rng{21};
  const std::int64_t rows = 5, hidden = 40;
  const auto x = rng.floats(rows * hidden, -4, 6);  // off-centre rows: the mean matters
  const auto w = rng.floats(hidden, 0.5F, 1.5F);
  const auto b = rng.floats(hidden, -0.5F, 0.5F);
  for (const bool with_bias : {true, false}) {
    std::vector<double> want(x.size());
    for (std::int64_t t = 0; t < rows; ++t) {
      double mean = 0, var = 0;
      for (std::int64_t h = 0; h < hidden; ++h)
        mean += x[t * hidden + h] / double(hidden);
      for (std::int64_t h = 0; h < hidden; ++h)
        var += std::pow(x[t * hidden + h] - mean, 2) / double(hidden);
      for (std::int64_t h = 0; h < hidden; ++h) {
        want[t * hidden + h] =
            (x[t * hidden + h] - mean) / std::sqrt(var + 1e-6) * w[h] + (with_bias ? b[h] : 0.0);
      }
    }
    auto out = test::poisoned(x.size());
    ASSERT_TRUE(layer_norm({matrix(x.data(), rows, hidden), vector(w.data(), hidden),
                            with_bias ? vector(b.data(), hidden) : view<const float, 1>{},
                            matrix(out.data(), rows, hidden), 1e-6F}));
    expect_near_all(out, want);
  }
}

TEST(layer_norm, hand_computed_row_in_place) {
  std::vector<float> x{1, 2, 3, 4};
  const std::vector<float> w{1, 1, 2, 1};
  const std::vector<float> b{0, 0, 0, 10};
  const auto xv = matrix(x.data(), 1, 4);
  ASSERT_TRUE(layer_norm({xv, vector(w.data(), 4), vector(b.data(), 4), xv, 0.0F}));
  const double sd = std::sqrt(1.25);  // mean 2.5, variance 1.25
  expect_near_all(x, {-1.5 / sd, -0.5 / sd, 1.0 / sd, 1.5 / sd + 10});
}

TEST(layer_norm, wrong_bias_shape_is_an_error_and_writes_nothing) {
  const std::vector<float> x(8, 1.0F), w(4, 1.0F), b(3, 0.0F);
  auto out = test::poisoned(8);
  const auto r = layer_norm(
      {matrix(x.data(), 2, 4), vector(w.data(), 4), vector(b.data(), 3), matrix(out.data(), 2, 4)});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message(), "bias: shape [3], expected [4]"));
  for (const float v : out)
    EXPECT_TRUE(std::isnan(v));
}

TEST(gelu, both_forms_match_torch_values) {
  const std::vector<float> x{-3.0F, -1.0F, -0.5F, 0.0F, 0.5F, 1.0F, 3.0F};
  // torch.nn.functional.gelu(x, approximate='tanh') and gelu(x), float64.
  const std::vector<double> tanh_form{
      -0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
      0.34571400982514394,    0.8411919906082768,   2.996362607918227};
  const std::vector<double> erf_form{
      -0.00404969409489031, -0.15865525393145702, -0.15426876936299344, 0.0,
      0.34573123063700656,  0.841344746068543,    2.99595030590511};
  auto out = test::poisoned(x.size());
  const auto n = static_cast<std::int64_t>(x.size());
  ASSERT_TRUE(gelu({matrix(x.data(), 1, n), matrix(out.data(), 1, n), gelu_form::tanh}));
  expect_near_all(out, tanh_form, 1e-6);
  ASSERT_TRUE(gelu({matrix(x.data(), 1, n), matrix(out.data(), 1, n), gelu_form::erf}));
  expect_near_all(out, erf_form, 1e-6);
  const auto bad = gelu({matrix(x.data(), 1, n), matrix(out.data(), 1, n - 1)});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error().message(), "out: shape [1, 6], expected [1, 7]"));
}

TEST(axial_rope, hand_computed_rotation_of_rows_and_columns) {
  // head_dim 4: pair (0, 2) turns by row * f, pair (1, 3) by column * f.
  std::vector<float> x{1, 1, 0, 0};
  const std::vector<std::int32_t> pos{1, 2};
  const std::vector<float> f{std::numbers::pi_v<float> / 2};
  ASSERT_TRUE(axial_rope(
      {contiguous(x.data(), shape3{1, 1, 4}), matrix(pos.data(), 1, 2), vector(f.data(), 1)}));
  expect_near_all(x, {0, -1, 1, 0}, 1e-6);
}

TEST(axial_rope, matches_brute_force_on_random_heads) {
  test::random_tensors rng{22};
  const std::int64_t tokens = 6, heads = 3, dim = 12;
  auto x = rng.floats(tokens * heads * dim);
  const auto pos = rng.ints(tokens * 2, 0, 9);
  const auto f = rng.floats(dim / 4, 0.01F, 1.0F);
  std::vector<double> want(x.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* in = &x[(t * heads + h) * dim];
      for (std::int64_t i = 0; i < dim / 2; ++i) {
        const std::int64_t axis = i < dim / 4 ? 0 : 1;
        const double angle = pos[t * 2 + axis] * double{f[i % (dim / 4)]};
        const double a = in[i], b = in[i + dim / 2];
        want[(t * heads + h) * dim + i] = a * std::cos(angle) - b * std::sin(angle);
        want[(t * heads + h) * dim + i + dim / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  ASSERT_TRUE(axial_rope({contiguous(x.data(), shape3{tokens, heads, dim}),
                          matrix(pos.data(), tokens, 2), vector(f.data(), dim / 4)}));
  expect_near_all(x, want, 1e-5);
}

TEST(axial_rope, refuses_head_dim_not_a_multiple_of_four_and_negative_positions) {
  std::vector<float> x(6, 1.0F);
  const std::vector<std::int32_t> pos{0, -1};
  const std::vector<float> f{1.0F};
  const auto odd = axial_rope(
      {contiguous(x.data(), shape3{1, 1, 6}), matrix(pos.data(), 1, 2), vector(f.data(), 1)});
  ASSERT_FALSE(odd);
  EXPECT_TRUE(contains(odd.error().message(), "head_dim 6 is not a multiple of 4"));
  const auto negative = axial_rope(
      {contiguous(x.data(), shape3{1, 1, 4}), matrix(pos.data(), 1, 2), vector(f.data(), 1)});
  ASSERT_FALSE(negative);
  EXPECT_TRUE(contains(negative.error().message(), "positions[0, 1] = -1 is negative"));
  EXPECT_EQ(x, std::vector<float>(6, 1.0F));
}

// Brute-force attention inside segments, in double, from a fused [T, 3, H, D]
// buffer (q, k, v of each token side by side).
std::vector<double> reference_attention(const std::vector<float>& qkv,
                                        const std::vector<std::int32_t>& cu, std::int64_t heads,
                                        std::int64_t dim) {
  const std::int64_t tokens = cu.back();
  const auto at = [&](std::int64_t t, std::int64_t which, std::int64_t h, std::int64_t d) {
    return double{qkv[((t * 3 + which) * heads + h) * dim + d]};
  };
  std::vector<double> out(static_cast<std::size_t>(tokens * heads * dim));
  for (std::size_t s = 0; s + 1 < cu.size(); ++s) {
    for (std::int64_t i = cu[s]; i < cu[s + 1]; ++i) {
      for (std::int64_t h = 0; h < heads; ++h) {
        std::vector<double> w;
        double max = -1e300, sum = 0;
        for (std::int64_t j = cu[s]; j < cu[s + 1]; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < dim; ++d)
            dot += at(i, 0, h, d) * at(j, 1, h, d);
          w.push_back(dot / std::sqrt(double(dim)));
          max = std::max(max, w.back());
        }
        for (auto& e : w)
          sum += (e = std::exp(e - max));
        for (std::int64_t d = 0; d < dim; ++d) {
          double acc = 0;
          for (std::int64_t j = cu[s]; j < cu[s + 1]; ++j)
            acc += w[static_cast<std::size_t>(j - cu[s])] / sum * at(j, 2, h, d);
          out[static_cast<std::size_t>((i * heads + h) * dim + d)] = acc;
        }
      }
    }
  }
  return out;
}

struct fused_qkv {
  std::vector<float> data;
  std::int64_t tokens, heads, dim;
  [[nodiscard]] view<const float, 3> part(std::int64_t which) const {
    return {data.data() + which * heads * dim, {tokens, heads, dim}, {3 * heads * dim, dim, 1}};
  }
};

TEST(segment_attention, matches_brute_force_on_strided_views_of_a_fused_buffer) {
  test::random_tensors rng{23};
  const std::vector<std::int32_t> cu{0, 3, 3, 8, 9};  // an empty and a one-token segment
  const std::int64_t tokens = 9, heads = 2, dim = 8;
  const fused_qkv qkv{rng.floats(tokens * 3 * heads * dim, -2, 2), tokens, heads, dim};
  auto out = test::poisoned(static_cast<std::size_t>(tokens * heads * dim));
  ASSERT_TRUE(segment_attention({qkv.part(0), qkv.part(1), qkv.part(2), cu,
                                 contiguous(out.data(), shape3{tokens, heads, dim})}));
  expect_near_all(out, reference_attention(qkv.data, cu, heads, dim));

  // The caller's scratch gives the same bits as the kernel's own.
  std::vector<float> scores(25);
  auto again = test::poisoned(out.size());
  ASSERT_TRUE(
      segment_attention({qkv.part(0), qkv.part(1), qkv.part(2), cu,
                         contiguous(again.data(), shape3{tokens, heads, dim}), 0.0F, scores}));
  EXPECT_EQ(again, out);
}

TEST(segment_attention, tokens_never_see_another_segment) {
  test::random_tensors rng{24};
  const std::vector<std::int32_t> cu{0, 4, 10};
  const std::int64_t tokens = 10, heads = 2, dim = 4;
  fused_qkv qkv{rng.floats(tokens * 3 * heads * dim), tokens, heads, dim};
  const auto run = [&qkv, &cu]() {
    std::vector<float> out(static_cast<std::size_t>(qkv.tokens * qkv.heads * qkv.dim));
    EXPECT_TRUE(
        segment_attention({qkv.part(0), qkv.part(1), qkv.part(2), cu,
                           contiguous(out.data(), shape3{qkv.tokens, qkv.heads, qkv.dim})}));
    return out;
  };
  const auto before = run();
  for (std::size_t i = static_cast<std::size_t>(4 * 3 * heads * dim); i < qkv.data.size(); ++i)
    qkv.data[i] += 1.0F;  // the second segment changes
  const auto after = run();
  const auto first = static_cast<std::ptrdiff_t>(4 * heads * dim);
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + first, after.begin()));
  EXPECT_FALSE(std::equal(before.begin() + first, before.end(), after.begin() + first));
}

TEST(segment_attention, bad_segments_scratch_and_overlap_are_errors) {
  const std::int64_t tokens = 4, heads = 1, dim = 4;
  const fused_qkv qkv{std::vector<float>(tokens * 3 * heads * dim, 0.5F), tokens, heads, dim};
  auto out = test::poisoned(static_cast<std::size_t>(tokens * heads * dim));
  const auto ov = contiguous(out.data(), shape3{tokens, heads, dim});
  const auto message = [&](std::vector<std::int32_t> cu, std::span<float> scores) {
    const auto r = segment_attention({qkv.part(0), qkv.part(1), qkv.part(2), cu, ov, 0.0F, scores});
    return r ? std::string{"<ok>"} : r.error().message();
  };
  EXPECT_TRUE(contains(message({0, 3}, {}), "must start at 0 and end at the token count 4"));
  EXPECT_TRUE(contains(message({1, 4}, {}), "must start at 0"));
  EXPECT_TRUE(contains(message({0, 3, 2, 4}, {}), "cu_seqlens[2] = 2 is below the previous"));
  std::vector<float> small(8);
  EXPECT_TRUE(contains(message({0, 4}, small), "the longest segment (4 tokens) needs 16"));
  for (const float v : out)
    EXPECT_TRUE(std::isnan(v));
  const view<float, 3> onto_q{
      const_cast<float*>(qkv.data.data()), {tokens, heads, dim}, {3 * dim, dim, 1}};
  const auto aliased = segment_attention(
      {qkv.part(0), qkv.part(1), qkv.part(2), std::vector<std::int32_t>{0, 4}, onto_q});
  ASSERT_FALSE(aliased);
  EXPECT_TRUE(contains(aliased.error().message(), "out: overlaps q, k or v"));
}

}  // namespace
}  // namespace mstar::kernels
