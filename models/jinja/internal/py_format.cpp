#include "models/jinja/internal/py_format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja::internal {
namespace {

error too_deep() {
  return make_error(errc::out_of_range, fmt::format("value nests deeper than {} levels (through "
                                                    "namespaces) to print",
                                                    max_value_depth));
}

// Python's str.isprintable() for the code points templates meet; the rest of
// Unicode's unprintable categories print as themselves (a known gap).
bool printable(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD)
    return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF)
    return false;
  return !(cp >= 0xE000 && cp <= 0xF8FF);
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (printable(cp)) {
      append_utf8(out, cp);
    } else if (cp < 0x100) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x10000) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
  }
  out.push_back(quote);
  return out;
}

result<std::string> format_value(const value& v, bool quoted, std::uint32_t level);

result<std::string> format_items(const std::vector<value>& items, std::uint32_t level) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto item = format_value(items[i], true, level + 1);
    if (!item)
      return item;
    if (i > 0)
      out += ", ";
    out += *item;
  }
  return out;
}

result<std::string> format_mapping(const object_data& data, std::uint32_t level) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, item] : data.entries()) {
    auto text = format_value(item, true, level + 1);
    if (!text)
      return text;
    out += (first ? "" : ", ") + string_repr(key) + ": " + *text;
    first = false;
  }
  return out + "}";
}

result<std::string> format_value(const value& v, bool quoted, std::uint32_t level) {
  if (level > max_value_depth)
    return too_deep();
  switch (v.type()) {
    case value::kind::undefined:
      return std::string{quoted ? "Undefined" : ""};
    case value::kind::none:
      return std::string{"None"};
    case value::kind::boolean:
      return std::string{v.as_bool() ? "True" : "False"};
    case value::kind::integer:
      return std::to_string(v.as_int());
    case value::kind::number:
      return float_repr(v.as_double());
    case value::kind::string:
      return quoted ? string_repr(v.as_string()) : v.as_string();
    case value::kind::array: {
      if (v.sequence_kind() == seq_kind::generator)
        return std::string{"<generator object>"};  // Python adds an address
      auto inner = format_items(v.items(), level);
      if (!inner)
        return inner;
      switch (v.sequence_kind()) {
        case seq_kind::list:
        case seq_kind::generator:
          return "[" + *inner + "]";
        case seq_kind::tuple:
          return "(" + *inner + (v.items().size() == 1 ? ",)" : ")");
        case seq_kind::dict_items:
        case seq_kind::dict_keys:
        case seq_kind::dict_values:
          return std::string{type_name(v)} + "([" + *inner + "])";
      }
      return *inner;
    }
    case value::kind::object:
      return format_mapping(v.as_object(), level);
    case value::kind::ns: {
      auto inner = format_mapping(v.as_namespace(), level);
      if (!inner)
        return inner;
      return "<Namespace " + *inner + ">";
    }
    case value::kind::function:
      return "<function " + v.as_function().name + ">";
  }
  return std::string{};
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t cp : decode(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xD800 + (v >> 10)),
                           static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      }
      continue;
    }
    append_utf8(out, cp);
  }
  out.push_back('"');
}

class json_writer {
 public:
  explicit json_writer(const json_style& style) : style_(style) {}

  result<void> write(const value& v, std::uint32_t level) {
    if (level > max_value_depth)
      return too_deep();
    switch (v.type()) {
      case value::kind::none:
        out_ += "null";
        return {};
      case value::kind::boolean:
        out_ += v.as_bool() ? "true" : "false";
        return {};
      case value::kind::integer:
        out_ += std::to_string(v.as_int());
        return {};
      case value::kind::number:
        write_float(v.as_double());
        return {};
      case value::kind::string:
        json_string(out_, v.as_string(), style_.ensure_ascii);
        return {};
      case value::kind::array:
        if (!v.is_list_like())
          break;
        return write_array(v.items(), level);
      case value::kind::object:
        return write_object(v.as_object(), level);
      case value::kind::undefined:
      case value::kind::ns:
      case value::kind::function:
        break;
    }
    return make_error(errc::invalid_argument, fmt::format("tojson: Object of type {} is not JSON "
                                                          "serializable",
                                                          type_name(v)));
  }

  std::string take() { return std::move(out_); }

 private:
  void write_float(double d) {
    if (std::isnan(d))
      out_ += "NaN";
    else if (std::isinf(d))
      out_ += d > 0 ? "Infinity" : "-Infinity";
    else
      out_ += float_repr(d);
  }

  void newline(std::uint32_t level) {
    if (!style_.indent)
      return;
    out_.push_back('\n');
    for (std::uint32_t i = 0; i < level; ++i)
      out_ += *style_.indent;
  }

  result<void> write_array(const std::vector<value>& items, std::uint32_t level) {
    if (items.empty()) {
      out_ += "[]";
      return {};
    }
    out_.push_back('[');
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0)
        out_ += style_.item_separator;
      newline(level + 1);
      if (auto ok = write(items[i], level + 1); !ok)
        return ok;
    }
    newline(level);
    out_.push_back(']');
    return {};
  }

  result<void> write_object(const object_data& data, std::uint32_t level) {
    if (data.size() == 0) {
      out_ += "{}";
      return {};
    }
    std::vector<const std::pair<std::string, value>*> entries;
    for (const auto& entry : data.entries())
      entries.push_back(&entry);
    if (style_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out_.push_back('{');
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0)
        out_ += style_.item_separator;
      newline(level + 1);
      json_string(out_, entries[i]->first, style_.ensure_ascii);
      out_ += style_.key_separator;
      if (auto ok = write(entries[i]->second, level + 1); !ok)
        return ok;
    }
    newline(level);
    out_.push_back('}');
    return {};
  }

  const json_style& style_;
  std::string out_;
};

}  // namespace

std::string float_repr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci{buf, static_cast<std::size_t>(res.ptr - buf)};
  const bool negative = sci.front() == '-';
  const std::size_t e_at = sci.find('e');
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e_at - (negative ? 1 : 0))) {
    if (c != '.')
      digits.push_back(c);
  }
  const int exponent = std::stoi(std::string{sci.substr(e_at + 1)});
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1)
      out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
  }
  if (exponent < 0)
    return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  const auto int_digits = static_cast<std::size_t>(exponent + 1);
  if (digits.size() <= int_digits)
    return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

result<std::string> to_str(const value& v) {
  return format_value(v, false, 0);
}

result<std::string> repr(const value& v) {
  return format_value(v, true, 0);
}

result<std::string> to_json(const value& v, const json_style& style) {
  json_writer writer{style};
  if (auto ok = writer.write(v, 0); !ok)
    return ok.error();
  return writer.take();
}

}  // namespace mstar::models::jinja::internal
