#pragma once

#include <functional>
#include <vector>

#include "core/result.hpp"
#include "models/jinja/internal/text.hpp"
#include "models/jinja/interpreter.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja::internal {

// Helpers the filter files share (filter_support.cpp), and the filters that
// live outside filters.cpp.

/// Jinja's attribute getter: `attribute` is a dotted path ("function.name")
/// whose integer parts index lists, or an integer.
[[nodiscard]] value get_path(interpreter& in, const value& item, const value& attribute);

/// A string lowered for case-insensitive comparison; other values unchanged.
[[nodiscard]] value fold_case(const value& v);

/// A mapping's (key, value) tuples in order, as a sequence of `kind`.
[[nodiscard]] result<value> pairs(interpreter& in, const object_data& data, seq_kind kind);

/// Stable sort of `items` by `key` (Python's sorted(key=..., reverse=...)).
[[nodiscard]] result<void> sort_values(interpreter& in, std::vector<value>& items, bool reverse,
                                       const std::function<value(const value&)>& key);

/// Python's `format % args` (printf_format.cpp). With `mapping_argument` (the
/// right operand was one dict or list) unused arguments are no error.
[[nodiscard]] result<std::string> printf_format(interpreter& in, const std::string& format,
                                                const std::vector<value>& args,
                                                bool mapping_argument = false);

// filters_select.cpp
result<value> do_map(interpreter& in, const value& v, call_args& args);
result<value> do_select(interpreter& in, const value& v, call_args& args);
result<value> do_reject(interpreter& in, const value& v, call_args& args);
result<value> do_selectattr(interpreter& in, const value& v, call_args& args);
result<value> do_rejectattr(interpreter& in, const value& v, call_args& args);
result<value> do_abs(interpreter& in, const value& v, call_args& args);
result<value> do_round(interpreter& in, const value& v, call_args& args);
result<value> do_int(interpreter& in, const value& v, call_args& args);
result<value> do_float(interpreter& in, const value& v, call_args& args);

}  // namespace mstar::models::jinja::internal
