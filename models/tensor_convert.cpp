#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "models/safetensors.hpp"

namespace mstar::models {
namespace {

template <class Widen>
void widen_all(std::span<const std::byte> bytes, std::span<float> out, Widen widen) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    out[i] = widen(bits);
  }
}

}  // namespace

float float16_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000U) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1FU;
  const std::uint32_t mantissa = bits & 0x3FFU;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) {  // infinity or NaN, payload kept
    return std::bit_cast<float>(sign | 0x7F800000U | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

result<void> to_float32(const tensor_view& tensor, std::span<float> out) {
  if (!tensor.type) {
    return make_error(errc::unsupported,
                      fmt::format("tensor '{}': unsupported dtype {} (supported: F32, BF16, F16)",
                                  tensor.name, tensor.dtype_name));
  }
  const auto numel = static_cast<std::size_t>(tensor.numel());
  if (out.size() != numel || tensor.bytes.size() != numel * size_of(*tensor.type)) {
    return make_error(errc::invalid_argument,
                      fmt::format("tensor '{}': {} elements ({} bytes) do not fit an output of {}",
                                  tensor.name, numel, tensor.bytes.size(), out.size()));
  }
  switch (*tensor.type) {
    case dtype::float32:
      if (numel != 0)
        std::memcpy(out.data(), tensor.bytes.data(), numel * 4);
      return {};
    case dtype::bfloat16:
      widen_all(tensor.bytes, out, bf16_bits_to_float);
      return {};
    case dtype::float16:
      widen_all(tensor.bytes, out, float16_to_float);
      return {};
  }
  return {};
}

result<std::vector<float>> to_float32(const tensor_view& tensor) {
  std::vector<float> out(tensor.type ? static_cast<std::size_t>(tensor.numel()) : 0);
  if (auto ok = to_float32(tensor, out); !ok)
    return ok.error();
  return out;
}

}  // namespace mstar::models
