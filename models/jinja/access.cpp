// Jinja's attribute and item access, slicing and iteration over values.
#include <algorithm>
#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/py_format.hpp"
#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja::internal {
namespace {

// Python dict attributes: `d.items` is the method even when d has an "items"
// key; the mutating ones are refused by the immutable sandbox (Undefined).
bool dict_attribute(std::string_view name) {
  static constexpr std::string_view names[] = {
      "items", "keys", "values", "get", "pop", "popitem", "setdefault", "update", "clear", "copy",
  };
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Python's slice index normalisation (PySlice_AdjustIndices).
struct slice_range {
  std::int64_t start, stop, step, count;
};

result<slice_range> adjust(interpreter& in, std::int64_t length, const value* start,
                           const value* stop, const value* step) {
  auto bound = [&](const value* v, std::int64_t& out) -> result<bool> {
    if (v == nullptr || v->is_none() || v->is_undefined())
      return false;
    if (!v->is_integral())
      return in.fail(
          fmt::format("slice indices must be integers or None, not '{}'", type_name(*v)));
    out = v->as_int();
    return true;
  };
  slice_range r{0, 0, 1, 0};
  if (auto given = bound(step, r.step); !given)
    return given.error();
  if (r.step == 0)
    return in.fail("slice step cannot be zero");
  const bool forward = r.step > 0;
  auto clamp = [&](const value* v, std::int64_t fallback) -> result<std::int64_t> {
    std::int64_t i = 0;
    auto given = bound(v, i);
    if (!given)
      return given.error();
    if (!*given)
      return fallback;
    if (i < 0) {
      i += length;
      if (i < 0)
        i = forward ? 0 : -1;
    } else if (i >= length) {
      i = forward ? length : length - 1;
    }
    return i;
  };
  auto s = clamp(start, forward ? 0 : length - 1);
  if (!s)
    return s.error();
  auto e = clamp(stop, forward ? length : -1);
  if (!e)
    return e.error();
  r.start = *s;
  r.stop = *e;
  if (forward)
    r.count = r.stop > r.start ? (r.stop - r.start - 1) / r.step + 1 : 0;
  else
    r.count = r.stop < r.start ? (r.start - r.stop - 1) / (-r.step) + 1 : 0;
  return r;
}

}  // namespace

value get_attribute(const value& obj, std::string_view name) {
  switch (obj.type()) {
    case value::kind::object: {
      if (dict_attribute(name))
        return find_method(obj, name).value_or(value{});
      const value* item = obj.as_object().find(name);
      return item != nullptr ? *item : value{};
    }
    case value::kind::ns: {
      const value* item = obj.as_namespace().find(name);
      return item != nullptr ? *item : value{};
    }
    case value::kind::string:
      return find_method(obj, name).value_or(value{});
    case value::kind::array:
      return obj.is_list_like() ? find_method(obj, name).value_or(value{}) : value{};
    case value::kind::undefined:
    case value::kind::none:
    case value::kind::boolean:
    case value::kind::integer:
    case value::kind::number:
    case value::kind::function:
      break;
  }
  return value{};
}

value get_item(const value& obj, const value& key) {
  if (key.is_string()) {
    if (obj.is_object()) {
      const value* item = obj.as_object().find(key.as_string());
      if (item != nullptr)
        return *item;
    }
    return get_attribute(obj, key.as_string());  // Jinja falls back to getattr
  }
  if (!key.is_integral())
    return value{};
  const std::int64_t index = key.as_int();
  if (obj.is_list_like()) {
    const auto n = static_cast<std::int64_t>(obj.items().size());
    const std::int64_t i = index < 0 ? index + n : index;
    return i >= 0 && i < n ? obj.items()[static_cast<std::size_t>(i)] : value{};
  }
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (is_ascii(s)) {
      const auto n = static_cast<std::int64_t>(s.size());
      const std::int64_t i = index < 0 ? index + n : index;
      return i >= 0 && i < n ? value{s.substr(static_cast<std::size_t>(i), 1)} : value{};
    }
    const std::u32string cps = decode(s);
    const auto n = static_cast<std::int64_t>(cps.size());
    const std::int64_t i = index < 0 ? index + n : index;
    return i >= 0 && i < n ? value{encode(cps.substr(static_cast<std::size_t>(i), 1))} : value{};
  }
  return value{};
}

result<value> slice(interpreter& in, const value& obj, const value* start, const value* stop,
                    const value* step) {
  if (obj.is_array() && !obj.is_list_like())
    return value{};  // generators and dict views cannot be sliced
  if (obj.is_array()) {
    auto r = adjust(in, static_cast<std::int64_t>(obj.items().size()), start, stop, step);
    if (!r)
      return r.error();
    std::vector<value> out;
    out.reserve(static_cast<std::size_t>(r->count));
    for (std::int64_t k = 0, i = r->start; k < r->count; ++k, i += r->step)
      out.push_back(obj.items()[static_cast<std::size_t>(i)]);
    return value::list(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::u32string cps = decode(obj.as_string());
    auto r = adjust(in, static_cast<std::int64_t>(cps.size()), start, stop, step);
    if (!r)
      return r.error();
    std::u32string out;
    for (std::int64_t k = 0, i = r->start; k < r->count; ++k, i += r->step)
      out.push_back(cps[static_cast<std::size_t>(i)]);
    return value{encode(out)};
  }
  if (obj.is_undefined())
    return value{};
  return in.fail(fmt::format("'{}' object is not subscriptable with a slice", type_name(obj)));
}

result<std::vector<value>> iterate(interpreter& in, const value& v) {
  switch (v.type()) {
    case value::kind::undefined:
      return std::vector<value>{};
    case value::kind::array:
      return v.items();
    case value::kind::object: {
      std::vector<value> keys;
      keys.reserve(v.as_object().size());
      for (const auto& entry : v.as_object().entries())
        keys.emplace_back(entry.first);
      return keys;
    }
    case value::kind::string: {
      std::vector<value> chars;
      for (char32_t cp : decode(v.as_string())) {
        std::string one;
        append_utf8(one, cp);
        chars.emplace_back(std::move(one));
      }
      return chars;
    }
    case value::kind::none:
    case value::kind::boolean:
    case value::kind::integer:
    case value::kind::number:
    case value::kind::ns:
    case value::kind::function:
      break;
  }
  return in.fail(fmt::format("'{}' object is not iterable", type_name(v)));
}

result<std::string> str(interpreter& in, const value& v) {
  auto text = to_str(v);
  if (!text)
    return text;
  if (auto ok = in.check_string(text->size()); !ok)
    return ok.error();
  return text;
}

result<value> make_string(interpreter& in, std::string s) {
  if (auto ok = in.check_string(s.size()); !ok)
    return ok.error();
  return value{std::move(s)};
}

result<value> make_list(interpreter& in, std::vector<value> items, bool tuple) {
  if (auto ok = in.check_list(items.size()); !ok)
    return ok.error();
  return value::list(std::move(items), tuple);
}

}  // namespace mstar::models::jinja::internal
