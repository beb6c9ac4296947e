#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.hpp"

namespace mstar::models::jinja {

class value;
class interpreter;

struct call_args;  // below `value`: its pairs need the complete type

/// What a callable value runs: a macro, a global such as `range`, or a method
/// bound to its receiver (`text.strip`).
using native_function = std::function<result<value>(interpreter&, call_args&)>;

/// A callable with the name its errors and its printed form use.
struct function_data {
  std::string name;
  native_function call;
};

/// What Python type a sequence of items stands for. Lists and tuples differ
/// only in printing; the others are what Jinja's filters and dict methods
/// return in Python: a generator (map, select, unique, items...: always
/// truthy, no len(), no indexing) or a dict view (no indexing).
enum class seq_kind : std::uint8_t { list, tuple, generator, dict_items, dict_keys, dict_values };

/// A sequence of items. `depth` is the nesting of containers below and
/// including this one, bounded so that printing and destroying a value never
/// recurses without limit.
struct array_data {
  std::vector<value> items;
  seq_kind kind = seq_kind::list;
  std::uint32_t depth = 1;
};

/// A string-keyed mapping that keeps insertion order, as Python dicts do
/// (`tojson` and `items` follow it). Lookups are linear for small mappings and
/// hashed past a threshold, so hostile inputs with many keys stay linear.
class object_data {
 public:
  /// The value under `key`, or nullptr.
  [[nodiscard]] const value* find(std::string_view key) const;

  /// Replaces the value under `key`, or appends the pair.
  void set(std::string key, value item);

  /// Appends a pair whose key the caller knows is new (JSON input).
  void append_unique(std::string key, value item);

  /// Drops every pair (breaks reference cycles through namespaces).
  void clear();

  [[nodiscard]] const std::vector<std::pair<std::string, value>>& entries() const {
    return entries_;
  }
  [[nodiscard]] std::size_t size() const;  // below `value`, which it needs complete

  /// The nesting of containers below and including this mapping.
  std::uint32_t depth = 1;

 private:
  [[nodiscard]] std::size_t position(std::string_view key) const;  // size() when absent
  void index_last();

  std::vector<std::pair<std::string, value>> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // filled past a threshold
};

/// The deepest nesting of lists and mappings a value may have.
inline constexpr std::uint32_t max_value_depth = 256;

/// A template value: Python's types as Jinja sees them, plus Undefined (an
/// absent variable: falsy, prints as nothing, iterates as empty) and
/// namespaces (the one mutable container). Lists, mappings and strings are
/// immutable and shared, so copies are cheap.
class value {
 public:
  enum class kind : std::uint8_t {
    undefined,
    none,
    boolean,
    integer,
    number,
    string,
    array,
    object,
    ns,
    function,
  };

  struct none_tag {};

  value() = default;
  explicit value(bool b) : data_(b) {}
  explicit value(std::int64_t i) : data_(i) {}
  explicit value(int i) : data_(std::int64_t{i}) {}
  explicit value(double d) : data_(d) {}
  explicit value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}
  explicit value(std::string_view s) : value(std::string{s}) {}
  explicit value(const char* s) : value(std::string{s}) {}

  [[nodiscard]] static value none() { return value{none_tag{}}; }
  /// A list (or tuple); fails when nesting it would pass max_value_depth.
  [[nodiscard]] static result<value> list(std::vector<value> items, bool tuple = false);
  /// A sequence of any kind; fails when nesting it would pass max_value_depth.
  [[nodiscard]] static result<value> sequence(std::vector<value> items, seq_kind kind);
  /// A mapping; fails when nesting it would pass max_value_depth.
  [[nodiscard]] static result<value> object(object_data data);
  /// A fresh namespace holding `data`.
  [[nodiscard]] static value make_namespace(object_data data);
  [[nodiscard]] static value function(std::string name, native_function call);

