#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/result.hpp"

namespace mstar {

/// Element types a pool block or a kernel operand may have.
enum class dtype : std::uint8_t { float32, bfloat16, float16 };

/// Bytes per element.
[[nodiscard]] constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::float32:
      return 4;
    case dtype::bfloat16:
    case dtype::float16:
      return 2;
  }
  return 0;
}

/// float32 to bfloat16 bits, rounding to nearest even; a NaN stays a NaN,
/// made quiet. Every host bf16 store follows it (KV arenas, kernel outputs,
/// weights for the device) and the CUDA kernels round the same way
/// (kernels/cuda/internal/common.cuh), so CPU and device results compare bit
/// for bit.
[[nodiscard]] constexpr std::uint16_t float_to_bf16_bits(float f) noexcept {
  auto bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffU) > 0x7f800000U)
    return static_cast<std::uint16_t>((bits >> 16) | 0x40U);
  bits += 0x7fffU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>(bits >> 16);
}

/// bfloat16 bits to float32 (exact: bfloat16 is float32's top half).
[[nodiscard]] constexpr float bf16_bits_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// Canonical name: "float32", "bfloat16" or "float16".
[[nodiscard]] std::string_view to_string(dtype t) noexcept;

/// The dtype named by `name`: a canonical name, a torch alias ("float",
/// "half") or the same with a "torch." prefix. Anything else is an error that
/// names the text and the accepted names.
[[nodiscard]] result<dtype> parse_dtype(std::string_view name);

}  // namespace mstar
