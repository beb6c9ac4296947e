#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace mstar::models::jinja {

enum class token_kind : std::uint8_t {
  data,            ///< literal text between tags (already whitespace-controlled)
  variable_begin,  ///< {{
  variable_end,    ///< }}
  block_begin,     ///< {%
  block_end,       ///< %}
  name,            ///< identifiers and keywords
  string,          ///< a string literal, escapes already decoded
  integer,
  floating,
  op,  ///< an operator or punctuation: + - * / // % ** ~ ( ) [ ] { } . , : | = == != < <= > >=
  eof,
};

/// One token with the line it starts on (1-based).
struct token {
  token_kind kind = token_kind::eof;
  std::string text;  ///< data, name, operator, or the decoded string literal
  std::int64_t integer = 0;
  double number = 0.0;
  int line = 1;
};

/// Splits a template into tokens under the environment Hugging Face uses:
/// `trim_blocks` (the first newline after a block or comment tag goes),
/// `lstrip_blocks` (spaces and tabs before a block or comment tag on its own
/// line go), `{%-`/`-%}` style whitespace control, `{%+` to keep the leading
/// whitespace, comments dropped, `{% raw %}` kept verbatim. Newlines are
/// normalised to "\n" and one trailing newline is dropped, as Jinja does.
///
/// Fails (parse_error, naming the line) on invalid UTF-8, an unterminated
/// tag, comment, raw block or string, a bad escape or an unknown character.
[[nodiscard]] result<std::vector<token>> tokenize(std::string_view source);

/// A short rendering of a token for error messages ("'endfor'", "end of template").
[[nodiscard]] std::string describe(const token& t);

}  // namespace mstar::models::jinja