  /// Converts JSON (keys keep their order); fails past max_value_depth.
  [[nodiscard]] static result<value> from_json(const nlohmann::ordered_json& json);

  [[nodiscard]] kind type() const { return static_cast<kind>(data_.index()); }
  [[nodiscard]] bool is_undefined() const { return type() == kind::undefined; }
  [[nodiscard]] bool is_none() const { return type() == kind::none; }
  [[nodiscard]] bool is_bool() const { return type() == kind::boolean; }
  [[nodiscard]] bool is_int() const { return type() == kind::integer; }
  [[nodiscard]] bool is_float() const { return type() == kind::number; }
  [[nodiscard]] bool is_string() const { return type() == kind::string; }
  [[nodiscard]] bool is_array() const { return type() == kind::array; }
  [[nodiscard]] bool is_object() const { return type() == kind::object; }
  [[nodiscard]] bool is_namespace() const { return type() == kind::ns; }
  [[nodiscard]] bool is_function() const { return type() == kind::function; }
  /// Python's numbers: bool, int and float (bool is an int there).
  [[nodiscard]] bool is_numeric() const { return is_bool() || is_int() || is_float(); }
  /// bool or int.
  [[nodiscard]] bool is_integral() const { return is_bool() || is_int(); }

  [[nodiscard]] bool as_bool() const { return std::get<bool>(data_); }
  /// The integer of an int or bool.
  [[nodiscard]] std::int64_t as_int() const;
  /// Any numeric as a double.
  [[nodiscard]] double as_double() const;
  [[nodiscard]] const std::string& as_string() const { return *std::get<string_ptr>(data_); }
  [[nodiscard]] const std::vector<value>& items() const { return array_ref().items; }
  [[nodiscard]] seq_kind sequence_kind() const { return array_ref().kind; }
  [[nodiscard]] bool is_tuple() const { return array_ref().kind == seq_kind::tuple; }
  /// A list or tuple: indexable, sliceable, concatenable.
  [[nodiscard]] bool is_list_like() const {
    return is_array() &&
           (array_ref().kind == seq_kind::list || array_ref().kind == seq_kind::tuple);
  }
  [[nodiscard]] const object_data& as_object() const { return *std::get<object_ptr>(data_); }
  /// The mutable contents of a namespace (shared by every copy of it).
  [[nodiscard]] object_data& as_namespace() const { return *std::get<namespace_ptr>(data_); }
  [[nodiscard]] const std::shared_ptr<object_data>& namespace_handle() const {
    return std::get<namespace_ptr>(data_);
  }
  [[nodiscard]] const function_data& as_function() const { return *std::get<function_ptr>(data_); }

  /// Container nesting (1 for a flat list or mapping, 0 for scalars).
  [[nodiscard]] std::uint32_t depth() const;

  /// Python truthiness; Undefined is false, namespaces and functions true.
  [[nodiscard]] bool truthy() const;

 private:
  using string_ptr = std::shared_ptr<const std::string>;
  using array_ptr = std::shared_ptr<const array_data>;
  using object_ptr = std::shared_ptr<const object_data>;
  using namespace_ptr = std::shared_ptr<object_data>;
  using function_ptr = std::shared_ptr<const function_data>;

  explicit value(none_tag tag) : data_(tag) {}
  [[nodiscard]] const array_data& array_ref() const { return *std::get<array_ptr>(data_); }

  // The alternatives' order is `kind`'s.
  std::variant<std::monostate, none_tag, bool, std::int64_t, double, string_ptr, array_ptr,
               object_ptr, namespace_ptr, function_ptr>
      data_;
};

inline std::size_t object_data::size() const {
  return entries_.size();
}

/// The positional and keyword arguments of one call, in the order written.
struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> named;
};

/// The Python type name of a value, for messages ("str", "list", "undefined").
[[nodiscard]] std::string_view type_name(const value& v);

}  // namespace mstar::models::jinja
