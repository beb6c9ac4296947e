#pragma once

#include <optional>
#include <string_view>

#include "core/result.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja {

/// A filter: `input | name(args)`.
using filter_fn = result<value> (*)(interpreter& in, const value& input, call_args& args);

/// A test: `input is name(args)`.
using test_fn = result<bool> (*)(interpreter& in, const value& input, call_args& args);

/// The filter called `name` (filters.cpp, filters_text.cpp), or nullptr.
[[nodiscard]] filter_fn find_filter(std::string_view name);

/// The test called `name` (tests.cpp), or nullptr.
[[nodiscard]] test_fn find_test(std::string_view name);

/// `receiver.name` as a bound method when `receiver`'s Python type has a
/// method of that name templates use (str.strip, dict.items, ...), else
/// nullopt (methods.cpp).
[[nodiscard]] std::optional<value> find_method(const value& receiver, std::string_view name);

/// The global `name` every template sees (range, namespace, dict,
/// raise_exception, strftime_now), or nullopt (globals.cpp).
[[nodiscard]] std::optional<value> find_global(std::string_view name);

}  // namespace mstar::models::jinja
