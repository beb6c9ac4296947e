#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "models/jinja/interpreter.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja::internal {

// Python's operators and Jinja's attribute and item access over values
// (operators.cpp, access.cpp).

/// a `op` b for + - * / // % ** ~ (Python's rules; TypeError-like failures).
[[nodiscard]] result<value> binary_op(interpreter& in, std::string_view op, const value& a,
                                      const value& b);

/// a == b as Python compares (1 == 1.0 == True, dicts ignore order,
/// Undefined equals only Undefined).
[[nodiscard]] bool equals(const value& a, const value& b);

/// a `op` b for == != < <= > >= in notin.
[[nodiscard]] result<bool> compare_op(interpreter& in, std::string_view op, const value& a,
                                      const value& b);

/// Python's ordering (numbers, strings, lists): negative, zero or positive.
[[nodiscard]] result<int> order(interpreter& in, const value& a, const value& b);

/// `item in container` (substring, element or key; false for Undefined).
[[nodiscard]] result<bool> contains(interpreter& in, const value& container, const value& item);

/// obj.name: a method, a mapping's item, a namespace's attribute, else Undefined.
[[nodiscard]] value get_attribute(const value& obj, std::string_view name);

/// obj[key]: an item (negative indices count from the end), else Undefined.
[[nodiscard]] value get_item(const value& obj, const value& key);

/// obj[start:stop:step] of a list, tuple or string; null bounds are open.
[[nodiscard]] result<value> slice(interpreter& in, const value& obj, const value* start,
                                  const value* stop, const value* step);

/// The items iterating `v` yields: a list's items, a mapping's keys, a
/// string's characters, nothing for Undefined; fails for other types.
[[nodiscard]] result<std::vector<value>> iterate(interpreter& in, const value& v);

/// Python's str(v), bounded by the interpreter's string limit.
[[nodiscard]] result<std::string> str(interpreter& in, const value& v);

/// A string value checked against the interpreter's string limit.
[[nodiscard]] result<value> make_string(interpreter& in, std::string s);

/// A list value checked against the interpreter's list limit.
[[nodiscard]] result<value> make_list(interpreter& in, std::vector<value> items,
                                      bool tuple = false);

}  // namespace mstar::models::jinja::internal
