#pragma once

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

/// Canonical name: "float32", "bfloat16" or "float16".
[[nodiscard]] std::string_view to_string(dtype t) noexcept;

/// The dtype named by `name`: a canonical name, a torch alias ("float",
/// "half") or the same with a "torch." prefix. Anything else is an error that
/// names the text and the accepted names.
[[nodiscard]] result<dtype> parse_dtype(std::string_view name);

}  // namespace mstar
