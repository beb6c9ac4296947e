// The globals every template sees: Jinja's range, namespace and dict, and
// Hugging Face's raise_exception and strftime_now.
#include <array>
#include <ctime>
#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/args.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/interpreter.hpp"

namespace mstar::models::jinja {
namespace {

// Jinja's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr std::int64_t max_range = 100000;

result<value> range(interpreter& in, call_args& args) {
  if (!args.named.empty())
    return in.fail("range() takes no keyword arguments");
  std::array<std::int64_t, 3> bounds{0, 0, 1};
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    return in.fail(fmt::format("range() expects 1 to 3 arguments, got {}", p.size()));
  for (const auto& arg : p) {
    if (!arg.is_integral())
      return in.fail(fmt::format("range() arguments must be integers, not '{}'", type_name(arg)));
  }
  if (p.size() == 1) {
    bounds[1] = p[0].as_int();
  } else {
    bounds[0] = p[0].as_int();
    bounds[1] = p[1].as_int();
    if (p.size() == 3)
      bounds[2] = p[2].as_int();
  }
  const auto [start, stop, step] = bounds;
  if (step == 0)
    return in.fail("range() arg 3 must not be zero");
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  const long double count = span / static_cast<long double>(step);
  if (count > max_range) {
    return make_error(errc::out_of_range,
                      fmt::format("range() of more than {} items is refused (as Jinja's sandbox "
                                  "does)",
                                  max_range));
  }
  std::vector<value> items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
    items.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i))
      break;
  }
  if (auto ok = in.charge(items.size()); !ok)
    return ok.error();
  return internal::make_list(in, std::move(items));
}

result<object_data> mapping_arguments(interpreter& in, call_args& args, std::string_view name) {
  object_data data;
  if (args.positional.size() > 1)
    return in.fail(fmt::format("{}() takes at most one positional argument", name));
  if (!args.positional.empty()) {
    const value& source = args.positional.front();
    if (!source.is_object() && !source.is_namespace())
      return in.fail(fmt::format("{}() expects a mapping, not '{}'", name, type_name(source)));
    const object_data& from = source.is_object() ? source.as_object() : source.as_namespace();
    for (const auto& [key, v] : from.entries())
      data.set(key, v);
  }
  for (auto& [key, v] : args.named)
    data.set(key, std::move(v));
  return data;
}

result<value> make_namespace(interpreter& in, call_args& args) {
  auto data = mapping_arguments(in, args, "namespace");
  if (!data)
    return data.error();
  for (const auto& entry : data->entries()) {
    if (auto ok = in.check_namespace_name(entry.first); !ok)
      return ok.error();
  }
  return in.make_namespace(std::move(data).value());
}

result<value> make_dict(interpreter& in, call_args& args) {
  auto data = mapping_arguments(in, args, "dict");
  if (!data)
    return data.error();
  return value::object(std::move(data).value());
}

result<value> raise_exception(interpreter& in, call_args& args) {
  internal::arg_reader a{in, "raise_exception", args, {"message"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto text = internal::str(in, a.get_or("message", value{""}));
  if (!text)
    return text.error();
  return in.fail(fmt::format("raise_exception: {}", *text));
}

result<value> strftime_now(interpreter& in, call_args& args) {
  internal::arg_reader a{in, "strftime_now", args, {"format"}};
  auto format = a.string("format");
  if (auto ok = a.status(); !ok || !format)
    return ok ? format.error() : ok.error();
  std::tm now = in.now();
  // Fill the weekday and day of the year from the date, as Python's datetime does.
  std::tm copy = now;
  const std::time_t t = timegm(&copy);
  std::tm normalised{};
  gmtime_r(&t, &normalised);
  now.tm_wday = normalised.tm_wday;
  now.tm_yday = normalised.tm_yday;
  const std::string pattern = format->value_or("");
  if (pattern.size() > 256)
    return in.fail("strftime_now(): format longer than 256 characters");
  std::string out(1024, '\0');
  const std::size_t n =
      pattern.empty() ? 0 : std::strftime(out.data(), out.size(), pattern.c_str(), &now);
  out.resize(n);
  return value{std::move(out)};
}

}  // namespace

std::optional<value> find_global(std::string_view name) {
  static const value range_fn = value::function("range", range);
  static const value namespace_fn = value::function("namespace", make_namespace);
  static const value dict_fn = value::function("dict", make_dict);
  static const value raise_fn = value::function("raise_exception", raise_exception);
  static const value strftime_fn = value::function("strftime_now", strftime_now);
  if (name == "range")
    return range_fn;
  if (name == "namespace")
    return namespace_fn;
  if (name == "dict")
    return dict_fn;
  if (name == "raise_exception")
    return raise_fn;
  if (name == "strftime_now")
    return strftime_fn;
  return std::nullopt;
}

}  // namespace mstar::models::jinja
