// The parser's expressions, following Jinja's parser.py level by level.
#include <algorithm>
#include <fmt/format.h>

#include "models/jinja/internal/parser_impl.hpp"

namespace mstar::models::jinja::internal {
namespace {

bool is_tuple_end(const token& t, std::initializer_list<std::string_view> extra_end) {
  if (t.kind == token_kind::variable_end || t.kind == token_kind::block_end ||
      t.kind == token_kind::eof || (t.kind == token_kind::op && t.text == ")")) {
    return true;
  }
  return t.kind == token_kind::name &&
         std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
}

expr_ptr binary(std::string op, expr_ptr left, expr_ptr right) {
  auto n = std::make_unique<expr>();
  n->kind = expr_kind::binary;
  n->line = left->line;
  n->name = std::move(op);
  n->args.push_back(std::move(left));
  n->args.push_back(std::move(right));
  return n;
}

}  // namespace

result<expr_ptr> parser::tuple_expr(bool with_condexpr,
                                    std::initializer_list<std::string_view> extra_end,
                                    bool explicit_parentheses) {
  const int line = cur().line;
  std::vector<expr_ptr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) {
      if (auto ok = expect_op(","); !ok)
        return ok.error();
    }
    if (is_tuple_end(cur(), extra_end))
      break;
    auto item = with_condexpr ? expression() : or_expr();
    if (!item)
      return item;
    items.push_back(std::move(item).value());
    if (!is_op(","))
      break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty())
      return std::move(items.front());
    if (!explicit_parentheses)
      return fail(cur(), fmt::format("expected an expression, found {}", describe(cur())));
  }
  auto n = node(expr_kind::tuple, line);
  n->args = std::move(items);
  return n;
}

result<expr_ptr> parser::expression(bool with_condexpr) {
  return with_condexpr ? condexpr() : or_expr();
}

result<expr_ptr> parser::condexpr() {
  nesting guard{*this};
  if (guard.too_deep())
    return too_deep(cur());
  auto then = or_expr();
  if (!then)
    return then;
  expr_ptr result_node = std::move(then).value();
  while (is_name("if")) {
    advance();
    auto cond = or_expr();
    if (!cond)
      return cond;
    auto n = node(expr_kind::conditional, result_node->line);
    n->args.push_back(std::move(result_node));
    n->args.push_back(std::move(cond).value());
    if (is_name("else")) {
      advance();
      auto otherwise = condexpr();
      if (!otherwise)
        return otherwise;
      n->args.push_back(std::move(otherwise).value());
    } else {
      n->args.push_back(nullptr);
    }
    result_node = std::move(n);
  }
  return result_node;
}

result<expr_ptr> parser::or_expr() {
  auto left = and_expr();
  if (!left)
    return left;
  expr_ptr out = std::move(left).value();
  while (is_name("or")) {
    advance();
    auto right = and_expr();
    if (!right)
      return right;
    out = binary("or", std::move(out), std::move(right).value());
  }
  return out;
}

result<expr_ptr> parser::and_expr() {
  auto left = not_expr();
  if (!left)
    return left;
  expr_ptr out = std::move(left).value();
  while (is_name("and")) {
    advance();
    auto right = not_expr();
    if (!right)
      return right;
    out = binary("and", std::move(out), std::move(right).value());
  }
  return out;
}

result<expr_ptr> parser::not_expr() {
  if (!is_name("not"))
    return compare();
  nesting guard{*this};
  if (guard.too_deep())
    return too_deep(cur());
  const int line = cur().line;
  advance();
  auto operand = not_expr();
  if (!operand)
    return operand;
  auto n = node(expr_kind::unary, line);
  n->name = "not";
  n->args.push_back(std::move(operand).value());
  return n;
}

result<expr_ptr> parser::compare() {
  auto first = math1();
  if (!first)
    return first;
  expr_ptr head = std::move(first).value();
  auto n = node(expr_kind::compare, head->line);
  n->args.push_back(std::move(head));
  while (true) {
    std::string op;
    if (cur().kind == token_kind::op &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      advance();
    } else if (is_name("in")) {
      op = "in";
      advance();
    } else if (is_name("not") && peek().kind == token_kind::name && peek().text == "in") {
      op = "notin";
      advance();
      advance();
    } else {
      break;
    }
    auto operand = math1();
    if (!operand)
      return operand;
    n->ops.push_back(std::move(op));
    n->args.push_back(std::move(operand).value());
  }
  if (n->ops.empty())
    return std::move(n->args.front());
  return n;
}

