// Python's printf-style formatting (`'%s: %d' % (a, b)` and the `format`
// filter): flags, width, precision and the s r a d i u f F e E g G x X o c %
// conversions. Mapping keys (`%(name)s`) and `*` widths are not supported.
#include <cstdio>
#include <fmt/format.h>

#include "models/jinja/internal/filter_support.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/py_format.hpp"

namespace mstar::models::jinja::internal {
namespace {

struct spec {
  std::string flags;
  int width = 0;
  int precision = -1;
  char conversion = 's';
};

std::string pad(std::string text, const spec& s) {
  const auto len = static_cast<int>(length(text));
  if (len >= s.width)
    return text;
  const std::string fill(static_cast<std::size_t>(s.width - len), ' ');
  return s.flags.find('-') != std::string::npos ? text + fill : fill + text;
}

result<std::string> convert(interpreter& in, const spec& s, const value& arg) {
  const char c = s.conversion;
  if (c == 's' || c == 'r' || c == 'a') {
    auto text = c == 's' ? str(in, arg) : repr(arg);
    if (!text)
      return text;
    if (s.precision >= 0)
      *text = encode(std::u32string_view{decode(*text)}.substr(0, s.precision));
    return pad(std::move(text).value(), s);
  }
  if (c == 'c') {
    if (arg.is_string() && length(arg.as_string()) == 1)
      return pad(arg.as_string(), s);
    if (!arg.is_integral() || arg.as_int() < 0 || arg.as_int() > 0x10FFFF)
      return in.fail("%c requires an integer in range(0x110000) or a single character");
    std::string one;
    append_utf8(one, static_cast<char32_t>(arg.as_int()));
    return pad(std::move(one), s);
  }
  const bool integer_conversion =
      c == 'd' || c == 'i' || c == 'u' || c == 'x' || c == 'X' || c == 'o';
  if (!arg.is_numeric() || (arg.is_float() && (c == 'x' || c == 'X' || c == 'o'))) {
    return in.fail(fmt::format("%{} format: {} is required, not {}", c,
                               integer_conversion ? "a real number" : "a number", type_name(arg)));
  }
  std::string format = "%" + s.flags;
  if (s.width > 0)
    format += std::to_string(s.width);
  if (s.precision >= 0)
    format += "." + std::to_string(s.precision);
  char buf[512];
  if (integer_conversion) {
    const auto n = arg.is_float() ? static_cast<long long>(arg.as_double())
                                  : static_cast<long long>(arg.as_int());
    format += "ll";
    format.push_back(c == 'i' || c == 'u' ? 'd' : c);
    std::snprintf(buf, sizeof buf, format.c_str(), n);
  } else {
    format.push_back(c);
    std::snprintf(buf, sizeof buf, format.c_str(), arg.as_double());
  }
  return std::string{buf};
}

}  // namespace

result<std::string> printf_format(interpreter& in, const std::string& format,
                                  const std::vector<value>& args, bool mapping_argument) {
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    spec s;
    std::size_t j = i + 1;
    while (j < format.size() && std::string_view{"-+ 0#"}.find(format[j]) != std::string::npos)
      s.flags.push_back(format[j++]);
    while (j < format.size() && format[j] >= '0' && format[j] <= '9' && s.width < 10000)
      s.width = s.width * 10 + (format[j++] - '0');
    if (j < format.size() && format[j] == '.') {
      s.precision = 0;
      ++j;
      while (j < format.size() && format[j] >= '0' && format[j] <= '9' && s.precision < 10000)
        s.precision = s.precision * 10 + (format[j++] - '0');
    }
    if (j >= format.size())
      return in.fail("incomplete format");
    s.conversion = format[j];
    i = j;
    if (s.conversion == '%') {
      out.push_back('%');
      continue;
    }
    if (std::string_view{"sradiufFeEgGxXoc"}.find(s.conversion) == std::string_view::npos)
      return in.fail(fmt::format("unsupported format character '{}'", s.conversion));
    if (next >= args.size())
      return in.fail("not enough arguments for format string");
    auto piece = convert(in, s, args[next++]);
    if (!piece)
      return piece;
    out += *piece;
    if (auto ok = in.check_string(out.size()); !ok)
      return ok.error();
  }
  if (next < args.size() && !mapping_argument)
    return in.fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace mstar::models::jinja::internal
