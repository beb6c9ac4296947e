#pragma once

#include <optional>
#include <type_traits>

namespace mstar {

/// `a * b`, or nullopt when it overflows `Int`.
template <class Int>
requires std::is_integral_v<Int>
[[nodiscard]] constexpr std::optional<Int> checked_mul(Int a, Int b) noexcept {
  Int out{};
  if (__builtin_mul_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

/// `a + b`, or nullopt when it overflows `Int`.
template <class Int>
requires std::is_integral_v<Int>
[[nodiscard]] constexpr std::optional<Int> checked_add(Int a, Int b) noexcept {
  Int out{};
  if (__builtin_add_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

}  // namespace mstar
