#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "models/jinja/interpreter.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja::internal {

/// Binds a builtin's arguments to its Python signature: positional arguments
/// fill `names` in order, keyword arguments by name; extra or unknown ones
/// fail (errors name the builtin and the parameter).
class arg_reader {
 public:
  arg_reader(interpreter& in, std::string_view function, call_args& args,
             std::initializer_list<std::string_view> names);

  /// The binding failure, if any (check before reading).
  [[nodiscard]] result<void> status() const { return status_; }

  /// The argument bound to `name`, or nullptr when not given.
  [[nodiscard]] const value* get(std::string_view name) const;

  /// The argument or `fallback`.
  [[nodiscard]] value get_or(std::string_view name, value fallback) const;

  /// An integer argument (bool accepted, as in Python).
  [[nodiscard]] result<std::int64_t> integer(std::string_view name, std::int64_t fallback) const;

  /// A string argument; nullopt when not given or None.
  [[nodiscard]] result<std::optional<std::string>> string(std::string_view name) const;

  /// The argument's truthiness, or `fallback`.
  [[nodiscard]] bool flag(std::string_view name, bool fallback) const;

  /// A required argument.
  [[nodiscard]] result<value> required(std::string_view name) const;

 private:
  interpreter& in_;
  std::string function_;
  std::vector<std::pair<std::string_view, value>> bound_;
  result<void> status_;
};

}  // namespace mstar::models::jinja::internal
