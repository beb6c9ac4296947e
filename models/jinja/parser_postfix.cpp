// The parser's postfix forms: attributes, subscripts, slices, calls, filters
// and tests.
#include <fmt/format.h>

#include "models/jinja/internal/parser_impl.hpp"

namespace mstar::models::jinja::internal {

result<expr_ptr> parser::postfix(expr_ptr operand) {
  while (true) {
    if (is_op(".")) {
      advance();
      const token& t = cur();
      if (t.kind == token_kind::name) {
        auto n = node(expr_kind::attribute, operand->line);
        n->name = t.text;
        n->args.push_back(std::move(operand));
        operand = std::move(n);
        advance();
      } else if (t.kind == token_kind::integer) {
        auto n = node(expr_kind::item, operand->line);
        auto index = node(expr_kind::literal, t.line);
        index->constant = value{t.integer};
        n->args.push_back(std::move(operand));
        n->args.push_back(std::move(index));
        operand = std::move(n);
        advance();
      } else {
        return fail(t, fmt::format("expected an attribute name after '.', found {}", describe(t)));
      }
    } else if (is_op("[")) {
      advance();
      auto sub = subscript(std::move(operand));
      if (!sub)
        return sub;
      operand = std::move(sub).value();
    } else if (is_op("(")) {
      auto n = node(expr_kind::call, operand->line);
      n->args.push_back(std::move(operand));
      if (auto ok = call_arguments(*n); !ok)
        return ok.error();
      operand = std::move(n);
    } else {
      return operand;
    }
  }
}

result<expr_ptr> parser::subscript(expr_ptr operand) {
  const int line = operand->line;
  if (is_op("]")) {  // x[] indexes with the empty tuple
    advance();
    auto n = node(expr_kind::item, line);
    n->args.push_back(std::move(operand));
    n->args.push_back(node(expr_kind::tuple, line));
    return n;
  }
  expr_ptr start;
  if (!is_op(":")) {
    auto index = expression();
    if (!index)
      return index;
    if (!is_op(":")) {
      expr_ptr key = std::move(index).value();
      if (is_op(",")) {  // x[a, b] indexes with the tuple (a, b)
        auto tuple = node(expr_kind::tuple, line);
        tuple->args.push_back(std::move(key));
        while (is_op(",")) {
          advance();
          if (is_op("]"))
            break;
          auto more = expression();
          if (!more)
            return more;
          tuple->args.push_back(std::move(more).value());
        }
        key = std::move(tuple);
      }
      if (auto ok = expect_op("]"); !ok)
        return ok.error();
      auto n = node(expr_kind::item, line);
      n->args.push_back(std::move(operand));
      n->args.push_back(std::move(key));
      return n;
    }
    start = std::move(index).value();
  }
  advance();  // the first ':'
  auto n = node(expr_kind::slice, line);
  n->args.push_back(std::move(operand));
  n->args.push_back(std::move(start));
  expr_ptr stop;
  if (!is_op("]") && !is_op(":")) {
    auto e = expression();
    if (!e)
      return e;
    stop = std::move(e).value();
  }
  n->args.push_back(std::move(stop));
  expr_ptr step;
  if (is_op(":")) {
    advance();
    if (!is_op("]")) {
      auto e = expression();
      if (!e)
        return e;
      step = std::move(e).value();
    }
  }
  n->args.push_back(std::move(step));
  if (auto ok = expect_op("]"); !ok)
    return ok.error();
  return n;
}

result<void> parser::call_arguments(expr& n) {
  if (auto ok = expect_op("("); !ok)
    return ok;
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      if (auto ok = expect_op(","); !ok)
        return ok;
      if (is_op(")"))
        break;
    }
    first = false;
    if (is_op("*") || is_op("**"))
      return make_error(
          errc::unsupported,
          fmt::format("line {}: *args and **kwargs in calls are not supported", cur().line));
    if (cur().kind == token_kind::name && peek().kind == token_kind::op && peek().text == "=") {
      std::string key = cur().text;
      advance();
      advance();
      auto v = expression();
      if (!v)
        return v.error();
      n.named.emplace_back(std::move(key), std::move(v).value());
      continue;
    }
    if (!n.named.empty())
      return fail(cur(), "a positional argument follows a keyword argument");
    auto v = expression();
    if (!v)
      return v.error();
    n.args.push_back(std::move(v).value());
  }
  advance();
  return {};
}

result<expr_ptr> parser::filter_expr(expr_ptr operand) {
  while (true) {
    if (is_op("|")) {
      auto chained = filter_chain(std::move(operand), false);
      if (!chained)
        return chained;
      operand = std::move(chained).value();
    } else if (is_name("is")) {
      auto tested = test(std::move(operand));
      if (!tested)
        return tested;
      operand = std::move(tested).value();
    } else if (is_op("(")) {
      auto n = node(expr_kind::call, operand->line);
      n->args.push_back(std::move(operand));
      if (auto ok = call_arguments(*n); !ok)
        return ok.error();
      operand = std::move(n);
    } else {
      return operand;
    }
  }
}

result<expr_ptr> parser::filter_chain(expr_ptr operand, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline)
      advance();
    start_inline = false;
    const token& at = cur();
    auto name = expect_identifier("a filter name");
    if (!name)
      return name.error();
    while (is_op(".")) {
      advance();
      auto part = expect_identifier("a filter name");
      if (!part)
        return part.error();
      *name += "." + *part;
    }
    auto n = node(expr_kind::filter, at.line);
    n->filter = find_filter(*name);
    if (n->filter == nullptr)
      return fail(at, fmt::format("no filter named '{}'", *name));
    n->name = std::move(name).value();
    n->args.push_back(std::move(operand));
    if (is_op("(")) {
      if (auto ok = call_arguments(*n); !ok)
        return ok.error();
    }
    operand = std::move(n);
  }
  return operand;
}

result<expr_ptr> parser::test(expr_ptr operand) {
  advance();  // is
  bool negated = false;
  if (is_name("not")) {
    negated = true;
    advance();
  }
  const token& at = cur();
  auto name = expect_identifier("a test name");
  if (!name)
    return name.error();
  auto n = node(expr_kind::test, at.line);
  n->test = find_test(*name);
  if (n->test == nullptr)
    return fail(at, fmt::format("no test named '{}'", *name));
  n->name = std::move(name).value();
  n->args.push_back(std::move(operand));
  const token& t = cur();
  const bool argument_follows =
      t.kind == token_kind::string || t.kind == token_kind::integer ||
      t.kind == token_kind::floating ||
      (t.kind == token_kind::op && (t.text == "(" || t.text == "[" || t.text == "{")) ||
      (t.kind == token_kind::name && t.text != "else" && t.text != "or" && t.text != "and");
  if (is_op("(")) {
    if (auto ok = call_arguments(*n); !ok)
      return ok.error();
  } else if (argument_follows) {
    if (is_name("is"))
      return fail(t, "you cannot chain multiple tests with 'is'");
    auto arg = primary();
    if (!arg)
      return arg;
    auto post = postfix(std::move(arg).value());
    if (!post)
      return post;
    n->args.push_back(std::move(post).value());
  }
  if (!negated)
    return n;
  auto inverted = node(expr_kind::unary, n->line);
  inverted->name = "not";
  inverted->args.push_back(std::move(n));
  return inverted;
}

}  // namespace mstar::models::jinja::internal
