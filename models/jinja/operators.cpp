// Python's arithmetic, comparison and membership over template values.
#include <cmath>
#include <fmt/format.h>

#include "models/jinja/internal/filter_support.hpp"
#include "models/jinja/internal/ops.hpp"
#include "models/jinja/internal/py_format.hpp"
#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja::internal {
namespace {

error unsupported_operands(interpreter& in, std::string_view op, const value& a, const value& b) {
  if (a.is_undefined() || b.is_undefined())
    return in.fail(fmt::format("an undefined value used with '{}'", op));
  return in.fail(fmt::format("unsupported operand types for {}: '{}' and '{}'", op, type_name(a),
                             type_name(b)));
}

result<value> integer_op(interpreter& in, std::string_view op, std::int64_t x, std::int64_t y) {
  std::int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(x, y, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(x, y, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(x, y, &r);
  } else if (op == "/") {
    if (y == 0)
      return in.fail("division by zero");
    return value{static_cast<double>(x) / static_cast<double>(y)};
  } else if (op == "//" || op == "%") {
    if (y == 0)
      return in.fail("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1)
      return in.fail("integer overflow");
    std::int64_t q = x / y;
    std::int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    r = op == "//" ? q : m;
  } else if (op == "**") {
    if (y < 0)
      return value{std::pow(static_cast<double>(x), static_cast<double>(y))};
    r = 1;
    for (std::int64_t i = 0; i < y && !overflow; ++i) {
      overflow = __builtin_mul_overflow(r, x, &r);
      if (r == 0 || r == 1)
        break;
    }
    if (x == -1)
      r = (y % 2 == 0) ? 1 : -1;
  }
  if (overflow)
    return make_error(errc::out_of_range, "integer overflow (past 64 bits)");
  return value{r};
}

result<value> float_op(interpreter& in, std::string_view op, double x, double y) {
  if (op == "+")
    return value{x + y};
  if (op == "-")
    return value{x - y};
  if (op == "*")
    return value{x * y};
  if (op == "**") {
    const double r = std::pow(x, y);
    if (std::isinf(r) && std::isfinite(x) && std::isfinite(y) && x != 0.0)
      return make_error(errc::out_of_range, "float power: numerical result out of range");
    return value{r};
  }
  if (y == 0.0)
    return in.fail("float division by zero");
  if (op == "/")
    return value{x / y};
  // CPython's float_divmod, so // and % agree with Python on every sign.
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (op == "%")
    return value{mod};
  if (div == 0.0)
    return value{std::copysign(0.0, x / y)};
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5)
    floordiv += 1.0;
  return value{floordiv};
}

result<value> repeat(interpreter& in, const value& seq, std::int64_t times) {
  const std::size_t n = times > 0 ? static_cast<std::size_t>(times) : 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (n > 0 && s.size() > in.bounds().max_output_bytes / n)
      return in.check_string(in.bounds().max_output_bytes + 1).error();
    std::string out;
    out.reserve(s.size() * n);
    for (std::size_t i = 0; i < n; ++i)
      out += s;
    return value{std::move(out)};
  }
  const auto& items = seq.items();
  if (n > 0 && items.size() > in.bounds().max_list_items / n)
    return in.check_list(in.bounds().max_list_items + 1).error();
  std::vector<value> out;
  for (std::size_t i = 0; i < n; ++i)
    out.insert(out.end(), items.begin(), items.end());
  return make_list(in, std::move(out), seq.is_tuple());
}

}  // namespace

