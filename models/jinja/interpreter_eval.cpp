// The interpreter's expressions.
#include <fmt/format.h>

#include "models/jinja/internal/ops.hpp"
#include "models/jinja/interpreter.hpp"

namespace mstar::models::jinja {

result<value> interpreter::eval(const expr& e) {
  depth_guard guard{*this};
  line_ = e.line;
  if (guard.too_deep()) {
    return make_error(errc::out_of_range, fmt::format("line {}: template nests or recurses "
                                                      "deeper than {} levels",
                                                      e.line, bounds_.max_depth));
  }
  switch (e.kind) {
    case expr_kind::literal:
      return e.constant;
    case expr_kind::name:
      return lookup(e.name);
    case expr_kind::list:
    case expr_kind::tuple:
    case expr_kind::dict:
      return eval_collection(e);
    case expr_kind::attribute: {
      auto obj = eval(*e.args[0]);
      if (!obj)
        return obj;
      return internal::get_attribute(*obj, e.name);
    }
    case expr_kind::item: {
      auto obj = eval(*e.args[0]);
      if (!obj)
        return obj;
      auto key = eval(*e.args[1]);
      if (!key)
        return key;
      return internal::get_item(*obj, *key);
    }
    case expr_kind::slice: {
      auto obj = eval(*e.args[0]);
      if (!obj)
        return obj;
      value bounds[3];
      for (std::size_t i = 0; i < 3; ++i) {
        if (!e.args[i + 1])
          continue;
        auto b = eval(*e.args[i + 1]);
        if (!b)
          return b;
        bounds[i] = std::move(b).value();
      }
      line_ = e.line;
      return internal::slice(*this, *obj, &bounds[0], &bounds[1], &bounds[2]);
    }
    case expr_kind::call:
      return eval_call(e);
    case expr_kind::filter:
      return eval_filter(e, nullptr);
    case expr_kind::test: {
      auto subject = eval(*e.args[0]);
      if (!subject)
        return subject;
      auto args = eval_args(e, 1);
      if (!args)
        return args.error();
      line_ = e.line;
      auto passed = e.test(*this, *subject, *args);
      if (!passed)
        return passed.error();
      return value{*passed};
    }
    case expr_kind::unary: {
      auto operand = eval(*e.args[0]);
      if (!operand)
        return operand;
      if (e.name == "not")
        return value{!operand->truthy()};
      line_ = e.line;
      if (operand->is_integral()) {
        if (e.name == "+")
          return value{operand->as_int()};
        if (operand->as_int() == INT64_MIN)
          return make_error(errc::out_of_range, "integer overflow (past 64 bits)");
        return value{-operand->as_int()};
      }
      if (operand->is_float())
        return value{e.name == "-" ? -operand->as_double() : operand->as_double()};
      return fail(fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(*operand)));
    }
    case expr_kind::binary:
      return eval_binary(e);
    case expr_kind::compare:
      return eval_compare(e);
    case expr_kind::conditional: {
      auto cond = eval(*e.args[1]);
      if (!cond)
        return cond;
      if (cond->truthy())
        return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : result<value>{value{}};
    }
  }
  return value{};
}

result<value> interpreter::eval_collection(const expr& e) {
  if (e.kind == expr_kind::dict) {
    object_data data;
    for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
      auto key = eval(*e.args[i]);
      if (!key)
        return key;
      auto v = eval(*e.args[i + 1]);
      if (!v)
        return v;
      if (!key->is_string()) {
        line_ = e.line;
        return fail(
            fmt::format("dict literal keys must be strings here, not '{}'", type_name(*key)));
      }
      data.set(key->as_string(), std::move(v).value());
    }
    return value::object(std::move(data));
  }
  std::vector<value> items;
  items.reserve(e.args.size());
  for (const auto& item : e.args) {
    auto v = eval(*item);
    if (!v)
      return v;
    items.push_back(std::move(v).value());
  }
  return value::list(std::move(items), e.kind == expr_kind::tuple);
}

result<call_args> interpreter::eval_args(const expr& e, std::size_t first) {
  call_args args;
  for (std::size_t i = first; i < e.args.size(); ++i) {
    auto v = eval(*e.args[i]);
    if (!v)
      return v.error();
    args.positional.push_back(std::move(v).value());
  }
  for (const auto& [key, arg] : e.named) {
    auto v = eval(*arg);
    if (!v)
      return v.error();
    args.named.emplace_back(key, std::move(v).value());
  }
  return args;
}

result<value> interpreter::eval_call(const expr& e) {
  auto callee = eval(*e.args[0]);
  if (!callee)
    return callee;
  auto args = eval_args(e, 1);
  if (!args)
    return args.error();
  line_ = e.line;
  return call(*callee, *args);
}

result<value> interpreter::eval_filter(const expr& e, const value* block_input) {
  value input;
  if (e.args[0]) {
    // A filter block's input reaches the innermost filter of its chain.
    auto v = e.args[0]->kind == expr_kind::filter ? eval_filter(*e.args[0], block_input)
                                                  : eval(*e.args[0]);
    if (!v)
      return v;
    input = std::move(v).value();
  } else if (block_input != nullptr) {
    input = *block_input;
  }
  auto args = eval_args(e, 1);
  if (!args)
    return args.error();
  line_ = e.line;
  if (auto ok = charge(1); !ok)
    return ok.error();
  return e.filter(*this, input, *args);
}

result<value> interpreter::eval_binary(const expr& e) {
  auto left = eval(*e.args[0]);
  if (!left)
    return left;
  if (e.name == "and") {
    if (!left->truthy())
      return left;
    return eval(*e.args[1]);
  }
  if (e.name == "or") {
    if (left->truthy())
      return left;
    return eval(*e.args[1]);
  }
  auto right = eval(*e.args[1]);
  if (!right)
    return right;
  line_ = e.line;
  return internal::binary_op(*this, e.name, *left, *right);
}

result<value> interpreter::eval_compare(const expr& e) {
  auto left = eval(*e.args[0]);
  if (!left)
    return left;
  value current = std::move(left).value();
  for (std::size_t i = 0; i < e.ops.size(); ++i) {
    auto right = eval(*e.args[i + 1]);
    if (!right)
      return right;
    line_ = e.line;
    auto holds = internal::compare_op(*this, e.ops[i], current, *right);
    if (!holds)
      return holds.error();
    if (!*holds)
      return value{false};
    current = std::move(right).value();
  }
  return value{true};
}

}  // namespace mstar::models::jinja
