#include "parallel/nccl_unique_id.hpp"

#include <fmt/format.h>

namespace mstar::parallel {
namespace {

/// The value of hex digit `c`, or -1.
int digit_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string nccl_unique_id::to_hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (const unsigned char b : bytes) {
    out.push_back(digits[b >> 4U]);
    out.push_back(digits[b & 0xfU]);
  }
  return out;
}

result<nccl_unique_id> nccl_unique_id::from_hex(std::string_view hex) {
  if (hex.size() != 2 * size) {
    return make_error(errc::parse_error,
                      fmt::format("NCCL unique id: expected {} hex digits ({} bytes), got {} "
                                  "characters",
                                  2 * size, size, hex.size()));
  }
  nccl_unique_id id;
  for (std::size_t i = 0; i < hex.size(); ++i) {
    const int v = digit_value(hex[i]);
    if (v < 0) {
      const auto c = static_cast<unsigned char>(hex[i]);
      return make_error(
          errc::parse_error,
          fmt::format("NCCL unique id: character {} (0x{:02x}) is not a hex digit", i, c));
    }
    auto& b = id.bytes[i / 2];
    b = static_cast<unsigned char>(i % 2 == 0 ? v << 4 : b | v);
  }
  return id;
}

}  // namespace mstar::parallel
