#include "core/dtype.hpp"

#include <fmt/format.h>

#include "core/untrusted_json.hpp"

namespace mstar {

std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::float32:
      return "float32";
    case dtype::bfloat16:
      return "bfloat16";
    case dtype::float16:
      return "float16";
  }
  return "unknown";
}

result<dtype> parse_dtype(std::string_view name) {
  std::string_view bare = name;
  if (bare.starts_with("torch."))
    bare.remove_prefix(6);
  if (bare == "float32" || bare == "float")
    return dtype::float32;
  if (bare == "bfloat16")
    return dtype::bfloat16;
  if (bare == "float16" || bare == "half")
    return dtype::float16;
  return make_error(errc::invalid_argument,
                    fmt::format("'{}' is not a supported dtype (float32, bfloat16, float16)",
                                text_excerpt(name)));
}

}  // namespace mstar
