// The Python methods templates call on strings, dicts and lists.
#include <algorithm>
#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/args.hpp"
#include "models/jinja/internal/filter_support.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/py_format.hpp"

namespace mstar::models::jinja {
namespace {

using internal::arg_reader;
using method_fn = result<value> (*)(interpreter& in, const value& self, call_args& args);

result<value> strip_method(interpreter& in, const value& self, call_args& args,
                           internal::strip_side side) {
  arg_reader a{in, "strip", args, {"chars"}};
  auto chars = a.string("chars");
  if (auto ok = a.status(); !ok || !chars)
    return ok ? chars.error() : ok.error();
  return value{internal::strip(self.as_string(), side, *chars)};
}

result<value> str_strip(interpreter& in, const value& self, call_args& args) {
  return strip_method(in, self, args, internal::strip_side::both);
}
result<value> str_lstrip(interpreter& in, const value& self, call_args& args) {
  return strip_method(in, self, args, internal::strip_side::left);
}
result<value> str_rstrip(interpreter& in, const value& self, call_args& args) {
  return strip_method(in, self, args, internal::strip_side::right);
}

result<value> split_method(interpreter& in, const value& self, call_args& args, bool from_right) {
  arg_reader a{in, "split", args, {"sep", "maxsplit"}};
  auto sep = a.string("sep");
  auto maxsplit = a.integer("maxsplit", -1);
  if (auto ok = a.status(); !ok || !sep || !maxsplit)
    return !ok ? ok.error() : !sep ? sep.error() : maxsplit.error();
  if (*sep && (*sep)->empty())
    return in.fail("split(): empty separator");
  auto parts = from_right ? internal::rsplit(self.as_string(), *sep, *maxsplit)
                          : internal::split(self.as_string(), *sep, *maxsplit);
  std::vector<value> out;
  out.reserve(parts.size());
  for (auto& part : parts)
    out.emplace_back(std::move(part));
  return internal::make_list(in, std::move(out));
}

result<value> str_split(interpreter& in, const value& self, call_args& args) {
  return split_method(in, self, args, false);
}
result<value> str_rsplit(interpreter& in, const value& self, call_args& args) {
  return split_method(in, self, args, true);
}

result<value> str_splitlines(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "splitlines", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  std::vector<value> out;
  for (auto& line : internal::splitlines(self.as_string()))
    out.emplace_back(std::move(line));
  return internal::make_list(in, std::move(out));
}

result<value> affix_method(interpreter& in, const value& self, call_args& args, bool prefix) {
  arg_reader a{in, prefix ? "startswith" : "endswith", args, {"affix"}};
  auto affix = a.required("affix");
  if (auto ok = a.status(); !ok || !affix)
    return ok ? affix.error() : ok.error();
  std::vector<value> candidates = affix->is_array() ? affix->items() : std::vector<value>{*affix};
  const std::string& s = self.as_string();
  for (const auto& c : candidates) {
    if (!c.is_string())
      return in.fail(fmt::format("{}(): expected a string or a tuple of strings, not '{}'",
                                 prefix ? "startswith" : "endswith", type_name(c)));
    const std::string& t = c.as_string();
    const bool hit =
        t.size() <= s.size() && (prefix ? s.compare(0, t.size(), t) == 0
                                        : s.compare(s.size() - t.size(), t.size(), t) == 0);
    if (hit)
      return value{true};
  }
  return value{false};
}

result<value> str_startswith(interpreter& in, const value& self, call_args& args) {
  return affix_method(in, self, args, true);
}
result<value> str_endswith(interpreter& in, const value& self, call_args& args) {
  return affix_method(in, self, args, false);
}

result<value> str_replace(interpreter& in, const value& self, call_args& args) {
  return find_filter("replace")(in, self, args);
}

template <std::string (*Fn)(std::string_view)>
result<value> str_case(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "method", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return value{Fn(self.as_string())};
}

result<value> find_method_impl(interpreter& in, const value& self, call_args& args, bool reverse,
                               bool must_find) {
  arg_reader a{in, reverse ? "rfind" : "find", args, {"sub"}};
  auto sub = a.string("sub");
  if (auto ok = a.status(); !ok || !sub)
    return ok ? sub.error() : ok.error();
  const std::int64_t at = internal::find(self.as_string(), sub->value_or(""), reverse);
  if (at < 0 && must_find)
    return in.fail("index(): substring not found");
  return value{at};
}

result<value> str_find(interpreter& in, const value& self, call_args& args) {
  return find_method_impl(in, self, args, false, false);
}
result<value> str_rfind(interpreter& in, const value& self, call_args& args) {
  return find_method_impl(in, self, args, true, false);
}
result<value> str_index(interpreter& in, const value& self, call_args& args) {
  return find_method_impl(in, self, args, false, true);
}

result<value> str_count(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "count", args, {"sub"}};
  auto sub = a.string("sub");
  if (auto ok = a.status(); !ok || !sub)
    return ok ? sub.error() : ok.error();
  return value{internal::count(self.as_string(), sub->value_or(""))};
}

result<value> str_join(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "join", args, {"iterable"}};
  auto items = a.required("iterable");
  if (auto ok = a.status(); !ok || !items)
    return ok ? items.error() : ok.error();
  call_args filter_args;
  filter_args.positional.push_back(self);
  return find_filter("join")(in, *items, filter_args);
}

