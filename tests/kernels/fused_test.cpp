// The fused CPU references (add_rms_norm, activate, gated_rms_norm's bf16
// output) against the unfused kernels they stand for.
#include <cmath>
#include <gtest/gtest.h>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/math.hpp"
#include "tests/kernels/random_tensors.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

using shape1 = std::array<std::int64_t, 1>;
using shape2 = std::array<std::int64_t, 2>;

std::vector<std::uint16_t> rounded(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = float_to_bf16_bits(v[i]);
  return out;
}

// add_rms_norm is add, then rms_norm, then rounding: compare with exactly
// that sequence on a strided residual, with and without delta and each
// output combination.
TEST(add_rms_norm, equals_add_then_rms_norm_then_rounding) {
  test::random_tensors rng{31};
  const std::int64_t rows = 6, hidden = 40, stride = 48;
  const auto residual = rng.floats(static_cast<std::size_t>(rows * stride), -3, 3);
  const auto delta = rng.floats(static_cast<std::size_t>(rows * hidden), -1, 1);
  const auto w = rng.floats(static_cast<std::size_t>(hidden), 0.5F, 1.5F);
  const auto wv = contiguous(w.data(), shape1{hidden});
  for (const bool with_delta : {true, false}) {
    // The unfused sequence.
    auto want_res = residual;
    const view<float, 2> want_rv{want_res.data(), {rows, hidden}, {stride, 1}};
    if (with_delta) {
      ASSERT_TRUE(add({want_rv, contiguous(delta.data(), shape2{rows, hidden}), want_rv}));
    }
    std::vector<float> want(static_cast<std::size_t>(rows * hidden));
    ASSERT_TRUE(rms_norm({want_rv, wv, contiguous(want.data(), shape2{rows, hidden}), 1e-5F}));
    for (const int outputs : {1, 2, 3}) {  // bit 0: f32, bit 1: bf16
      SCOPED_TRACE(std::string{with_delta ? "delta" : "no delta"} + ", outputs " +
                   std::to_string(outputs));
      auto res = residual;
      auto out = test::poisoned(want.size());
      std::vector<std::uint16_t> out16(want.size(), 0xffffU);
      add_rms_norm_params p{view<float, 2>{res.data(), {rows, hidden}, {stride, 1}}, {}, wv};
      if (with_delta)
        p.delta = contiguous(delta.data(), shape2{rows, hidden});
      if ((outputs & 1) != 0)
        p.out = contiguous(out.data(), shape2{rows, hidden});
      if ((outputs & 2) != 0)
        p.out_bf16 = contiguous(out16.data(), shape2{rows, hidden});
      p.eps = 1e-5F;
      ASSERT_TRUE(add_rms_norm(p));
      EXPECT_EQ(res, want_res);  // padding between rows untouched too
      if ((outputs & 1) != 0) {
        EXPECT_EQ(out, want);
      }
      if ((outputs & 2) != 0) {
        EXPECT_EQ(out16, rounded(want));
      }
    }
  }
}

