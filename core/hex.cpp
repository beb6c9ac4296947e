#include "core/hex.hpp"

#include <fmt/format.h>

namespace mstar {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 0x0f];
  }
  return out;
}

result<std::vector<std::uint8_t>> from_hex(std::string_view text) {
  if (text.size() % 2 != 0) {
    return make_error(
        errc::parse_error,
        fmt::format("hex string has odd length {} (two digits per byte)", text.size()));
  }
  std::vector<std::uint8_t> out(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int v = hex_value(text[i]);
    if (v < 0) {
      return make_error(errc::parse_error,
                        fmt::format("'{}' at position {} is not a hex digit", text[i], i));
    }
    auto& byte = out[i / 2];
    byte = static_cast<std::uint8_t>(i % 2 == 0 ? v << 4 : byte | v);
  }
  return out;
}

}  // namespace mstar