template <bool (*Fn)(char32_t)>
result<value> str_is(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "method", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  const std::u32string cps = internal::decode(self.as_string());
  return value{!cps.empty() && std::all_of(cps.begin(), cps.end(), Fn)};
}

bool digit(char32_t cp) {
  return cp >= '0' && cp <= '9';
}
bool alpha(char32_t cp) {
  return internal::is_word(cp) && cp != '_' && !digit(cp);
}
bool alnum(char32_t cp) {
  return digit(cp) || alpha(cp);
}

result<value> str_format(interpreter& in, const value& self, call_args& args);  // below

struct method_entry {
  value::kind receiver;
  std::string_view name;
  method_fn fn;
};

result<value> dict_items(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "items", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return internal::pairs(in, self.as_object(), seq_kind::dict_items);
}

result<value> dict_keys(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "keys", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto keys = internal::iterate(in, self);
  if (!keys)
    return keys.error();
  return value::sequence(std::move(keys).value(), seq_kind::dict_keys);
}

result<value> dict_values(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "values", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  std::vector<value> out;
  for (const auto& entry : self.as_object().entries())
    out.push_back(entry.second);
  return value::sequence(std::move(out), seq_kind::dict_values);
}

result<value> dict_get(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "get", args, {"key", "default"}};
  auto key = a.required("key");
  if (auto ok = a.status(); !ok || !key)
    return ok ? key.error() : ok.error();
  const value* found = key->is_string() ? self.as_object().find(key->as_string()) : nullptr;
  return found != nullptr ? *found : a.get_or("default", value::none());
}

result<value> list_index(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "index", args, {"value"}};
  auto target = a.required("value");
  if (auto ok = a.status(); !ok || !target)
    return ok ? target.error() : ok.error();
  for (std::size_t i = 0; i < self.items().size(); ++i) {
    if (internal::equals(self.items()[i], *target))
      return value{static_cast<std::int64_t>(i)};
  }
  return in.fail("index(): value is not in the list");
}

result<value> list_count(interpreter& in, const value& self, call_args& args) {
  arg_reader a{in, "count", args, {"value"}};
  auto target = a.required("value");
  if (auto ok = a.status(); !ok || !target)
    return ok ? target.error() : ok.error();
  return value{static_cast<std::int64_t>(
      std::count_if(self.items().begin(), self.items().end(),
                    [&](const value& item) { return internal::equals(item, *target); }))};
}

constexpr method_entry methods[] = {
    {value::kind::string, "strip", str_strip},
    {value::kind::string, "lstrip", str_lstrip},
    {value::kind::string, "rstrip", str_rstrip},
    {value::kind::string, "split", str_split},
    {value::kind::string, "rsplit", str_rsplit},
    {value::kind::string, "splitlines", str_splitlines},
    {value::kind::string, "startswith", str_startswith},
    {value::kind::string, "endswith", str_endswith},
    {value::kind::string, "replace", str_replace},
    {value::kind::string, "upper", str_case<internal::upper>},
    {value::kind::string, "lower", str_case<internal::lower>},
    {value::kind::string, "title", str_case<internal::title>},
    {value::kind::string, "capitalize", str_case<internal::capitalize>},
    {value::kind::string, "find", str_find},
    {value::kind::string, "rfind", str_rfind},
    {value::kind::string, "index", str_index},
    {value::kind::string, "count", str_count},
    {value::kind::string, "join", str_join},
    {value::kind::string, "format", str_format},
    {value::kind::string, "isdigit", str_is<digit>},
    {value::kind::string, "isalpha", str_is<alpha>},
    {value::kind::string, "isalnum", str_is<alnum>},
    {value::kind::string, "isspace", str_is<internal::is_space>},
    {value::kind::object, "items", dict_items},
    {value::kind::object, "keys", dict_keys},
    {value::kind::object, "values", dict_values},
    {value::kind::object, "get", dict_get},
    {value::kind::array, "index", list_index},
    {value::kind::array, "count", list_count},
};

result<value> str_format(interpreter& in, const value& self, call_args& args) {
  const std::string& f = self.as_string();
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    const std::size_t close = f.find('}', i);
    if (close == std::string::npos)
      return in.fail("format(): single '{' in the format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    bool quoted = false;
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      quoted = field.back() == 'r';
      field.resize(field.size() - 2);
    }
    if (field.find_first_of(":.[") != std::string::npos)
      return in.fail("format(): format specs, attributes and indexing in fields are not supported");
    const value* arg = nullptr;
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const std::size_t at = field.empty() ? auto_index++ : std::stoul(field);
      if (at < args.positional.size())
        arg = &args.positional[at];
    } else {
      for (const auto& [key, v] : args.named) {
        if (key == field)
          arg = &v;
      }
    }
    if (arg == nullptr)
      return in.fail(fmt::format("format(): no argument for field '{{{}}}'", field));
    auto text = quoted ? internal::repr(*arg) : internal::str(in, *arg);
    if (!text)
      return text.error();
    out += *text;
    if (auto ok = in.check_string(out.size()); !ok)
      return ok.error();
  }
  return value{std::move(out)};
}

}  // namespace

std::optional<value> find_method(const value& receiver, std::string_view name) {
  for (const auto& entry : methods) {
    if (entry.receiver != receiver.type() || entry.name != name)
      continue;
    const method_fn fn = entry.fn;
    return value::function(std::string{name}, [fn, receiver](interpreter& in, call_args& args) {
      return fn(in, receiver, args);
    });
  }
  return std::nullopt;
}

}  // namespace mstar::models::jinja
