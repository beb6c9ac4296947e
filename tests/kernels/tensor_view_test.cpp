#include "kernels/tensor_view.hpp"

#include <array>
#include <gtest/gtest.h>
#include <numeric>
#include <vector>

#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

TEST(tensor_view, contiguous_views_index_row_major) {
  std::vector<int> data(24);
  std::iota(data.begin(), data.end(), 0);
  const auto v = contiguous(data.data(), std::array<std::int64_t, 3>{2, 3, 4});
  EXPECT_EQ(v.strides, (std::array<std::int64_t, 3>{12, 4, 1}));
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v(1, 2, 3), 23);
  EXPECT_EQ(v(0, 1, 2), 6);
  v(1, 0, 0) = -5;
  EXPECT_EQ(data[12], -5);
}

TEST(tensor_view, strided_and_broadcast_views_address_through_their_strides) {
  std::vector<float> data{0, 1, 2, 3, 4, 5, 6, 7};
  const view<float, 2> columns{data.data() + 1, {2, 2}, {4, 2}};  // elements 1, 3, 5, 7
  EXPECT_FALSE(columns.is_contiguous());
  EXPECT_EQ(columns(0, 1), 3.0F);
  EXPECT_EQ(columns(1, 0), 5.0F);
  const view<const float, 2> row{data.data(), {3, 4}, {0, 1}};  // one row, repeated
  EXPECT_EQ(row(2, 3), 3.0F);
  const view<const float, 2> readonly = columns;  // mutable converts to const
  EXPECT_EQ(readonly(1, 1), 7.0F);
}

TEST(tensor_view, a_null_view_is_absent) {
  const view<const float, 1> absent{};
  EXPECT_FALSE(absent);
  float x = 1;
  EXPECT_TRUE((view<float, 1>{&x, {1}, {1}}));
}

TEST(tensor_view, check_view_accepts_matching_shapes_and_wildcards) {
  std::vector<float> data(6);
  const auto v = contiguous(data.data(), std::array<std::int64_t, 2>{2, 3});
  EXPECT_TRUE(check_view(v, "x", {2, 3}));
  EXPECT_TRUE(check_view(v, "x", {any_extent, 3}));
  EXPECT_TRUE(check_view(view<const float, 2>{}, "bias", {0, 0}));
}

TEST(tensor_view, check_view_names_the_operand_and_both_shapes) {
  std::vector<float> data(6);
  const auto v = contiguous(data.data(), std::array<std::int64_t, 2>{2, 3});
  const auto wrong = check_view(v, "weight", {any_extent, 4});
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code(), errc::invalid_argument);
  EXPECT_TRUE(test::contains(wrong.error().message(), "weight: shape [2, 3], expected [*, 4]"));

  const view<float, 1> null_data{nullptr, {3}, {1}};
  const auto null = check_view(null_data, "ids", {3});
  ASSERT_FALSE(null);
  EXPECT_TRUE(test::contains(null.error().message(), "ids: null data"));

  const view<float, 1> backwards{data.data() + 5, {3}, {-1}};
  const auto negative = check_view(backwards, "x", {3});
  ASSERT_FALSE(negative);
  EXPECT_TRUE(test::contains(negative.error().message(), "negative strides"));
}

}  // namespace
}  // namespace mstar::kernels