TEST(add_rms_norm, out_may_be_the_residual_itself) {
  std::vector<float> res{3, 4};  // plus delta [0, 0]: mean square 12.5
  const std::vector<float> delta{0, 0}, w{1, 2};
  const auto rv = contiguous(res.data(), shape2{1, 2});
  ASSERT_TRUE(add_rms_norm(
      {rv, contiguous(delta.data(), shape2{1, 2}), contiguous(w.data(), shape1{2}), rv, {}, 0.0F}));
  EXPECT_NEAR(res[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(res[1], 2 * 4 / std::sqrt(12.5), 1e-6);
}

TEST(add_rms_norm, refuses_no_output_and_a_self_overlapping_residual_writing_nothing) {
  std::vector<float> res{1, 2, 3, 4}, delta{1, 1, 1, 1}, w{1, 1};
  auto out = test::poisoned(4);
  const auto wv = contiguous(w.data(), shape1{2});
  const auto dv = contiguous(delta.data(), shape2{2, 2});
  const auto none = add_rms_norm({contiguous(res.data(), shape2{2, 2}), dv, wv});
  ASSERT_FALSE(none);
  EXPECT_TRUE(test::contains(none.error().message(), "neither is present"));
  // Both rows on the same two elements: the in-place add would race.
  const view<float, 2> shared{res.data(), {2, 2}, {0, 1}};
  const auto overlap = add_rms_norm({shared, dv, wv, contiguous(out.data(), shape2{2, 2})});
  ASSERT_FALSE(overlap);
  EXPECT_TRUE(test::contains(overlap.error().message(), "residual: elements overlap"));
  EXPECT_EQ(res, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(activate, equals_silu_and_relu2_with_rounded_bf16) {
  test::random_tensors rng{32};
  const std::int64_t rows = 5, cols = 37;
  const auto x = rng.floats(static_cast<std::size_t>(rows * cols), -6, 6);
  const auto xv = contiguous(x.data(), shape2{rows, cols});
  for (const auto fn : {activation::silu, activation::relu2}) {
    SCOPED_TRACE(fn == activation::silu ? "silu" : "relu2");
    std::vector<float> want(x.size());
    const auto wantv = contiguous(want.data(), shape2{rows, cols});
    ASSERT_TRUE(fn == activation::silu ? silu({xv, wantv}) : relu2({xv, wantv}));
    auto out = test::poisoned(x.size());
    std::vector<std::uint16_t> out16(x.size(), 0xffffU);
    ASSERT_TRUE(activate({xv, contiguous(out.data(), shape2{rows, cols}),
                          contiguous(out16.data(), shape2{rows, cols}), fn}));
    EXPECT_EQ(out, want);
    EXPECT_EQ(out16, rounded(want));
    // bf16 alone, and f32 in place.
    std::vector<std::uint16_t> alone(x.size(), 0xffffU);
    ASSERT_TRUE(activate({xv, {}, contiguous(alone.data(), shape2{rows, cols}), fn}));
    EXPECT_EQ(alone, out16);
    auto in_place = x;
    const auto iv = contiguous(in_place.data(), shape2{rows, cols});
    ASSERT_TRUE(activate({iv, iv, {}, fn}));
    EXPECT_EQ(in_place, want);
  }
  const auto none = activate({xv, {}, {}, activation::relu2});
  ASSERT_FALSE(none);
  EXPECT_TRUE(test::contains(none.error().message(), "neither is present"));
}

TEST(activate, with_up_equals_the_activation_then_mul_and_checks_up) {
  test::random_tensors rng{34};
  const std::int64_t rows = 4, cols = 9;
  const auto x = rng.floats(static_cast<std::size_t>(rows * cols), -6, 6);
  const auto u = rng.floats(x.size(), -3, 3);
  const auto xv = contiguous(x.data(), shape2{rows, cols});
  const auto uv = contiguous(u.data(), shape2{rows, cols});
  std::vector<float> act(x.size()), want(x.size());
  const auto av = contiguous(act.data(), shape2{rows, cols});
  ASSERT_TRUE(silu({xv, av}));
  ASSERT_TRUE(mul({av, uv, contiguous(want.data(), shape2{rows, cols})}));
  auto out = test::poisoned(x.size());
  activation_params p{xv, contiguous(out.data(), shape2{rows, cols}), {}, activation::silu, uv};
  ASSERT_TRUE(activate(p));
  EXPECT_EQ(out, want);
  p.up = contiguous(u.data(), shape2{rows, cols - 1});
  const auto bad = activate(p);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(test::contains(bad.error().message(), "up")) << bad.error().message();
}

TEST(gated_rms_norm, bf16_output_is_the_rounded_f32_output_alone_or_beside_it) {
  test::random_tensors rng{33};
  const std::int64_t rows = 3, channels = 32;
  const auto x = rng.floats(static_cast<std::size_t>(rows * channels), -2, 2);
  const auto z = rng.floats(x.size(), -4, 4);
  const auto w = rng.floats(static_cast<std::size_t>(channels), 0.5F, 1.5F);
  const shape2 shape{rows, channels};
  std::vector<float> want(x.size());
  gated_rms_norm_params p{contiguous(x.data(), shape),
                          contiguous(z.data(), shape),
                          contiguous(w.data(), shape1{channels}),
                          contiguous(want.data(), shape),
                          8,
                          1e-6F};
  ASSERT_TRUE(gated_rms_norm(p));
  auto out = test::poisoned(x.size());
  std::vector<std::uint16_t> both(x.size(), 0xffffU), alone(x.size(), 0xffffU);
  p.out = contiguous(out.data(), shape);
  p.out_bf16 = contiguous(both.data(), shape);
  ASSERT_TRUE(gated_rms_norm(p));
  EXPECT_EQ(out, want);
  EXPECT_EQ(both, rounded(want));
  p.out = {};
  p.out_bf16 = contiguous(alone.data(), shape);
  ASSERT_TRUE(gated_rms_norm(p));
  EXPECT_EQ(alone, both);
  p.out_bf16 = {};
  const auto none = gated_rms_norm(p);
  ASSERT_FALSE(none);
  EXPECT_TRUE(test::contains(none.error().message(), "neither is present"));
}

}  // namespace
}  // namespace mstar::kernels
