#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar::models::internal {

/// Builds the loader's messages: "<file>: field '<path>': <reason>".
struct tokenizer_json_reporter {
  std::string label;

  [[nodiscard]] error bad(std::string_view field, std::string_view reason) const {
    return make_error(errc::parse_error, fmt::format("{}: field '{}': {}", label, field, reason));
  }
  [[nodiscard]] error unsupported(std::string_view field, std::string_view reason) const {
    return make_error(errc::unsupported, fmt::format("{}: field '{}': {}", label, field, reason));
  }
};

/// The "type" of a JSON object, or "" when it has none (or is no object).
[[nodiscard]] inline std::string type_of(const nlohmann::json& node) {
  const auto it = node.is_object() ? node.find("type") : node.end();
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

/// A boolean field of `node` that may be absent or null (then `fallback`); any
/// other type is an error naming `field`.
[[nodiscard]] inline result<bool> read_flag(const tokenizer_json_reporter& r,
                                            const nlohmann::json& node, const char* key,
                                            bool fallback, std::string_view field) {
  const auto it = node.find(key);
  if (it == node.end() || it->is_null())
    return fallback;
  if (!it->is_boolean())
    return r.bad(field, fmt::format("'{}' is not true or false", key));
  return it->get<bool>();
}

}  // namespace mstar::models::internal
