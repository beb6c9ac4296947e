// Filters that apply tests or filters per item (map, select...), number
// filters, and helpers the filter files share.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/args.hpp"
#include "models/jinja/internal/filter_support.hpp"
#include "models/jinja/internal/ops.hpp"

namespace mstar::models::jinja::internal {

value get_path(interpreter& in, const value& item, const value& attribute) {
  if (!attribute.is_string())
    return get_item(item, attribute);
  value current = item;
  for (const std::string& part : split(attribute.as_string(), std::string{"."})) {
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    current = numeric ? get_item(current, value{static_cast<std::int64_t>(
                                              std::strtoll(part.c_str(), nullptr, 10))})
                      : get_item(current, value{part});
  }
  (void)in;
  return current;
}

value fold_case(const value& v) {
  return v.is_string() ? value{lower(v.as_string())} : v;
}

result<value> pairs(interpreter& in, const object_data& data, seq_kind kind) {
  std::vector<value> out;
  out.reserve(data.size());
  for (const auto& [key, item] : data.entries()) {
    auto pair = value::list({value{key}, item}, true);
    if (!pair)
      return pair;
    out.push_back(std::move(pair).value());
  }
  if (auto ok = in.check_list(out.size()); !ok)
    return ok.error();
  return value::sequence(std::move(out), kind);
}

result<void> sort_values(interpreter& in, std::vector<value>& items, bool reverse,
                         const std::function<value(const value&)>& key) {
  const std::size_t n = items.size();
  if (auto ok = in.charge(n * static_cast<std::size_t>(std::log2(n + 1) + 1)); !ok)
    return ok;
  std::vector<value> keys;
  keys.reserve(n);
  for (const auto& item : items)
    keys.push_back(key(item));
  std::vector<std::size_t> index(n);
  for (std::size_t i = 0; i < n; ++i)
    index[i] = i;
  std::optional<error> failure;
  std::stable_sort(index.begin(), index.end(), [&](std::size_t a, std::size_t b) {
    if (failure)
      return false;
    auto c = reverse ? order(in, keys[b], keys[a]) : order(in, keys[a], keys[b]);
    if (!c) {
      failure = c.error();
      return false;
    }
    return *c < 0;
  });
  if (failure)
    return *failure;
  std::vector<value> sorted;
  sorted.reserve(n);
  for (std::size_t i : index)
    sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
  return {};
}

namespace {

// select / reject / selectattr / rejectattr: keep items whose test (or
// truthiness) agrees with `keep`.
result<value> select_items(interpreter& in, const value& v, call_args& args, bool keep,
                           bool by_attribute, std::string_view name) {
  std::size_t next = 0;
  value attribute;
  if (by_attribute) {
    if (args.positional.empty())
      return in.fail(fmt::format("{}() needs the attribute to test", name));
    attribute = args.positional[next++];
  }
  test_fn test = nullptr;
  if (next < args.positional.size()) {
    const value& test_name = args.positional[next++];
    if (!test_name.is_string())
      return in.fail(fmt::format("{}(): the test name must be a string", name));
    test = find_test(test_name.as_string());
    if (test == nullptr)
      return in.fail(fmt::format("{}(): no test named '{}'", name, test_name.as_string()));
  }
  if (!v.truthy())  // Jinja checks `if value:` before iterating
    return value::sequence({}, seq_kind::generator);
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  if (auto ok = in.charge(items->size()); !ok)
    return ok.error();
  std::vector<value> out;
  for (const auto& item : *items) {
    const value subject = by_attribute ? get_path(in, item, attribute) : item;
    bool passed = subject.truthy();
    if (test != nullptr) {
      call_args test_args;
      test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next),
                                  args.positional.end());
      test_args.named = args.named;
      auto r = test(in, subject, test_args);
      if (!r)
        return r.error();
      passed = *r;
    }
    if (passed == keep)
      out.push_back(item);
  }
  return value::sequence(std::move(out), seq_kind::generator);
}

}  // namespace

result<value> do_map(interpreter& in, const value& v, call_args& args) {
  if (!v.truthy())  // Jinja checks `if value:` before iterating
    return value::sequence({}, seq_kind::generator);
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  if (auto ok = in.charge(items->size()); !ok)
    return ok.error();
  std::vector<value> out;
  if (args.positional.empty()) {
    arg_reader a{in, "map", args, {"attribute", "default"}};
    auto attribute = a.required("attribute");
    if (auto ok = a.status(); !ok || !attribute)
      return ok ? attribute.error() : ok.error();
    const value* fallback = a.get("default");
    for (const auto& item : *items) {
      value got = get_path(in, item, *attribute);
      out.push_back(got.is_undefined() && fallback != nullptr ? *fallback : std::move(got));
    }
    return value::sequence(std::move(out), seq_kind::generator);
  }
  const value filter_name = args.positional.front();
  if (!filter_name.is_string())
    return in.fail("map(): the filter name must be a string");
  filter_fn filter = find_filter(filter_name.as_string());
  if (filter == nullptr)
    return in.fail(fmt::format("map(): no filter named '{}'", filter_name.as_string()));
  for (const auto& item : *items) {
    call_args filter_args;
    filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    filter_args.named = args.named;
    auto mapped = filter(in, item, filter_args);
    if (!mapped)
      return mapped;
    out.push_back(std::move(mapped).value());
  }
  return value::sequence(std::move(out), seq_kind::generator);
}

