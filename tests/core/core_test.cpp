#include <bit>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

#include "core/dtype.hpp"
#include "core/hex.hpp"
#include "core/result.hpp"

namespace mstar {
namespace {

TEST(hex, round_trips_every_byte_value) {
  std::vector<std::uint8_t> all(256);
  for (int i = 0; i < 256; ++i)
    all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  const auto text = to_hex(all);
  EXPECT_EQ(text.substr(0, 8), "00010203");
  EXPECT_EQ(text.substr(text.size() - 4), "feff");
  EXPECT_EQ(from_hex(text).value(), all);
  EXPECT_EQ(from_hex("ABcd").value(), (std::vector<std::uint8_t>{0xab, 0xcd}));
}

TEST(hex, rejects_odd_length_and_non_digits_naming_the_position) {
  auto odd = from_hex("abc");
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.error().code(), errc::parse_error);
  EXPECT_NE(odd.error().message().find("odd length 3"), std::string::npos);
  auto bad = from_hex("00zz");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("position 2"), std::string::npos);
}

TEST(dtype, has_sizes_and_names_and_parses_torch_spellings) {
  EXPECT_EQ(size_of(dtype::float32), 4u);
  EXPECT_EQ(size_of(dtype::bfloat16), 2u);
  EXPECT_EQ(size_of(dtype::float16), 2u);
  EXPECT_EQ(to_string(dtype::bfloat16), "bfloat16");
  EXPECT_EQ(parse_dtype("torch.bfloat16").value(), dtype::bfloat16);
  EXPECT_EQ(parse_dtype("half").value(), dtype::float16);
  EXPECT_EQ(parse_dtype("float").value(), dtype::float32);
  for (auto name : {"float33", "nn", "Tensor", "", "int8"}) {
    auto r = parse_dtype(name);
    ASSERT_FALSE(r.has_value()) << name;
    EXPECT_NE(r.error().message().find(std::string{"'"} + name + "'"), std::string::npos);
  }
}

TEST(bf16_bits, round_to_nearest_even_saturate_to_inf_and_keep_nan_quiet) {
  const auto from_bits = [](std::uint32_t bits) { return std::bit_cast<float>(bits); };
  EXPECT_EQ(float_to_bf16_bits(1.0F), 0x3f80U);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f808000U)), 0x3f80U);  // tie, even below: down
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f818000U)), 0x3f82U);  // tie, odd below: up
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f808001U)), 0x3f81U);  // past the tie: up
  EXPECT_EQ(float_to_bf16_bits(-0.0F), 0x8000U);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80U);  // rounds to inf
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7f800001U)), 0x7fc0U);  // signalling NaN comes out quiet
  EXPECT_EQ(bf16_bits_to_float(0x3f82U), 1.015625F);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
}

TEST(result, carries_a_value_or_an_error_with_context) {
  result<int> ok = 3;
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 3);
  result<int> bad = make_error(errc::out_of_range, "index 7 is past 3");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().with_context("window").to_string(),
            "out_of_range: window: index 7 is past 3");
  result<void> fine;
  EXPECT_TRUE(fine);
  result<void> failed = make_error(errc::invalid_argument, "no");
  EXPECT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), errc::invalid_argument);
}

}  // namespace
}  // namespace mstar