result<expr_ptr> parser::math1() {
  auto left = concat();
  if (!left)
    return left;
  expr_ptr out = std::move(left).value();
  while (is_op("+") || is_op("-")) {
    std::string op = cur().text;
    advance();
    auto right = concat();
    if (!right)
      return right;
    out = binary(std::move(op), std::move(out), std::move(right).value());
  }
  return out;
}

result<expr_ptr> parser::concat() {
  auto left = math2();
  if (!left)
    return left;
  expr_ptr out = std::move(left).value();
  while (is_op("~")) {
    advance();
    auto right = math2();
    if (!right)
      return right;
    out = binary("~", std::move(out), std::move(right).value());
  }
  return out;
}

result<expr_ptr> parser::math2() {
  auto left = pow();
  if (!left)
    return left;
  expr_ptr out = std::move(left).value();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = cur().text;
    advance();
    auto right = pow();
    if (!right)
      return right;
    out = binary(std::move(op), std::move(out), std::move(right).value());
  }
  return out;
}

result<expr_ptr> parser::pow() {
  auto left = unary(true);
  if (!left)
    return left;
  expr_ptr out = std::move(left).value();
  while (is_op("**")) {
    advance();
    auto right = unary(true);
    if (!right)
      return right;
    out = binary("**", std::move(out), std::move(right).value());
  }
  return out;
}

result<expr_ptr> parser::unary(bool with_filter) {
  nesting guard{*this};
  if (guard.too_deep())
    return too_deep(cur());
  result<expr_ptr> operand = expr_ptr{};
  if (is_op("-") || is_op("+")) {
    auto n = node(expr_kind::unary, cur().line);
    n->name = cur().text;
    advance();
    auto inner = unary(false);
    if (!inner)
      return inner;
    n->args.push_back(std::move(inner).value());
    operand = std::move(n);
  } else {
    operand = primary();
    if (!operand)
      return operand;
  }
  auto post = postfix(std::move(operand).value());
  if (!post || !with_filter)
    return post;
  return filter_expr(std::move(post).value());
}

result<expr_ptr> parser::primary() {
  const token& t = cur();
  switch (t.kind) {
    case token_kind::name: {
      auto n = node(expr_kind::literal, t.line);
      if (t.text == "true" || t.text == "True") {
        n->constant = value{true};
      } else if (t.text == "false" || t.text == "False") {
        n->constant = value{false};
      } else if (t.text == "none" || t.text == "None") {
        n->constant = value::none();
      } else {
        n->kind = expr_kind::name;
        n->name = t.text;
      }
      advance();
      return n;
    }
    case token_kind::string: {
      auto n = node(expr_kind::literal, t.line);
      std::string text;
      while (cur().kind == token_kind::string) {  // adjacent literals concatenate
        text += cur().text;
        advance();
      }
      n->constant = value{std::move(text)};
      return n;
    }
    case token_kind::integer:
    case token_kind::floating: {
      auto n = node(expr_kind::literal, t.line);
      n->constant = t.kind == token_kind::integer ? value{t.integer} : value{t.number};
      advance();
      return n;
    }
    case token_kind::op:
      if (t.text == "(") {
        advance();
        auto inner = tuple_expr(true, {}, true);
        if (!inner)
          return inner;
        if (auto ok = expect_op(")"); !ok)
          return ok.error();
        return inner;
      }
      if (t.text == "[" || t.text == "{") {
        const int line = t.line;
        const bool dict = t.text == "{";
        advance();
        return sequence_literal(dict, line);
      }
      break;
    case token_kind::data:
    case token_kind::variable_begin:
    case token_kind::variable_end:
    case token_kind::block_begin:
    case token_kind::block_end:
    case token_kind::eof:
      break;
  }
  return fail(t, fmt::format("unexpected {}", describe(t)));
}

result<expr_ptr> parser::sequence_literal(bool dict, int line) {
  auto n = node(dict ? expr_kind::dict : expr_kind::list, line);
  const std::string_view close = dict ? "}" : "]";
  while (!is_op(close)) {
    if (!n->args.empty()) {
      if (auto ok = expect_op(","); !ok)
        return ok.error();
      if (is_op(close))
        break;
    }
    auto item = expression();
    if (!item)
      return item;
    n->args.push_back(std::move(item).value());
    if (dict) {
      if (auto ok = expect_op(":"); !ok)
        return ok.error();
      auto v = expression();
      if (!v)
        return v;
      n->args.push_back(std::move(v).value());
    }
  }
  advance();
  return n;
}

}  // namespace mstar::models::jinja::internal
