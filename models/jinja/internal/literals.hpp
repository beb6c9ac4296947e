#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar::models::jinja::internal {

/// A number literal at the start of some text.
struct number_literal {
  std::size_t length = 0;  ///< characters consumed
  bool is_float = false;
  std::int64_t integer = 0;
  double number = 0.0;
};

/// Reads the number at the start of `text` (which starts with a digit) with
/// Jinja's rules: `1_000`, `0x1F`, `0o17`, `0b101`, `1.5`, `1e3`, `2.5E-3`. A
/// float needs a fraction or an exponent, and is not read right after a dot
/// (`after_dot`: `foo.0.1` is two subscripts). Fails on integers past int64.
[[nodiscard]] result<number_literal> read_number(std::string_view text, bool after_dot);

/// A string literal at the start of some text.
struct string_literal {
  std::size_t length = 0;  ///< characters consumed, quotes included
  std::string decoded;     ///< the value, escapes applied
};

/// Reads the quoted string at the start of `text` and decodes Python's
/// escapes (\n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh octal, backslash-newline;
/// unknown escapes stay as written). Fails on a missing closing quote or a
/// malformed escape, with a reason for the message.
[[nodiscard]] result<string_literal> read_string(std::string_view text);

}  // namespace mstar::models::jinja::internal
