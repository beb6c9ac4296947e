#include "kernels/math.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

#include "tests/kernels/random_tensors.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

using shape1 = std::array<std::int64_t, 1>;
using shape2 = std::array<std::int64_t, 2>;
constexpr float inf = std::numeric_limits<float>::infinity();

TEST(embedding, copies_the_row_of_each_id) {
  test::random_tensors rng{50};
  const auto table = rng.floats(10 * 6);
  const auto ids = rng.ints(8, 0, 9);
  auto out = test::poisoned(8 * 6);
  ASSERT_TRUE(embedding({contiguous(ids.data(), shape1{8}), contiguous(table.data(), shape2{10, 6}),
                         contiguous(out.data(), shape2{8, 6})}));
  for (std::size_t t = 0; t < 8; ++t) {
    for (std::size_t h = 0; h < 6; ++h) {
      ASSERT_EQ(out[t * 6 + h], table[static_cast<std::size_t>(ids[t]) * 6 + h]) << t << "," << h;
    }
  }
}

TEST(embedding, an_id_out_of_range_is_an_error_and_writes_nothing) {
  const std::vector<float> table(4 * 2, 1.0F);
  for (const std::int32_t bad : {-1, 4}) {
    const std::vector<std::int32_t> ids{0, 3, bad};
    auto out = test::poisoned(3 * 2);
    const auto r =
        embedding({contiguous(ids.data(), shape1{3}), contiguous(table.data(), shape2{4, 2}),
                   contiguous(out.data(), shape2{3, 2})});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), errc::out_of_range);
    EXPECT_TRUE(test::contains(r.error().message(), "ids[2] = " + std::to_string(bad)));
    EXPECT_TRUE(std::isnan(out[0])) << "wrote before validating every id";
  }
}

TEST(activations, silu_and_relu2_match_hand_values) {
  const std::vector<float> x{-2, 0, 1, 3};
  auto out = test::poisoned(4);
  const auto xv = contiguous(x.data(), shape2{1, 4});
  const auto ov = contiguous(out.data(), shape2{1, 4});
  ASSERT_TRUE(silu({xv, ov}));
  EXPECT_NEAR(out[0], -2 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_EQ(out[1], 0.0F);
  EXPECT_NEAR(out[2], 0.7310585786, 1e-6);
  EXPECT_NEAR(out[3], 3 / (1 + std::exp(-3.0)), 1e-6);
  ASSERT_TRUE(relu2({xv, ov}));
  EXPECT_EQ(out, (std::vector<float>{0, 0, 1, 9}));
}

TEST(activations, work_in_place) {
  std::vector<float> x{-1, 2};
  const auto v = contiguous(x.data(), shape2{2, 1});
  ASSERT_TRUE(relu2({v, v}));
  EXPECT_EQ(x, (std::vector<float>{0, 4}));
}

TEST(binary_ops, add_and_mul_broadcast_a_zero_stride_row) {
  const std::vector<float> a{1, 2, 3, 4, 5, 6};
  const std::vector<float> row{10, 20, 30};
  auto out = test::poisoned(6);
  const binary_params p{contiguous(a.data(), shape2{2, 3}),
                        view<const float, 2>{row.data(), {2, 3}, {0, 1}},
                        contiguous(out.data(), shape2{2, 3})};
  ASSERT_TRUE(add(p));
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  ASSERT_TRUE(mul(p));
  EXPECT_EQ(out, (std::vector<float>{10, 40, 90, 40, 100, 180}));
}

TEST(binary_ops, reject_operands_of_different_shapes) {
  std::vector<float> a(6), b(4), out(6);
  const auto r = add({contiguous(a.data(), shape2{2, 3}), contiguous(b.data(), shape2{2, 2}),
                      contiguous(out.data(), shape2{2, 3})});
  ASSERT_FALSE(r);
  EXPECT_TRUE(test::contains(r.error().message(), "b: shape [2, 2], expected [2, 3]"));
}

TEST(softmax, matches_brute_force_and_rows_sum_to_one) {
  for (const std::uint64_t seed : {60U, 61U}) {
    test::random_tensors rng{seed};
    const auto x = rng.floats(3 * 17, -8, 8);
    auto out = test::poisoned(x.size());
    ASSERT_TRUE(
        softmax({contiguous(x.data(), shape2{3, 17}), contiguous(out.data(), shape2{3, 17})}));
    for (std::size_t t = 0; t < 3; ++t) {
      double total = 0, sum = 0;
      for (std::size_t i = 0; i < 17; ++i)
        total += std::exp(double{x[t * 17 + i]});
      for (std::size_t i = 0; i < 17; ++i) {
        ASSERT_NEAR(out[t * 17 + i], std::exp(double{x[t * 17 + i]}) / total, 1e-6);
        sum += out[t * 17 + i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(softmax, is_stable_for_large_scores_and_masks_minus_infinity_in_place) {
  std::vector<float> x{1000, 1001, -inf, -inf, -inf, -inf};
  const auto v = contiguous(x.data(), shape2{2, 3});
  ASSERT_TRUE(softmax({v, v}));
  EXPECT_NEAR(x[0], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(x[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(x[2], 0.0F);
  EXPECT_EQ((std::vector<float>{x[3], x[4], x[5]}), (std::vector<float>{0, 0, 0}))
      << "a fully masked row comes out as zeros";
}

}  // namespace
}  // namespace mstar::kernels