result<value> binary_op(interpreter& in, std::string_view op, const value& a, const value& b) {
  if (op == "~") {
    auto left = str(in, a);
    if (!left)
      return left.error();
    auto right = str(in, b);
    if (!right)
      return right.error();
    return make_string(in, *left + *right);
  }
  if (a.is_numeric() && b.is_numeric()) {
    if (a.is_integral() && b.is_integral())
      return integer_op(in, op, a.as_int(), b.as_int());
    return float_op(in, op, a.as_double(), b.as_double());
  }
  if (op == "+") {
    if (a.is_string() && b.is_string())
      return make_string(in, a.as_string() + b.as_string());
    if (a.is_list_like() && b.is_list_like() && a.is_tuple() == b.is_tuple()) {
      std::vector<value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return make_list(in, std::move(items), a.is_tuple());
    }
  }
  if (op == "%" && a.is_string()) {
    // printf-style: a tuple spreads; one dict or list counts as a mapping.
    const bool spread = b.is_array() && b.is_tuple();
    const bool mapping = b.is_object() || b.is_undefined() || (b.is_list_like() && !b.is_tuple());
    auto text =
        printf_format(in, a.as_string(), spread ? b.items() : std::vector<value>{b}, mapping);
    if (!text)
      return text.error();
    return value{std::move(text).value()};
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list_like()) && b.is_integral())
      return repeat(in, a, b.as_int());
    if (a.is_integral() && (b.is_string() || b.is_list_like()))
      return repeat(in, b, a.as_int());
  }
  return unsupported_operands(in, op, a, b);
}

bool equals(const value& a, const value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (a.is_integral() && b.is_integral())
      return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.type() != b.type())
    return false;
  switch (a.type()) {
    case value::kind::undefined:
    case value::kind::none:
      return true;
    case value::kind::string:
      return a.as_string() == b.as_string();
    case value::kind::array: {
      if (a.sequence_kind() != b.sequence_kind() || a.items().size() != b.items().size())
        return false;
      if (a.sequence_kind() == seq_kind::generator)
        return &a.items() == &b.items();  // generators compare by identity
      for (std::size_t i = 0; i < a.items().size(); ++i) {
        if (!equals(a.items()[i], b.items()[i]))
          return false;
      }
      return true;
    }
    case value::kind::object: {
      if (a.as_object().size() != b.as_object().size())
        return false;
      for (const auto& [key, item] : a.as_object().entries()) {
        const value* other = b.as_object().find(key);
        if (other == nullptr || !equals(item, *other))
          return false;
      }
      return true;
    }
    case value::kind::ns:
      return a.namespace_handle() == b.namespace_handle();
    case value::kind::function:
      return &a.as_function() == &b.as_function();
    case value::kind::boolean:
    case value::kind::integer:
    case value::kind::number:
      break;
  }
  return false;
}

result<int> order(interpreter& in, const value& a, const value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (a.is_integral() && b.is_integral())
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.as_double();
    const double y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list_like() && b.is_list_like() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i]))
        continue;
      return order(in, x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined())
    return in.fail("an undefined value used in a comparison");
  return in.fail(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a),
                             type_name(b)));
}

result<bool> contains(interpreter& in, const value& container, const value& item) {
  switch (container.type()) {
    case value::kind::undefined:
      return false;
    case value::kind::string:
      if (!item.is_string())
        return in.fail(fmt::format("'in <string>' requires a string as left operand, not '{}'",
                                   type_name(item)));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case value::kind::array: {
      if (auto ok = in.charge(container.items().size()); !ok)
        return ok.error();
      for (const auto& x : container.items()) {
        if (equals(x, item))
          return true;
      }
      return false;
    }
    case value::kind::object:
      if (item.is_object() || (item.is_array() && item.sequence_kind() == seq_kind::list))
        return in.fail(fmt::format("unhashable type: '{}'", type_name(item)));
      return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
    case value::kind::none:
    case value::kind::boolean:
    case value::kind::integer:
    case value::kind::number:
    case value::kind::ns:
    case value::kind::function:
      break;
  }
  return in.fail(fmt::format("argument of type '{}' is not iterable", type_name(container)));
}

result<bool> compare_op(interpreter& in, std::string_view op, const value& a, const value& b) {
  if (op == "==")
    return equals(a, b);
  if (op == "!=")
    return !equals(a, b);
  if (op == "in" || op == "notin") {
    auto found = contains(in, b, a);
    if (!found)
      return found;
    return op == "in" ? *found : !*found;
  }
  auto c = order(in, a, b);
  if (!c)
    return c.error();
  if (op == "<")
    return *c < 0;
  if (op == "<=")
    return *c <= 0;
  if (op == ">")
    return *c > 0;
  return *c >= 0;
}

}  // namespace mstar::models::jinja::internal
