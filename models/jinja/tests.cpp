// Jinja's tests (`x is defined`, `x is divisibleby 3`...).
#include <cmath>
#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/args.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/py_format.hpp"
#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja {
namespace {

using internal::arg_reader;

// A test of the input alone.
template <bool (*Fn)(const value&)>
result<bool> unary(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "test", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return Fn(v);
}

bool is_defined(const value& v) {
  return !v.is_undefined();
}
bool is_undefined(const value& v) {
  return v.is_undefined();
}
bool is_none(const value& v) {
  return v.is_none();
}
bool is_boolean(const value& v) {
  return v.is_bool();
}
bool is_true(const value& v) {
  return v.is_bool() && v.as_bool();
}
bool is_false(const value& v) {
  return v.is_bool() && !v.as_bool();
}
bool is_integer(const value& v) {
  return v.is_int();
}
bool is_float(const value& v) {
  return v.is_float();
}
bool is_number(const value& v) {
  return v.is_numeric();
}
bool is_string(const value& v) {
  return v.is_string();
}
bool is_mapping(const value& v) {
  return v.is_object();
}
// Python: len() and __getitem__ work (Undefined has both; generators and
// dict views do not).
bool is_sequence(const value& v) {
  return v.is_string() || v.is_list_like() || v.is_object() || v.is_undefined();
}
bool is_iterable(const value& v) {
  return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
}
// Python's callable(): Undefined defines __call__ (which raises), so it counts.
bool is_callable(const value& v) {
  return v.is_function() || v.is_undefined();
}
bool is_escaped(const value&) {
  return false;
}
// str(value).islower() / isupper(): some cased character, none of the other case.
bool is_lower(const value& v) {
  auto text = internal::to_str(v);
  return text && internal::lower(*text) == *text && internal::upper(*text) != *text;
}
bool is_upper(const value& v) {
  auto text = internal::to_str(v);
  return text && internal::upper(*text) == *text && internal::lower(*text) != *text;
}

// Whether v % by == expected, as Python computes it (2.5 % 2 is 0.5: neither odd nor even).
result<bool> remainder_is(interpreter& in, const value& v, const value& by, int expected) {
  if (!v.is_numeric() || !by.is_numeric())
    return in.fail(
        fmt::format("divisibility needs numbers, not '{}' and '{}'", type_name(v), type_name(by)));
  auto r = internal::binary_op(in, "%", v, by);
  if (!r)
    return r.error();
  return internal::equals(*r, value{expected});
}

result<bool> test_odd(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "odd", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return remainder_is(in, v, value{2}, 1);
}

result<bool> test_even(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "even", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return remainder_is(in, v, value{2}, 0);
}

result<bool> test_divisibleby(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "divisibleby", args, {"num"}};
  auto num = a.required("num");
  if (auto ok = a.status(); !ok || !num)
    return ok ? num.error() : ok.error();
  return remainder_is(in, v, *num, 0);
}

result<bool> test_sameas(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "sameas", args, {"other"}};
  auto other = a.required("other");
  if (auto ok = a.status(); !ok || !other)
    return ok ? other.error() : ok.error();
  if (v.type() != other->type())
    return false;
  if (v.is_array())
    return &v.items() == &other->items();
  if (v.is_object())
    return &v.as_object() == &other->as_object();
  return internal::equals(v, *other);  // Python's identity for None, bools and small values
}

result<bool> test_in(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "in", args, {"seq"}};
  auto seq = a.required("seq");
  if (auto ok = a.status(); !ok || !seq)
    return ok ? seq.error() : ok.error();
  return internal::contains(in, *seq, v);
}

template <const char* Op>
result<bool> comparison(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, Op, args, {"other"}};
  auto other = a.required("other");
  if (auto ok = a.status(); !ok || !other)
    return ok ? other.error() : ok.error();
  return internal::compare_op(in, Op, v, *other);
}

result<bool> test_filter(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "filter", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

result<bool> test_test(interpreter& in, const value& v, call_args& args) {
  arg_reader a{in, "test", args, {}};
  if (auto ok = a.status(); !ok)
    return ok.error();
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

constexpr char eq[] = "==";
constexpr char ne[] = "!=";
constexpr char lt[] = "<";
constexpr char le[] = "<=";
constexpr char gt[] = ">";
constexpr char ge[] = ">=";

struct test_entry {
  std::string_view name;
  test_fn fn;
};

constexpr test_entry entries[] = {
    {"defined", unary<is_defined>},
    {"undefined", unary<is_undefined>},
    {"none", unary<is_none>},
    {"boolean", unary<is_boolean>},
    {"true", unary<is_true>},
    {"false", unary<is_false>},
    {"integer", unary<is_integer>},
    {"float", unary<is_float>},
    {"number", unary<is_number>},
    {"string", unary<is_string>},
    {"mapping", unary<is_mapping>},
    {"sequence", unary<is_sequence>},
    {"iterable", unary<is_iterable>},
    {"callable", unary<is_callable>},
    {"escaped", unary<is_escaped>},
    {"lower", unary<is_lower>},
    {"upper", unary<is_upper>},
    {"odd", test_odd},
    {"even", test_even},
    {"divisibleby", test_divisibleby},
    {"sameas", test_sameas},
    {"in", test_in},
    {"filter", test_filter},
    {"test", test_test},
    {"==", comparison<eq>},
    {"eq", comparison<eq>},
    {"equalto", comparison<eq>},
    {"!=", comparison<ne>},
    {"ne", comparison<ne>},
    {"<", comparison<lt>},
    {"lt", comparison<lt>},
    {"lessthan", comparison<lt>},
    {"<=", comparison<le>},
    {"le", comparison<le>},
    {">", comparison<gt>},
    {"gt", comparison<gt>},
    {"greaterthan", comparison<gt>},
    {">=", comparison<ge>},
    {"ge", comparison<ge>},
};

}  // namespace

test_fn find_test(std::string_view name) {
  for (const auto& entry : entries) {
    if (entry.name == name)
      return entry.fn;
  }
  return nullptr;
}

}  // namespace mstar::models::jinja
