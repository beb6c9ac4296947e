// The NCCL group's id as a launcher carries it: hex out and back, and the
// hex a person or a script could get wrong. No NCCL and no GPU needed.
#include "parallel/nccl_unique_id.hpp"

#include <cctype>
#include <gtest/gtest.h>
#include <string>
#include <utility>

namespace mstar::parallel {
namespace {

nccl_unique_id counting_id() {
  nccl_unique_id id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i)
    id.bytes[i] = static_cast<unsigned char>(i * 37 + 11);  // every nibble value appears
  return id;
}

TEST(nccl_unique_id, hex_round_trips_every_byte) {
  const nccl_unique_id id = counting_id();
  const std::string hex = id.to_hex();
  ASSERT_EQ(hex.size(), 256U);
  EXPECT_EQ(hex.substr(0, 6), "0b3055");  // 11, 48, 85: two digits a byte, in order
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  auto back = nccl_unique_id::from_hex(hex);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, id);
}

TEST(nccl_unique_id, from_hex_accepts_upper_case) {
  const nccl_unique_id id = counting_id();
  std::string hex = id.to_hex();
  for (char& c : hex)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto back = nccl_unique_id::from_hex(hex);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, id);
}

TEST(nccl_unique_id, a_default_id_is_all_zero_hex) {
  EXPECT_EQ(nccl_unique_id{}.to_hex(), std::string(256, '0'));
}

TEST(nccl_unique_id, from_hex_refuses_the_wrong_length_naming_it) {
  const std::string hex = counting_id().to_hex();
  for (const std::string& bad :
       {std::string{}, hex.substr(0, 255), hex + "0", hex + "\n", hex.substr(0, 128)}) {
    auto got = nccl_unique_id::from_hex(bad);
    ASSERT_FALSE(got.has_value()) << "length " << bad.size();
    EXPECT_EQ(got.error().code(), errc::parse_error);
    EXPECT_NE(got.error().message().find("expected 256 hex digits"), std::string::npos)
        << got.error().message();
    EXPECT_NE(got.error().message().find("got " + std::to_string(bad.size()) + " characters"),
              std::string::npos)
        << got.error().message();
  }
}

TEST(nccl_unique_id, from_hex_refuses_a_character_that_is_not_hex_naming_its_offset) {
  const std::string hex = counting_id().to_hex();
  for (const auto& [offset, c] : {std::pair{0U, 'g'}, std::pair{17U, ' '}, std::pair{254U, 'x'},
                                  std::pair{255U, '\0'}, std::pair{100U, '-'}}) {
    std::string bad = hex;
    bad[offset] = c;
    auto got = nccl_unique_id::from_hex(bad);
    ASSERT_FALSE(got.has_value()) << "offset " << offset;
    EXPECT_EQ(got.error().code(), errc::parse_error);
    EXPECT_NE(got.error().message().find("at position " + std::to_string(offset) + " "),
              std::string::npos)
        << got.error().message();
  }
}

}  // namespace
}  // namespace mstar::parallel
