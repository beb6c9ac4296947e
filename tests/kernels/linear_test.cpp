#include <cmath>
#include <gtest/gtest.h>
#include <vector>

#include "kernels/math.hpp"
#include "tests/kernels/random_tensors.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

using shape1 = std::array<std::int64_t, 1>;
using shape2 = std::array<std::int64_t, 2>;

// out[t][n] = sum_k x[t][k] * w[n][k] (+ b[n]), in double.
std::vector<double> naive(const std::vector<float>& x, const std::vector<float>& w,
                          const std::vector<float>* b, std::size_t rows, std::size_t cols,
                          std::size_t inner) {
  std::vector<double> out(rows * cols);
  for (std::size_t t = 0; t < rows; ++t) {
    for (std::size_t n = 0; n < cols; ++n) {
      double sum = b == nullptr ? 0.0 : (*b)[n];
      for (std::size_t k = 0; k < inner; ++k)
        sum += double{x[t * inner + k]} * w[n * inner + k];
      out[t * cols + n] = sum;
    }
  }
  return out;
}

struct linear_case {
  std::size_t rows, cols, inner;
  bool bias;
};

TEST(linear, matches_a_naive_triple_loop) {
  std::uint64_t seed = 30;
  for (const auto c : {linear_case{1, 7, 5, false}, linear_case{7, 16, 33, true},
                       linear_case{64, 40, 128, true}, linear_case{3, 1, 1, false}}) {
    test::random_tensors rng{++seed};
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.inner) + " * " +
                 std::to_string(c.cols) + "x" + std::to_string(c.inner) + "^T");
    const auto x = rng.floats(c.rows * c.inner);
    const auto w = rng.floats(c.cols * c.inner);
    const auto b = rng.floats(c.cols);
    auto out = test::poisoned(c.rows * c.cols);
    const auto t = static_cast<std::int64_t>(c.rows);
    const auto n = static_cast<std::int64_t>(c.cols);
    const auto k = static_cast<std::int64_t>(c.inner);
    const linear_params p{contiguous(x.data(), shape2{t, k}), contiguous(w.data(), shape2{n, k}),
                          c.bias ? contiguous(b.data(), shape1{n}) : view<const float, 1>{},
                          contiguous(out.data(), shape2{t, n})};
    ASSERT_TRUE(linear(p));
    const auto want = naive(x, w, c.bias ? &b : nullptr, c.rows, c.cols, c.inner);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], want[i], 1e-5 * (1 + std::sqrt(static_cast<double>(c.inner))))
          << "element " << i;
    }
  }
}

TEST(linear, honours_row_strides_of_every_operand) {
  test::random_tensors rng{40};
  // x is the left 3 columns of a 4x5 buffer; out the left 2 columns of 4x3.
  const auto x_buf = rng.floats(4 * 5);
  const auto w = rng.floats(2 * 3);
  std::vector<float> out_buf(4 * 3, -7.0F);
  const view<const float, 2> x{x_buf.data(), {4, 3}, {5, 1}};
  const view<float, 2> out{out_buf.data(), {4, 2}, {3, 1}};
  ASSERT_TRUE(linear({x, contiguous(w.data(), shape2{2, 3}), {}, out}));
  for (std::int64_t t = 0; t < 4; ++t) {
    for (std::int64_t n = 0; n < 2; ++n) {
      double want = 0;
      for (std::int64_t k = 0; k < 3; ++k)
        want += double{x(t, k)} * w[static_cast<std::size_t>(n * 3 + k)];
      EXPECT_NEAR(out(t, n), want, 1e-5);
    }
    EXPECT_EQ(out_buf[static_cast<std::size_t>(t * 3 + 2)], -7.0F) << "wrote past the view";
  }
}

TEST(linear, an_empty_inner_dimension_gives_the_bias) {
  const std::vector<float> b{1, 2};
  std::vector<float> x, w;
  auto out = test::poisoned(3 * 2);
  ASSERT_TRUE(linear({view<const float, 2>{x.data(), {3, 0}, {0, 1}},
                      view<const float, 2>{w.data(), {2, 0}, {0, 1}},
                      contiguous(b.data(), shape1{2}), contiguous(out.data(), shape2{3, 2})}));
  EXPECT_EQ(out, (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(linear, rejects_mismatched_shapes_overlap_and_non_unit_inner_strides) {
  std::vector<float> x(6), w(6), out(4);
  const auto xv = contiguous(x.data(), shape2{2, 3});
  const auto mismatch =
      linear({xv, contiguous(w.data(), shape2{3, 2}), {}, contiguous(out.data(), shape2{2, 3})});
  ASSERT_FALSE(mismatch);
  EXPECT_TRUE(test::contains(mismatch.error().message(), "weight: shape [3, 2], expected [*, 3]"));

  const auto alias =
      linear({xv, contiguous(w.data(), shape2{2, 3}), {}, contiguous(x.data(), shape2{2, 2})});
  ASSERT_FALSE(alias);
  EXPECT_TRUE(test::contains(alias.error().message(), "overlaps"));

  const view<const float, 2> column{x.data(), {2, 3}, {1, 2}};
  const auto strided = linear(
      {column, contiguous(w.data(), shape2{2, 3}), {}, contiguous(out.data(), shape2{2, 2})});
  ASSERT_FALSE(strided);
  EXPECT_TRUE(test::contains(strided.error().message(), "x: needs unit stride"));
}

}  // namespace
}  // namespace mstar::kernels
