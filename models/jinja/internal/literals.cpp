#include "models/jinja/internal/literals.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja::internal {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int digit_value(char c) {
  if (is_digit(c))
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return 99;
}

// Digits with single underscores between them ("1_000"); returns the end.
std::size_t digit_run(std::string_view text, std::size_t i, int base) {
  if (i >= text.size() || digit_value(text[i]) >= base)
    return i;
  ++i;
  while (i < text.size()) {
    if (digit_value(text[i]) < base) {
      ++i;
    } else if (text[i] == '_' && i + 1 < text.size() && digit_value(text[i + 1]) < base) {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

// The end of a float at the start of text, or 0.
std::size_t float_end(std::string_view text) {
  std::size_t i = digit_run(text, 0, 10);
  bool fraction = false;
  if (i + 1 < text.size() && text[i] == '.' && is_digit(text[i + 1])) {
    i = digit_run(text, i + 1, 10);
    fraction = true;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-'))
      ++j;
    if (j < text.size() && is_digit(text[j]))
      return digit_run(text, j, 10);
  }
  return fraction ? i : 0;
}

result<std::int64_t> parse_integer(std::string_view digits, int base) {
  std::uint64_t n = 0;
  for (char c : digits) {
    if (c == '_')
      continue;
    const auto d = static_cast<std::uint64_t>(digit_value(c));
    if (n > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - d) /
                static_cast<std::uint64_t>(base)) {
      return make_error(errc::out_of_range, "integer literal does not fit in 64 bits");
    }
    n = n * static_cast<std::uint64_t>(base) + d;
  }
  return static_cast<std::int64_t>(n);
}

}  // namespace

result<number_literal> read_number(std::string_view text, bool after_dot) {
  number_literal out;
  if (!after_dot) {
    if (const std::size_t end = float_end(text); end > 0) {
      std::string plain;
      for (char c : text.substr(0, end)) {
        if (c != '_')
          plain.push_back(c);
      }
      errno = 0;
      out.number = std::strtod(plain.c_str(), nullptr);
      out.is_float = true;
      out.length = end;
      return out;
    }
  }
  int base = 10;
  std::size_t start = 0;
  if (text.size() > 2 && text[0] == '0') {
    const char p = text[1];
    const int prefixed = p == 'x' || p == 'X'   ? 16
                         : p == 'o' || p == 'O' ? 8
                         : p == 'b' || p == 'B' ? 2
                                                : 10;
    const std::size_t first = text[2] == '_' ? 3 : 2;
    if (prefixed != 10 && first < text.size() && digit_value(text[first]) < prefixed) {
      base = prefixed;
      start = first;
    }
  }
  std::size_t end = 0;
  if (base != 10) {
    end = digit_run(text, start, base);
  } else if (text[0] == '0') {
    end = 1;  // 0(_?0)*: a leading zero never starts a longer decimal
    while (end < text.size() && (text[end] == '0' || (text[end] == '_' && end + 1 < text.size() &&
                                                      text[end + 1] == '0')))
      end += text[end] == '_' ? 2 : 1;
  } else {
    end = digit_run(text, 0, 10);
  }
  if (end == start)
    return make_error(errc::parse_error, "malformed number literal");
  auto n = parse_integer(text.substr(start, end - start), base);
  if (!n)
    return n.error();
  out.integer = *n;
  out.length = end;
  return out;
}

namespace {

// Decodes the escape after a backslash at text[i]; advances i past it.
result<void> escape(std::string_view text, std::size_t& i, std::string& out) {
  const char c = text[i];
  auto hex = [&](std::size_t n) -> result<void> {
    char32_t cp = 0;
    for (std::size_t k = 1; k <= n; ++k) {
      const int d = i + k < text.size() ? digit_value(text[i + k]) : 99;
      if (d > 15)
        return make_error(errc::parse_error, "truncated \\x, \\u or \\U escape");
      cp = cp * 16 + static_cast<char32_t>(d);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return make_error(errc::parse_error, "escape names no Unicode character");
    append_utf8(out, cp);
    i += n + 1;
    return {};
  };
  switch (c) {
    case '\n':
      ++i;
      return {};
    case '\\':
    case '\'':
    case '"':
      out.push_back(c);
      ++i;
      return {};
    case 'a':
      out.push_back('\a');
      ++i;
      return {};
    case 'b':
      out.push_back('\b');
      ++i;
      return {};
    case 'f':
      out.push_back('\f');
      ++i;
      return {};
    case 'n':
      out.push_back('\n');
      ++i;
      return {};
    case 'r':
      out.push_back('\r');
      ++i;
      return {};
    case 't':
      out.push_back('\t');
      ++i;
      return {};
    case 'v':
      out.push_back('\v');
      ++i;
      return {};
    case 'x':
      return hex(2);
    case 'u':
      return hex(4);
    case 'U':
      return hex(8);
    case 'N':
      return make_error(errc::unsupported, "\\N{...} escapes are not supported");
    default:
      break;
  }
  if (c >= '0' && c <= '7') {
    char32_t cp = 0;
    std::size_t k = 0;
    while (k < 3 && i + k < text.size() && text[i + k] >= '0' && text[i + k] <= '7') {
      cp = cp * 8 + static_cast<char32_t>(text[i + k] - '0');
      ++k;
    }
    append_utf8(out, cp);
    i += k;
    return {};
  }
  out.push_back('\\');  // unknown escapes stay as written
  return {};
}

}  // namespace

result<string_literal> read_string(std::string_view text) {
  const char quote = text[0];
  string_literal out;
  std::size_t i = 1;
  while (i < text.size() && text[i] != quote) {
    if (text[i] != '\\') {
      out.decoded.push_back(text[i]);
      ++i;
      continue;
    }
    ++i;
    if (i >= text.size())
      break;
    if (auto ok = escape(text, i, out.decoded); !ok)
      return ok.error();
  }
  if (i >= text.size())
    return make_error(errc::parse_error, "unterminated string literal");
  out.length = i + 1;
  return out;
}

}  // namespace mstar::models::jinja::internal
