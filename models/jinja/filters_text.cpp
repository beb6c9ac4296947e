// Jinja's filters over text, and Hugging Face's tojson.
#include <fmt/format.h>

#include "models/jinja/internal/args.hpp"
#include "models/jinja/internal/filter_support.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/py_format.hpp"
#include "models/jinja/internal/tables.hpp"

namespace mstar::models::jinja::internal {
namespace {

// A filter of the form f(str(input)) with no arguments.
template <std::string (*Fn)(std::string_view)>
result<value> text_only(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "filter", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto text = str(in, v);
  if (!text)
    return text.error();
  return value{Fn(*text)};
}

std::string as_is(std::string_view s) {
  return std::string{s};
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Jinja's title filter: each word (after "-", whitespace, "(", "{", "[" or
// "<") gets its first character upper-cased and the rest lower-cased.
std::string jinja_title(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (char32_t cp : decode(s)) {
    const bool boundary =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_space(cp);
    std::string one;
    append_utf8(one, cp);
    out += boundary ? one : word_start ? upper(one) : lower(one);
    word_start = boundary;
  }
  return out;
}

std::string word_count(std::string_view s) {
  std::int64_t n = 0;
  bool in_word = false;
  for (char32_t cp : decode(s)) {
    const bool word = is_word(cp);
    if (word && !in_word)
      ++n;
    in_word = word;
  }
  return std::to_string(n);
}

result<value> do_wordcount(interpreter& in, const value& v, call_args& args) {
  auto text = text_only<word_count>(in, v, args);
  if (!text)
    return text;
  return value{static_cast<std::int64_t>(std::stoll(text->as_string()))};
}

result<value> do_trim(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "trim", args, {"chars"}};
  auto chars = a.string("chars");
  if (auto ok = a.status(); !ok || !chars)
    return ok ? chars.error() : ok.error();
  auto text = str(in, v);
  if (!text)
    return text.error();
  return value{strip(*text, strip_side::both, *chars)};
}

result<value> do_replace(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "replace", args, {"old", "new", "count"}};
  auto count = a.integer("count", -1);
  if (auto ok = a.status(); !ok || !count)
    return ok ? count.error() : ok.error();
  auto text = str(in, v);
  auto from = str(in, a.get_or("old", value{""}));
  auto to = str(in, a.get_or("new", value{""}));
  if (!text || !from || !to)
    return !text ? text.error() : !from ? from.error() : to.error();
  if (!from->empty()) {
    const auto hits = static_cast<std::size_t>(internal::count(*text, *from));
    if (to->size() > from->size())
      if (auto ok = in.check_string(text->size() + hits * (to->size() - from->size())); !ok)
        return ok.error();
  } else if (auto ok = in.check_string(text->size() * (to->size() + 1) + to->size()); !ok) {
    return ok.error();
  }
  return value{replace(*text, *from, *to, *count)};
}

result<value> do_indent(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "indent", args, {"width", "first", "blank"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  const value width = a.get_or("width", value{4});
  std::string pad;
  if (width.is_string()) {
    pad = width.as_string();
  } else if (width.is_integral()) {
    pad.assign(static_cast<std::size_t>(
                   std::max<std::int64_t>(0, std::min<std::int64_t>(width.as_int(), 1 << 16))),
               ' ');
  } else {
    return in.fail("indent(): width must be an integer or a string");
  }
  if (!v.is_string())  // Jinja appends "\n" to its input: only strings work
    return in.fail(fmt::format("indent(): expected a string, not '{}'", type_name(v)));
  const std::string* text = &v.as_string();
  const std::vector<std::string> lines = splitlines(*text + "\n");
  if (auto ok = in.check_string(text->size() + lines.size() * pad.size() + pad.size()); !ok)
    return ok.error();
  std::string out;
  const bool blank = a.flag("blank", false);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out.push_back('\n');
      if (blank || !lines[i].empty())
        out += pad;
    }
    out += lines[i];
  }
  if (a.flag("first", false))
    out = pad + out;
  return value{std::move(out)};
}

result<value> do_center(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "center", args, {"width"}};
  auto width = a.integer("width", 80);
  if (auto ok = a.status(); !ok || !width)
    return ok ? width.error() : ok.error();
  auto text = str(in, v);
  if (!text)
    return text.error();
  const auto len = static_cast<std::int64_t>(length(*text));
  const std::int64_t target = std::min<std::int64_t>(*width, 1 << 20);
  if (target <= len)
    return value{std::move(text).value()};
  const std::int64_t margin = target - len;
  const std::int64_t left = margin / 2 + (margin & target & 1);
  return value{std::string(static_cast<std::size_t>(left), ' ') + *text +
               std::string(static_cast<std::size_t>(margin - left), ' ')};
}

result<value> do_tojson(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  json_style style;
  style.ensure_ascii = a.flag("ensure_ascii", false);
  style.sort_keys = a.flag("sort_keys", false);
  if (const value* indent = a.get("indent"); indent != nullptr && !indent->is_none()) {
    if (indent->is_string())
      style.indent = indent->as_string();
    else if (indent->is_integral())
      style.indent = std::string(
          static_cast<std::size_t>(std::clamp<std::int64_t>(indent->as_int(), 0, 64)), ' ');
    else
      return in.fail("tojson(): indent must be an integer or a string");
    style.item_separator.assign(1, ',');  // not = ",": GCC 12 -O3 warns -Wrestrict
  }
  if (const value* separators = a.get("separators");
      separators != nullptr && !separators->is_none()) {
    if (!separators->is_array() || separators->items().size() != 2 ||
        !separators->items()[0].is_string() || !separators->items()[1].is_string())
      return in.fail("tojson(): separators must be a pair of strings");
    style.item_separator = separators->items()[0].as_string();
    style.key_separator = separators->items()[1].as_string();
  }
  auto text = to_json(v, style);
  if (!text) {
    if (text.error().code() == errc::out_of_range)
      return text.error();
    return in.fail(text.error().message());
  }
  return make_string(in, std::move(text).value());
}

result<value> do_format(interpreter& in, const value& v, call_args& args) {
  if (!args.named.empty())
    return in.fail("format(): keyword arguments are not supported");
  auto text = str(in, v);
  if (!text)
    return text.error();
  auto out = printf_format(in, *text, args.positional);
  if (!out)
    return out.error();
  return value{std::move(out).value()};
}

constexpr filter_entry text_entries[] = {
    {"trim", do_trim},
    {"upper", text_only<upper>},
    {"lower", text_only<lower>},
    {"capitalize", text_only<capitalize>},
    {"title", text_only<jinja_title>},
    {"replace", do_replace},
    {"string", text_only<as_is>},
    {"safe", text_only<as_is>},
    {"escape", text_only<html_escape>},
    {"e", text_only<html_escape>},
    {"indent", do_indent},
    {"wordcount", do_wordcount},
    {"center", do_center},
    {"tojson", do_tojson},
    {"format", do_format},
};

}  // namespace

std::span<const filter_entry> text_filters() {
  return text_entries;
}

}  // namespace mstar::models::jinja::internal
