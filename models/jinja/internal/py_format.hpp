#pragma once

#include <optional>
#include <string>

#include "core/result.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja::internal {

/// Python's repr() of a float (`1.0`, `0.1`, `1e-05`, `1e+16`, `inf`, `nan`).
[[nodiscard]] std::string float_repr(double d);

/// Python's str() of a value, as `{{ x }}` prints it: Undefined prints as
/// nothing, None as `None`, lists and dicts as their repr. Fails only on
/// values nested (through namespaces) past max_value_depth.
[[nodiscard]] result<std::string> to_str(const value& v);

/// Python's repr() (strings quoted and escaped).
[[nodiscard]] result<std::string> repr(const value& v);

/// The arguments Hugging Face's `tojson` passes to json.dumps.
struct json_style {
  std::optional<std::string> indent;  ///< each level's indent; empty optional: one line
  std::string item_separator = ", ";  ///< json.dumps' default is "," once indenting
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

/// json.dumps(v, ...) under `style`; fails on Undefined, namespaces and
/// functions, as Python does ("not JSON serializable").
[[nodiscard]] result<std::string> to_json(const value& v, const json_style& style);

}  // namespace mstar::models::jinja::internal
