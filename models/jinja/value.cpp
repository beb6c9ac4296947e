#include "models/jinja/value.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace mstar::models::jinja {
namespace {

constexpr std::size_t index_threshold = 16;

std::uint32_t deepest(const std::vector<value>& items) {
  std::uint32_t d = 0;
  for (const auto& item : items)
    d = std::max(d, item.depth());
  return d;
}

error too_deep() {
  return make_error(errc::out_of_range,
                    fmt::format("value nests deeper than {} lists or mappings", max_value_depth));
}

}  // namespace

const value* object_data::find(std::string_view key) const {
  const std::size_t at = position(key);
  return at == entries_.size() ? nullptr : &entries_[at].second;
}

std::size_t object_data::position(std::string_view key) const {
  if (!index_.empty()) {
    const auto it = index_.find(std::string{key});
    return it == index_.end() ? entries_.size() : it->second;
  }
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first == key)
      return i;
  }
  return entries_.size();
}

void object_data::set(std::string key, value item) {
  const std::size_t at = position(key);
  if (at != entries_.size()) {
    depth = std::max(depth, item.depth() + 1);
    entries_[at].second = std::move(item);
    return;
  }
  append_unique(std::move(key), std::move(item));
}

void object_data::append_unique(std::string key, value item) {
  depth = std::max(depth, item.depth() + 1);
  entries_.emplace_back(std::move(key), std::move(item));
  index_last();
}

void object_data::index_last() {
  if (entries_.size() < index_threshold)
    return;
  if (index_.empty()) {
    for (std::size_t i = 0; i < entries_.size(); ++i)
      index_.emplace(entries_[i].first, i);
    return;
  }
  index_.emplace(entries_.back().first, entries_.size() - 1);
}

void object_data::clear() {
  // Move out first: destroying the values may reach this namespace again.
  auto doomed = std::move(entries_);
  entries_.clear();
  index_.clear();
}

result<value> value::list(std::vector<value> items, bool tuple) {
  return sequence(std::move(items), tuple ? seq_kind::tuple : seq_kind::list);
}

result<value> value::sequence(std::vector<value> items, seq_kind kind) {
  const std::uint32_t d = deepest(items) + 1;
  if (d > max_value_depth)
    return too_deep();
  value out;
  out.data_ = std::make_shared<const array_data>(array_data{std::move(items), kind, d});
  return out;
}

result<value> value::object(object_data data) {
  if (data.depth > max_value_depth)
    return too_deep();
  value out;
  out.data_ = std::make_shared<const object_data>(std::move(data));
  return out;
}

value value::make_namespace(object_data data) {
  value out;
  out.data_ = std::make_shared<object_data>(std::move(data));
  return out;
}

value value::function(std::string name, native_function call) {
  value out;
  out.data_ =
      std::make_shared<const function_data>(function_data{std::move(name), std::move(call)});
  return out;
}

namespace {

result<value> convert(const nlohmann::ordered_json& json, std::uint32_t level) {
  if (level > max_value_depth)
    return too_deep();
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return value{json.get<bool>()};
    case nlohmann::ordered_json::value_t::number_integer:
      return value{json.get<std::int64_t>()};
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX))
        return value{static_cast<double>(u)};
      return value{static_cast<std::int64_t>(u)};
    }
    case nlohmann::ordered_json::value_t::number_float:
      return value{json.get<double>()};
    case nlohmann::ordered_json::value_t::string:
      return value{json.get<std::string>()};
    case nlohmann::ordered_json::value_t::binary:
      return make_error(errc::unsupported, "binary JSON values have no template form");
    case nlohmann::ordered_json::value_t::array: {
      std::vector<value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        auto v = convert(item, level + 1);
        if (!v)
          return v.error();
        items.push_back(std::move(v).value());
      }
      return value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      object_data data;
      for (const auto& [key, item] : json.items()) {
        auto v = convert(item, level + 1);
        if (!v)
          return v.error();
        data.set(key, std::move(v).value());
      }
      return value::object(std::move(data));
    }
  }
  return make_error(errc::internal, "unknown JSON type");
}

}  // namespace

result<value> value::from_json(const nlohmann::ordered_json& json) {
  return convert(json, 1);
}

std::int64_t value::as_int() const {
  if (is_bool())
    return as_bool() ? 1 : 0;
  return std::get<std::int64_t>(data_);
}

double value::as_double() const {
  if (is_float())
    return std::get<double>(data_);
  return static_cast<double>(as_int());
}

std::uint32_t value::depth() const {
  switch (type()) {
    case kind::array:
      return array_ref().depth;
    case kind::object:
      return as_object().depth;
    case kind::ns:
    case kind::undefined:
    case kind::none:
    case kind::boolean:
    case kind::integer:
    case kind::number:
    case kind::string:
    case kind::function:
      return 0;
  }
  return 0;
}

bool value::truthy() const {
  switch (type()) {
    case kind::undefined:
    case kind::none:
      return false;
    case kind::boolean:
      return as_bool();
    case kind::integer:
      return as_int() != 0;
    case kind::number:
      return as_double() != 0.0;
    case kind::string:
      return !as_string().empty();
    case kind::array:
      return sequence_kind() == seq_kind::generator || !items().empty();
    case kind::object:
      return as_object().size() != 0;
    case kind::ns:
    case kind::function:
      return true;
  }
  return false;
}

std::string_view type_name(const value& v) {
  switch (v.type()) {
    case value::kind::undefined:
      return "undefined";
    case value::kind::none:
      return "NoneType";
    case value::kind::boolean:
      return "bool";
    case value::kind::integer:
      return "int";
    case value::kind::number:
      return "float";
    case value::kind::string:
      return "str";
    case value::kind::array:
      switch (v.sequence_kind()) {
        case seq_kind::list:
          return "list";
        case seq_kind::tuple:
          return "tuple";
        case seq_kind::generator:
          return "generator";
        case seq_kind::dict_items:
          return "dict_items";
        case seq_kind::dict_keys:
          return "dict_keys";
        case seq_kind::dict_values:
          return "dict_values";
      }
      return "list";
    case value::kind::object:
      return "dict";
    case value::kind::ns:
      return "Namespace";
    case value::kind::function:
      return "function";
  }
  return "value";
}

}  // namespace mstar::models::jinja
