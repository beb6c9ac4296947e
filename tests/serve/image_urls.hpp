#pragma once

// Data URLs of the fixture images (tests/fixtures/images), as a client of
// the chat endpoint sends them.

#include <cstdint>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <string>

#include "tests/support/fixtures.hpp"

namespace mstar::test {

/// The bytes of fixture image `name`.
inline std::string image_file_bytes(const std::string& name) {
  std::ifstream in{std::string{MSTAR_FIXTURES_DIR} + "/images/" + name, std::ios::binary};
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Standard padded base64 (RFC 4648).
inline std::string base64(const std::string& bytes) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t g = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size())
      g |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size())
      g |= static_cast<std::uint8_t>(bytes[i + 2]);
    out += alphabet[(g >> 18) & 63];
    out += alphabet[(g >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(g >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[g & 63] : '=';
  }
  return out;
}

/// `data:image/png;base64,...` (or jpeg) of fixture image `name`.
inline std::string data_url(const std::string& name) {
  const bool png = name.ends_with(".png");
  return std::string{"data:image/"} + (png ? "png" : "jpeg") + ";base64," +
         base64(image_file_bytes(name));
}

}  // namespace mstar::test
