#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar::models::internal {

/// Reads typed fields out of a JSON object, tolerating the spellings Hugging
/// Face configs carry, and names the field in every error.
///
/// A missing field or an explicit null takes the caller's default.
class json_fields {
 public:
  /// Reads fields of `object`; `label` ("config.json") prefixes messages and
  /// `key_prefix` ("vision_config.") the field names in them, for an object
  /// nested in the file. The object must outlive the reader.
  json_fields(const nlohmann::json& object, std::string label, std::string key_prefix = {})
      : object_(object), label_(std::move(label)), key_prefix_(std::move(key_prefix)) {}

  /// Whether `key` is present and not null.
  [[nodiscard]] bool has(std::string_view key) const;

  /// Whether `key` is present with an explicit null.
  [[nodiscard]] bool is_null(std::string_view key) const;

  /// The raw value of `key`, or nullptr when absent or null.
  [[nodiscard]] const nlohmann::json* find(std::string_view key) const;

  /// An integer (a float with an integral value is accepted: `4096.0`).
  [[nodiscard]] result<std::int64_t> integer(std::string_view key, std::int64_t fallback) const;

  /// An integer that may be null: absent keeps `fallback`, null gives nullopt.
  [[nodiscard]] result<std::optional<std::int64_t>> optional_integer(
      std::string_view key, std::optional<std::int64_t> fallback) const;

  /// A number; non-finite values may be written as a number, a string
  /// ("inf", "-Infinity", "nan", any case) or an object {"__float__": "..."}.
  [[nodiscard]] result<double> number(std::string_view key, double fallback) const;

  /// A JSON boolean.
  [[nodiscard]] result<bool> boolean(std::string_view key, bool fallback) const;

  /// A JSON string.
  [[nodiscard]] result<std::string> string(std::string_view key, std::string fallback) const;

  /// An error naming `key` (with an optional element suffix such as "[2]").
  [[nodiscard]] error fail(std::string_view key, std::string_view reason,
                           errc code = errc::invalid_argument) const;

 private:
  const nlohmann::json& object_;
  std::string label_;
  std::string key_prefix_;
};

/// `value` as a double under the tolerant rules of json_fields::number.
[[nodiscard]] std::optional<double> tolerant_number(const nlohmann::json& value);

/// `value` as an int64 when it is an integer or an integral float.
[[nodiscard]] std::optional<std::int64_t> tolerant_integer(const nlohmann::json& value);

}  // namespace mstar::models::internal
