#pragma once

// JSON from outside the process (model files, CLI JSON lines, HTTP bodies,
// peers' descriptors) is parsed here and only here: with a nesting-depth
// limit, so no later walk over the value (a copy, a dump, a comparison, the
// destructor of a library that recurses) can run out of stack, and with
// error messages that quote at most a short prefix of what was sent.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar {

/// Deeper nesting is refused. No input this project reads needs more than a
/// dozen levels (a tool's JSON schema in a chat request is the deepest).
inline constexpr std::size_t default_max_json_depth = 64;

/// What parse_untrusted_json accepts beyond the JSON grammar.
struct json_limits {
  /// Arrays and objects nested deeper than this are refused (the top-level
  /// value is level 1).
  std::size_t max_depth = default_max_json_depth;
  /// When false, an object that holds the same key twice is an error; when
  /// true the last one wins, as in Python's json module.
  bool allow_duplicate_keys = true;
};

/// Parses `text` as exactly one JSON value (trailing text is an error) within
/// `limits`. `subject` names the input in errors, which read as a sentence
/// about it: "<subject> is not valid JSON: <reason at line, column>",
/// "<subject> nests deeper than 64 levels", "<subject> has the key "fn" twice
/// in one object". All are errc::parse_error and quote at most a short
/// prefix of the input. Never throws on any input. `Json` is nlohmann::json
/// or nlohmann::ordered_json.
template <class Json>
[[nodiscard]] result<Json> parse_untrusted_json(std::string_view text, std::string_view subject,
                                                const json_limits& limits = {});

extern template result<nlohmann::json> parse_untrusted_json<nlohmann::json>(std::string_view,
                                                                            std::string_view,
                                                                            const json_limits&);
extern template result<nlohmann::ordered_json> parse_untrusted_json<nlohmann::ordered_json>(
    std::string_view, std::string_view, const json_limits&);

/// Default length of an excerpt in a message.
inline constexpr std::size_t default_excerpt_chars = 60;

/// At most `max_chars` bytes of `value`'s compact JSON text, ending in "..."
/// when cut, and cut only between UTF-8 characters. Serializes no more than
/// it returns, so it is cheap on a 50 MB value and safe on any nesting.
template <class Json>
[[nodiscard]] std::string json_excerpt(const Json& value,
                                       std::size_t max_chars = default_excerpt_chars);

extern template std::string json_excerpt<nlohmann::json>(const nlohmann::json&, std::size_t);
extern template std::string json_excerpt<nlohmann::ordered_json>(const nlohmann::ordered_json&,
                                                                 std::size_t);

/// At most `max_chars` bytes of `text`, ending in "..." when cut, cut only
/// between UTF-8 characters (invalid UTF-8 is passed through unchanged).
[[nodiscard]] std::string text_excerpt(std::string_view text,
                                       std::size_t max_chars = default_excerpt_chars);

}  // namespace mstar
