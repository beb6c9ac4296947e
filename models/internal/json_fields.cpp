#include "models/internal/json_fields.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "core/untrusted_json.hpp"

namespace mstar::models::internal {
namespace {

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::optional<double> non_finite_from_text(const std::string& text) {
  const std::string lower = lowercase(text);
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity")
    return inf;
  if (lower == "-inf" || lower == "-infinity")
    return -inf;
  if (lower == "nan")
    return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

// A short rendering of a bad value for messages.
std::string shown(const nlohmann::json& value) {
  return json_excerpt(value);
}

}  // namespace

std::optional<double> tolerant_number(const nlohmann::json& value) {
  if (value.is_number())
    return value.get<double>();
  if (value.is_string())
    return non_finite_from_text(value.get<std::string>());
  if (value.is_object() && value.size() == 1 && value.contains("__float__") &&
      value["__float__"].is_string()) {
    return non_finite_from_text(value["__float__"].get<std::string>());
  }
  return std::nullopt;
}

std::optional<std::int64_t> tolerant_integer(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto n = value.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(n);
  }
  if (value.is_number_integer())
    return value.get<std::int64_t>();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.0e15) {
      return static_cast<std::int64_t>(d);
    }
  }
  return std::nullopt;
}

bool json_fields::has(std::string_view key) const {
  return find(key) != nullptr;
}

bool json_fields::is_null(std::string_view key) const {
  const auto it = object_.find(key);
  return it != object_.end() && it->is_null();
}

const nlohmann::json* json_fields::find(std::string_view key) const {
  const auto it = object_.find(key);
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

result<std::int64_t> json_fields::integer(std::string_view key, std::int64_t fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr)
    return fallback;
  const auto n = tolerant_integer(*value);
  if (!n)
    return fail(key, fmt::format("expected an integer, got {}", shown(*value)));
  return *n;
}

result<std::optional<std::int64_t>> json_fields::optional_integer(
    std::string_view key, std::optional<std::int64_t> fallback) const {
  if (is_null(key))
    return std::optional<std::int64_t>{};
  if (!has(key))
    return fallback;
  auto n = integer(key, 0);
  if (!n)
    return n.error();
  return std::optional<std::int64_t>{*n};
}

result<double> json_fields::number(std::string_view key, double fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr)
    return fallback;
  const auto d = tolerant_number(*value);
  if (!d)
    return fail(key, fmt::format("expected a number, got {}", shown(*value)));
  return *d;
}

result<bool> json_fields::boolean(std::string_view key, bool fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr)
    return fallback;
  if (!value->is_boolean())
    return fail(key, fmt::format("expected true or false, got {}", shown(*value)));
  return value->get<bool>();
}

result<std::string> json_fields::string(std::string_view key, std::string fallback) const {
  const nlohmann::json* value = find(key);
  if (value == nullptr)
    return fallback;
  if (!value->is_string())
    return fail(key, fmt::format("expected a string, got {}", shown(*value)));
  return value->get<std::string>();
}

error json_fields::fail(std::string_view key, std::string_view reason, errc code) const {
  return make_error(code, fmt::format("{}: field '{}{}': {}", label_, key_prefix_, key, reason));
}

}  // namespace mstar::models::internal
