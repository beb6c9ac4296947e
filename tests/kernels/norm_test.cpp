#include <cmath>
#include <gtest/gtest.h>
#include <vector>

#include "kernels/math.hpp"
#include "tests/kernels/random_tensors.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

using shape2 = std::array<std::int64_t, 2>;

// Brute force of both norms in double: h = x * silu(z) (or x), then each group
// of `group` channels divided by its root mean square, times w.
std::vector<float> reference_norm(const std::vector<float>& x, const std::vector<float>* z,
                                  const std::vector<float>& w, std::size_t rows, std::size_t group,
                                  double eps) {
  const std::size_t cols = w.size();
  std::vector<float> out(x.size());
  for (std::size_t t = 0; t < rows; ++t) {
    for (std::size_t g = 0; g < cols; g += group) {
      std::vector<double> h(group);
      double mean_sq = 0;
      for (std::size_t c = 0; c < group; ++c) {
        const std::size_t i = t * cols + g + c;
        const double gate = z == nullptr ? 1.0 : (*z)[i] / (1.0 + std::exp(-double{(*z)[i]}));
        h[c] = x[i] * gate;
        mean_sq += h[c] * h[c] / static_cast<double>(group);
      }
      for (std::size_t c = 0; c < group; ++c) {
        out[t * cols + g + c] = static_cast<float>(h[c] / std::sqrt(mean_sq + eps) * w[g + c]);
      }
    }
  }
  return out;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
  }
}

TEST(rms_norm, matches_brute_force_on_random_rows) {
  for (const std::uint64_t seed : {11U, 12U}) {
    test::random_tensors rng{seed};
    const std::size_t rows = 5, hidden = 48;
    const auto x = rng.floats(rows * hidden, -3, 3);
    const auto w = rng.floats(hidden, 0.5F, 1.5F);
    auto out = test::poisoned(x.size());
    ASSERT_TRUE(rms_norm({contiguous(x.data(), shape2{5, 48}),
                          contiguous(w.data(), std::array<std::int64_t, 1>{48}),
                          contiguous(out.data(), shape2{5, 48}), 1e-5F}));
    expect_near_all(out, reference_norm(x, nullptr, w, rows, hidden, 1e-5));
  }
}

TEST(rms_norm, hand_computed_row_and_in_place_and_strided_operands) {
  // Row [3, 4]: mean square 12.5, so the row divides by sqrt(12.5).
  std::vector<float> wide{3, 99, 4, 99};  // x is every other element
  const std::vector<float> w{1, 2};
  const view<float, 2> x{wide.data(), {1, 2}, {4, 2}};
  ASSERT_TRUE(rms_norm({x, contiguous(w.data(), std::array<std::int64_t, 1>{2}), x, 0.0F}));
  EXPECT_NEAR(wide[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(wide[2], 2 * 4 / std::sqrt(12.5), 1e-6);
  EXPECT_EQ(wide[1], 99);
  EXPECT_EQ(wide[3], 99);
}

TEST(rms_norm, rejects_a_weight_of_the_wrong_size) {
  std::vector<float> x(6), w(2);
  const auto xv = contiguous(x.data(), shape2{2, 3});
  const auto bad = rms_norm({xv, contiguous(w.data(), std::array<std::int64_t, 1>{2}), xv});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(test::contains(bad.error().message(), "weight: shape [2], expected [3]"));
}

TEST(gated_rms_norm, matches_brute_force_per_group_with_and_without_gate) {
  for (const std::uint64_t seed : {21U, 22U, 23U}) {
    test::random_tensors rng{seed};
    const std::size_t rows = 4, channels = 32;
    const auto x = rng.floats(rows * channels, -2, 2);
    const auto z = rng.floats(rows * channels, -4, 4);
    const auto w = rng.floats(channels, 0.5F, 1.5F);
    const shape2 shape{4, 32};
    for (const std::size_t group : {8U, 32U}) {
      SCOPED_TRACE("group_size = " + std::to_string(group));
      auto out = test::poisoned(x.size());
      gated_rms_norm_params p{contiguous(x.data(), shape),
                              contiguous(z.data(), shape),
                              contiguous(w.data(), std::array<std::int64_t, 1>{32}),
                              contiguous(out.data(), shape),
                              static_cast<std::int64_t>(group),
                              1e-6F};
      ASSERT_TRUE(gated_rms_norm(p));
      expect_near_all(out, reference_norm(x, &z, w, rows, group, 1e-6));
      p.gate = {};
      ASSERT_TRUE(gated_rms_norm(p));
      expect_near_all(out, reference_norm(x, nullptr, w, rows, group, 1e-6));
    }
  }
}

TEST(gated_rms_norm, hand_computed_groups_in_place) {
  // No gate, groups of 2: [3, 4] divides by sqrt(12.5); [1, 1] stays.
  std::vector<float> x{3, 4, 1, 1};
  const std::vector<float> w{1, 1, 1, 2};
  const auto xv = contiguous(x.data(), shape2{1, 4});
  ASSERT_TRUE(
      gated_rms_norm({xv, {}, contiguous(w.data(), std::array<std::int64_t, 1>{4}), xv, 2, 0.0F}));
  EXPECT_NEAR(x[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(x[1], 4 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(x[2], 1, 1e-6);
  EXPECT_NEAR(x[3], 2, 1e-6);
}

TEST(gated_rms_norm, a_group_size_that_does_not_divide_the_channels_is_an_error) {
  std::vector<float> x(6), w(6);
  const auto xv = contiguous(x.data(), shape2{1, 6});
  const auto bad =
      gated_rms_norm({xv, {}, contiguous(w.data(), std::array<std::int64_t, 1>{6}), xv, 4, 1e-6F});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(test::contains(bad.error().message(), "group_size: 4 does not divide 6"));
}

}  // namespace
}  // namespace mstar::kernels
