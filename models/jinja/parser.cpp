#include "models/jinja/parser.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "models/jinja/internal/parser_impl.hpp"

namespace mstar::models::jinja {
namespace internal {
namespace {

std::string tag_list(std::initializer_list<std::string_view> tags) {
  std::string out;
  for (std::string_view tag : tags)
    out += (out.empty() ? "'" : " or '") + std::string{tag} + "'";
  return out;
}

constexpr std::string_view unsupported_tags[] = {
    "include", "import", "from", "extends", "block", "autoescape", "trans", "do",
};

}  // namespace

error parser::fail(const token& at, const std::string& what) const {
  return make_error(errc::parse_error, fmt::format("line {}: {}", at.line, what));
}

error parser::too_deep(const token& at) const {
  return make_error(errc::out_of_range, fmt::format("line {}: template nests deeper than {} "
                                                    "blocks or expressions",
                                                    at.line, max_nesting_));
}

expr_ptr parser::node(expr_kind kind, int line) {
  auto n = std::make_unique<expr>();
  n->kind = kind;
  n->line = line;
  return n;
}

result<void> parser::expect_op(std::string_view op) {
  if (!is_op(op))
    return fail(cur(), fmt::format("expected '{}', found {}", op, describe(cur())));
  advance();
  return {};
}

result<void> parser::expect(token_kind kind, std::string_view what) {
  if (cur().kind != kind)
    return fail(cur(), fmt::format("expected {}, found {}", what, describe(cur())));
  advance();
  return {};
}

result<std::string> parser::expect_identifier(std::string_view what) {
  if (cur().kind != token_kind::name)
    return fail(cur(), fmt::format("expected {}, found {}", what, describe(cur())));
  std::string name = cur().text;
  advance();
  return name;
}

result<program> parser::run() {
  auto top = body({}, {}, 0);
  if (!top)
    return top.error();
  return program{std::move(top).value()};
}

result<std::vector<stmt_ptr>> parser::body(std::initializer_list<std::string_view> end_tags,
                                           std::string_view opener, int opener_line) {
  std::vector<stmt_ptr> out;
  while (true) {
    const token& t = cur();
    if (t.kind == token_kind::eof) {
      if (end_tags.size() == 0)
        return out;
      return fail(t, fmt::format("expected {} to close the '{}' on line {}, found end of template",
                                 tag_list(end_tags), opener, opener_line));
    }
    if (t.kind == token_kind::data) {
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::text;
      s->line = t.line;
      s->text = t.text;
      out.push_back(std::move(s));
      advance();
      continue;
    }
    if (t.kind == token_kind::variable_begin) {
      const int line = t.line;
      advance();
      auto e = tuple_expr(true, {}, false);
      if (!e)
        return e.error();
      if (auto ok = expect(token_kind::variable_end, "'}}'"); !ok)
        return ok.error();
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::output;
      s->line = line;
      s->value = std::move(e).value();
      out.push_back(std::move(s));
      continue;
    }
    if (t.kind != token_kind::block_begin)
      return fail(t, fmt::format("unexpected {}", describe(t)));
    const token& tag = peek();
    if (tag.kind == token_kind::name &&
        std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end()) {
      return out;
    }
    advance();
    auto s = statement();
    if (!s)
      return s.error();
    out.push_back(std::move(s).value());
  }
}

result<void> parser::end_tag(std::string_view tag) {
  // The caller's body() stopped at `{% tag`; consume it through `%}`.
  advance();
  if (!is_name(tag))
    return fail(cur(), fmt::format("expected '{}', found {}", tag, describe(cur())));
  advance();
  return expect(token_kind::block_end, "'%}'");
}

result<stmt_ptr> parser::statement() {
  nesting guard{*this};
  const token& t = cur();
  if (guard.too_deep())
    return too_deep(t);
  if (t.kind != token_kind::name)
    return fail(t, fmt::format("expected a tag name, found {}", describe(t)));
  const std::string tag = t.text;
  const int line = t.line;
  advance();
  if (tag == "if")
    return if_rest(line);
  if (tag == "for")
    return for_stmt(line);
  if (tag == "set")
    return set_stmt(line);
  if (tag == "macro")
    return macro_stmt(line);
  if (tag == "call")
    return call_stmt(line);
  if (tag == "filter")
    return filter_stmt(line);
  if (tag == "with")
    return with_stmt(line);
  if (tag == "generation")
    return scope_stmt(line, "endgeneration");
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0)
      return fail(t, fmt::format("'{}' outside of a for loop", tag));
    auto s = std::make_unique<stmt>();
    s->kind = tag == "break" ? stmt_kind::break_ : stmt_kind::continue_;
    s->line = line;
    if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
      return ok.error();
    return s;
  }
  for (std::string_view unsupported : unsupported_tags) {
    if (tag == unsupported) {
      return make_error(errc::unsupported,
                        fmt::format("line {}: the '{}' tag is not supported", line, tag));
    }
  }
  return fail(toks_[pos_ - 1], fmt::format("unknown tag '{}'", tag));
}

