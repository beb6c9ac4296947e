#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "models/jinja/interpreter.hpp"

namespace mstar::models::jinja {

/// How one render runs.
struct render_options {
  jinja::limits limits;
  /// What strftime_now formats, as local time; empty: the clock's local time.
  /// Tests fix it so output is reproducible.
  std::optional<std::tm> now;
};

/// A parsed Jinja template, rendered as Hugging Face's chat templating does
/// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop
/// controls; tojson as json.dumps with ensure_ascii=False; raise_exception and
/// strftime_now as globals). Immutable once parsed: one instance may render
/// on several threads at once.
class compiled_template {
 public:
  /// Parses `source`. Fails (parse_error or unsupported, naming the line) on
  /// malformed templates and on features outside the supported subset (see
  /// models/jinja/README.md).
  [[nodiscard]] static result<compiled_template> parse(std::string_view source,
                                                       const limits& bounds = {});

  /// Renders with `variables` (a JSON object: its members become the
  /// template's variables, key order kept). Errors: invalid_argument for what
  /// the template or its input got wrong (raise_exception's message, type
  /// errors), out_of_range when a limit is hit; all name the line.
  [[nodiscard]] result<std::string> render(const nlohmann::ordered_json& variables,
                                           const render_options& options = {}) const;

 private:
  explicit compiled_template(std::shared_ptr<const program> code) : code_(std::move(code)) {}

  std::shared_ptr<const program> code_;
};

}  // namespace mstar::models::jinja
