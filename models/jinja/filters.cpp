// Jinja's filters over sequences, mappings and numbers.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/args.hpp"
#include "models/jinja/internal/filter_support.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/tables.hpp"

namespace mstar::models::jinja::internal {
namespace {

result<value> do_length(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "length", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  switch (v.type()) {
    case value::kind::undefined:
      return value{0};
    case value::kind::string:
      return value{static_cast<std::int64_t>(length(v.as_string()))};
    case value::kind::array:
      if (v.sequence_kind() == seq_kind::generator)
        break;
      return value{static_cast<std::int64_t>(v.items().size())};
    case value::kind::object:
      return value{static_cast<std::int64_t>(v.as_object().size())};
    case value::kind::none:
    case value::kind::boolean:
    case value::kind::integer:
    case value::kind::number:
    case value::kind::ns:
    case value::kind::function:
      break;
  }
  return in.fail(fmt::format("object of type '{}' has no len()", type_name(v)));
}

result<value> do_first(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "first", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  return items->empty() ? value{} : items->front();
}

result<value> do_last(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "last", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  if (v.is_array() && v.sequence_kind() == seq_kind::generator)
    return in.fail("last: a generator cannot be reversed");
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  return items->empty() ? value{} : items->back();
}

result<value> do_join(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "join", args, {"d", "attribute"}};
  auto sep = a.string("d");
  if (auto ok = a.status(); !ok || !sep)
    return ok ? sep.error() : ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  if (auto ok = in.charge(items->size()); !ok)
    return ok.error();
  std::string out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    const value* attribute = a.get("attribute");
    const value item = attribute != nullptr ? get_path(in, (*items)[i], *attribute) : (*items)[i];
    auto text = str(in, item);
    if (!text)
      return text.error();
    if (i > 0)
      out += sep->value_or("");
    out += *text;
    if (auto ok = in.check_string(out.size()); !ok)
      return ok.error();
  }
  return value{std::move(out)};
}

result<value> do_list(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "list", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  return make_list(in, std::move(items).value());
}

result<value> do_items(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "items", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  if (v.is_undefined())
    return value::sequence({}, seq_kind::generator);
  if (!v.is_object())
    return in.fail(
        fmt::format("items: can only get item pairs from a mapping, not '{}'", type_name(v)));
  return pairs(in, v.as_object(), seq_kind::generator);
}

result<value> do_dictsort(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "dictsort", args, {"case_sensitive", "by", "reverse"}};
  auto by = a.string("by");
  if (auto ok = a.status(); !ok || !by)
    return ok ? by.error() : ok.error();
  if (!v.is_object())
    return in.fail(fmt::format("dictsort: expected a mapping, not '{}'", type_name(v)));
  const std::size_t part = by->value_or("key") == "value" ? 1 : 0;
  if (by->value_or("key") != "key" && part == 0)
    return in.fail("dictsort: you can only sort by either 'key' or 'value'");
  auto list = pairs(in, v.as_object(), seq_kind::list);
  if (!list)
    return list;
  std::vector<value> items = list->items();
  const bool sensitive = a.flag("case_sensitive", false);
  auto sorted = sort_values(in, items, a.flag("reverse", false), [&](const value& pair) {
    return sensitive ? pair.items()[part] : fold_case(pair.items()[part]);
  });
  if (!sorted)
    return sorted.error();
  return make_list(in, std::move(items));
}