result<stmt_ptr> parser::if_rest(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::if_;
  s->line = line;
  auto cond = tuple_expr(false, {}, false);
  if (!cond)
    return cond.error();
  s->value = std::move(cond).value();
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  auto then = body({"elif", "else", "endif"}, "if", line);
  if (!then)
    return then.error();
  s->body = std::move(then).value();
  advance();  // {%
  const std::string tag = cur().text;
  const int tag_line = cur().line;
  advance();
  if (tag == "elif") {
    nesting guard{*this};
    if (guard.too_deep())
      return too_deep(cur());
    auto chained = if_rest(tag_line);
    if (!chained)
      return chained.error();
    s->else_body.push_back(std::move(chained).value());
    return s;
  }
  if (tag == "else") {
    if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
      return ok.error();
    auto otherwise = body({"endif"}, "if", line);
    if (!otherwise)
      return otherwise.error();
    s->else_body = std::move(otherwise).value();
    if (auto ok = end_tag("endif"); !ok)
      return ok.error();
    return s;
  }
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  return s;
}

result<std::vector<std::string>> parser::assign_targets(bool allow_namespace,
                                                        bool& namespace_target) {
  const bool parenthesised = is_op("(");
  if (parenthesised)
    advance();
  std::vector<std::string> names;
  while (true) {
    auto name = expect_identifier("a variable name");
    if (!name)
      return name.error();
    names.push_back(std::move(name).value());
    if (allow_namespace && names.size() == 1 && !parenthesised && is_op(".")) {
      advance();
      auto attr = expect_identifier("an attribute name");
      if (!attr)
        return attr.error();
      names.push_back(std::move(attr).value());
      namespace_target = true;
      return names;
    }
    if (!is_op(","))
      break;
    advance();
    if (cur().kind != token_kind::name)
      break;  // a trailing comma
  }
  if (parenthesised) {
    if (auto ok = expect_op(")"); !ok)
      return ok.error();
  }
  return names;
}

result<stmt_ptr> parser::for_stmt(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::for_;
  s->line = line;
  auto targets = assign_targets(false, s->namespace_target);
  if (!targets)
    return targets.error();
  s->targets = std::move(targets).value();
  if (!is_name("in"))
    return fail(cur(), fmt::format("expected 'in' in the for loop, found {}", describe(cur())));
  advance();
  auto iterable = tuple_expr(false, {"recursive"}, false);
  if (!iterable)
    return iterable.error();
  s->value = std::move(iterable).value();
  if (is_name("if")) {
    advance();
    auto cond = expression();
    if (!cond)
      return cond.error();
    s->cond = std::move(cond).value();
  }
  if (is_name("recursive"))
    return make_error(errc::unsupported,
                      fmt::format("line {}: recursive for loops are not supported", line));
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  ++loop_depth_;
  auto loop_body = body({"endfor", "else"}, "for", line);
  --loop_depth_;
  if (!loop_body)
    return loop_body.error();
  s->body = std::move(loop_body).value();
  if (peek().text == "else") {
    advance();
    advance();
    if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
      return ok.error();
    auto otherwise = body({"endfor"}, "for", line);
    if (!otherwise)
      return otherwise.error();
    s->else_body = std::move(otherwise).value();
  }
  if (auto ok = end_tag("endfor"); !ok)
    return ok.error();
  return s;
}

result<stmt_ptr> parser::set_stmt(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::set;
  s->line = line;
  auto targets = assign_targets(true, s->namespace_target);
  if (!targets)
    return targets.error();
  s->targets = std::move(targets).value();
  if (is_op("=")) {
    advance();
    auto value = tuple_expr(true, {}, false);
    if (!value)
      return value.error();
    s->value = std::move(value).value();
    if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
      return ok.error();
    return s;
  }
  if (s->targets.size() != 1 || s->namespace_target)
    return fail(cur(), fmt::format("expected '=' in the set tag, found {}", describe(cur())));
  s->kind = stmt_kind::set_block;
  if (is_op("|")) {
    auto chain = filter_chain(nullptr, false);
    if (!chain)
      return chain.error();
    s->filters.push_back(std::move(chain).value());
  }
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  auto captured = body({"endset"}, "set", line);
  if (!captured)
    return captured.error();
  s->body = std::move(captured).value();
  if (auto ok = end_tag("endset"); !ok)
    return ok.error();
  return s;
}

}  // namespace internal

result<program> parse(std::vector<token> tokens, int max_nesting) {
  return internal::parser{std::move(tokens), max_nesting}.run();
}

}  // namespace mstar::models::jinja
