#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace mstar {

/// Lowercase hex of `bytes`, two characters per byte.
[[nodiscard]] std::string to_hex(std::span<const std::uint8_t> bytes);

/// Bytes of a hex string (either case). Fails naming the first offending
/// position when the length is odd or a character is not a hex digit.
[[nodiscard]] result<std::vector<std::uint8_t>> from_hex(std::string_view text);

}  // namespace mstar