result<value> do_sort(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "sort", args, {"reverse", "case_sensitive", "attribute"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  const bool sensitive = a.flag("case_sensitive", false);
  const value* attribute = a.get("attribute");
  auto sorted = sort_values(in, *items, a.flag("reverse", false), [&](const value& item) {
    value key = attribute != nullptr ? get_path(in, item, *attribute) : item;
    return sensitive ? key : fold_case(key);
  });
  if (!sorted)
    return sorted.error();
  return make_list(in, std::move(items).value());
}

result<value> do_reverse(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "reverse", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  if (v.is_string()) {
    std::u32string cps = decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return value{encode(cps)};
  }
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  std::reverse(items->begin(), items->end());
  // reversed(seq) is an iterator; a generator is reversed into a list.
  const bool generator = v.is_array() && v.sequence_kind() == seq_kind::generator;
  return value::sequence(std::move(items).value(),
                         generator ? seq_kind::list : seq_kind::generator);
}

result<value> do_unique(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "unique", args, {"case_sensitive", "attribute"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  if (auto ok = in.charge(items->size() * items->size() / 16 + items->size()); !ok)
    return ok.error();
  const bool sensitive = a.flag("case_sensitive", false);
  const value* attribute = a.get("attribute");
  std::vector<value> out;
  std::vector<value> seen;
  for (const auto& item : *items) {
    value key = attribute != nullptr ? get_path(in, item, *attribute) : item;
    if (!sensitive)
      key = fold_case(key);
    if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return equals(s, key); })) {
      seen.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return value::sequence(std::move(out), seq_kind::generator);
}

result<value> extreme(interpreter& in, const value& v, call_args& args, bool largest) {
  arg_reader a{in, largest ? "max" : "min", args, {"case_sensitive", "attribute"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  if (items->empty())
    return value{};
  const bool sensitive = a.flag("case_sensitive", false);
  const value* attribute = a.get("attribute");
  auto key = [&](const value& item) {
    value k = attribute != nullptr ? get_path(in, item, *attribute) : item;
    return sensitive ? k : fold_case(k);
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < items->size(); ++i) {
    auto c = order(in, key((*items)[i]), key((*items)[best]));
    if (!c)
      return c.error();
    if (largest ? *c > 0 : *c < 0)
      best = i;
  }
  return (*items)[best];
}

result<value> do_max(interpreter& in, const value& v, call_args& args) {
  return extreme(in, v, args, true);
}

result<value> do_min(interpreter& in, const value& v, call_args& args) {
  return extreme(in, v, args, false);
}

result<value> do_sum(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "sum", args, {"attribute", "start"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  auto items = iterate(in, v);
  if (!items)
    return items.error();
  value total = a.get_or("start", value{0});
  const value* attribute = a.get("attribute");
  for (const auto& item : *items) {
    auto next =
        binary_op(in, "+", total, attribute != nullptr ? get_path(in, item, *attribute) : item);
    if (!next)
      return next;
    total = std::move(next).value();
  }
  return total;
}

result<value> do_default(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "default", args, {"default_value", "boolean"}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  if (v.is_undefined() || (a.flag("boolean", false) && !v.truthy()))
    return a.get_or("default_value", value{""});
  return v;
}

result<value> do_attr(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "attr", args, {"name"}};
  auto name = a.string("name");
  if (auto ok = a.status(); !ok || !name)
    return ok ? name.error() : ok.error();
  // Python's getattr only: methods and namespace attributes, never dict items.
  if (v.is_namespace())
    return get_attribute(v, name->value_or(""));
  return find_method(v, name->value_or("")).value_or(value{});
}

constexpr filter_entry entries[] = {
    {"length", do_length},
    {"count", do_length},
    {"first", do_first},
    {"last", do_last},
    {"join", do_join},
    {"list", do_list},
    {"items", do_items},
    {"dictsort", do_dictsort},
    {"sort", do_sort},
    {"reverse", do_reverse},
    {"unique", do_unique},
    {"max", do_max},
    {"min", do_min},
    {"sum", do_sum},
    {"default", do_default},
    {"d", do_default},
    {"attr", do_attr},
    {"map", do_map},
    {"select", do_select},
    {"reject", do_reject},
    {"selectattr", do_selectattr},
    {"rejectattr", do_rejectattr},
    {"abs", do_abs},
    {"round", do_round},
    {"int", do_int},
    {"float", do_float},
};

}  // namespace

std::span<const filter_entry> sequence_filters() {
  return entries;
}

}  // namespace mstar::models::jinja::internal

namespace mstar::models::jinja {

filter_fn find_filter(std::string_view name) {
  for (auto table : {internal::sequence_filters(), internal::text_filters()}) {
    for (const auto& entry : table) {
      if (entry.name == name)
        return entry.fn;
    }
  }
  return nullptr;
}

}  // namespace mstar::models::jinja