result<value> do_select(interpreter& in, const value& v, call_args& args) {
  return select_items(in, v, args, true, false, "select");
}

result<value> do_reject(interpreter& in, const value& v, call_args& args) {
  return select_items(in, v, args, false, false, "reject");
}

result<value> do_selectattr(interpreter& in, const value& v, call_args& args) {
  return select_items(in, v, args, true, true, "selectattr");
}

result<value> do_rejectattr(interpreter& in, const value& v, call_args& args) {
  return select_items(in, v, args, false, true, "rejectattr");
}

result<value> do_abs(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "abs", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN)
      return make_error(errc::out_of_range, "integer overflow (past 64 bits)");
    return value{std::abs(v.as_int())};
  }
  if (v.is_float())
    return value{std::fabs(v.as_double())};
  return in.fail(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

result<value> do_round(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "round", args, {"precision", "method"}};
  auto precision = a.integer("precision", 0);
  auto method = a.string("method");
  if (auto ok = a.status(); !ok || !precision || !method)
    return !ok ? ok.error() : !precision ? precision.error() : method.error();
  const std::string how = method->value_or("common");
  if (how != "common" && how != "ceil" && how != "floor")
    return in.fail("round(): method must be 'common', 'ceil' or 'floor'");
  if (!v.is_numeric())
    return in.fail(fmt::format("round(): expected a number, not '{}'", type_name(v)));
  if (how == "common" && v.is_integral() && *precision >= 0)
    return value{v.as_int()};
  const double x = v.as_double();
  const double scale = std::pow(10.0, static_cast<double>(*precision));
  if (how == "ceil")
    return value{std::ceil(x * scale) / scale};
  if (how == "floor")
    return value{std::floor(x * scale) / scale};
  if (*precision < 0 || !std::isfinite(x))
    return value{std::nearbyint(x * scale) / scale};
  // printf rounds the exact binary value half-to-even, as Python's round does.
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<std::int64_t>(*precision, 300)),
                x);
  return value{std::strtod(buf, nullptr)};
}

namespace {

// Python's float(str): surrounding whitespace, a sign, digits with single
// underscores between them, a fraction, an exponent, inf and nan.
std::optional<double> parse_python_float(const std::string& text) {
  std::string s = strip(text, strip_side::both);
  std::string plain;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '_') {
      plain.push_back(s[i]);
      continue;
    }
    const bool between = i > 0 && i + 1 < s.size() &&
                         std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                         std::isdigit(static_cast<unsigned char>(s[i + 1]));
    if (!between)
      return std::nullopt;
  }
  if (plain.empty() || plain.find_first_of("xXpP(") != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(plain.c_str(), &end);
  if (end != plain.c_str() + plain.size())
    return std::nullopt;
  return d;
}

}  // namespace

result<value> do_int(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "int", args, {"default", "base"}};
  auto base = a.integer("base", 10);
  if (auto ok = a.status(); !ok || !base)
    return ok ? base.error() : ok.error();
  const value fallback = a.get_or("default", value{0});
  if (v.is_integral())
    return value{v.as_int()};
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18)
      return fallback;
    return value{static_cast<std::int64_t>(d)};
  }
  if (!v.is_string())
    return fallback;
  std::string s = strip(v.as_string(), strip_side::both);
  std::string digits;
  for (char c : s) {
    if (c != '_')
      digits.push_back(c);
  }
  int radix = static_cast<int>(*base);
  std::string_view body = digits;
  const bool negative = !body.empty() && body.front() == '-';
  if (!body.empty() && (body.front() == '-' || body.front() == '+'))
    body.remove_prefix(1);
  // Python's int(text, base): a 0x / 0o / 0b prefix matching the base (or
  // any of them with base 0) is allowed.
  int prefixed = 0;
  if (body.size() > 2 && body[0] == '0') {
    const char p = static_cast<char>(body[1] | 0x20);
    prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
  }
  if (radix == 0)
    radix = prefixed != 0 ? prefixed : 10;
  if (prefixed != 0 && prefixed == radix)
    body.remove_prefix(2);
  if (!body.empty() && radix >= 2 && radix <= 36) {
    char* end = nullptr;
    const std::string text{body};
    errno = 0;
    const long long n = std::strtoll(text.c_str(), &end, radix);
    if (end == text.c_str() + text.size() && errno == 0 &&
        text.find_first_of("+- ") == std::string::npos)
      return value{static_cast<std::int64_t>(negative ? -n : n)};
  }
  const auto d = parse_python_float(v.as_string());
  if (!d || !std::isfinite(*d) || std::fabs(*d) >= 9.2e18)
    return fallback;
  return value{static_cast<std::int64_t>(*d)};
}

result<value> do_float(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "float", args, {"default"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  const value fallback = a.get_or("default", value{0.0});
  if (v.is_numeric())
    return value{v.as_double()};
  if (!v.is_string())
    return fallback;
  const auto d = parse_python_float(v.as_string());
  return d ? value{*d} : fallback;
}

}  // namespace mstar::models::jinja::internal
