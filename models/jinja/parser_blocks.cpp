// The parser's block statements with their own scope: macro, call, filter,
// with and generation.
#include <fmt/format.h>

#include "models/jinja/internal/parser_impl.hpp"

namespace mstar::models::jinja::internal {

result<void> parser::macro_params(stmt& node) {
  if (auto ok = expect_op("("); !ok)
    return ok;
  while (!is_op(")")) {
    if (!node.params.empty()) {
      if (auto ok = expect_op(","); !ok)
        return ok;
      if (is_op(")"))
        break;
    }
    auto name = expect_identifier("a parameter name");
    if (!name)
      return name.error();
    expr_ptr fallback;
    if (is_op("=")) {
      advance();
      auto e = expression();
      if (!e)
        return e.error();
      fallback = std::move(e).value();
    }
    node.params.emplace_back(std::move(name).value(), std::move(fallback));
  }
  advance();
  return {};
}

result<stmt_ptr> parser::macro_stmt(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::macro;
  s->line = line;
  auto name = expect_identifier("the macro's name");
  if (!name)
    return name.error();
  s->text = std::move(name).value();
  if (auto ok = macro_params(*s); !ok)
    return ok.error();
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;  // break and continue cannot cross a macro
  auto inner = body({"endmacro"}, "macro", line);
  loop_depth_ = saved_loops;
  if (!inner)
    return inner.error();
  s->body = std::move(inner).value();
  advance();  // {%
  advance();  // endmacro
  if (cur().kind == token_kind::name)
    advance();  // {% endmacro name %}
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  return s;
}

result<stmt_ptr> parser::call_stmt(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::call_block;
  s->line = line;
  if (is_op("(")) {
    if (auto ok = macro_params(*s); !ok)
      return ok.error();
  }
  auto call = expression();
  if (!call)
    return call.error();
  if ((*call)->kind != expr_kind::call)
    return fail(cur(), "expected a call after 'call'");
  s->value = std::move(call).value();
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  const int saved_loops = loop_depth_;
  loop_depth_ = 0;
  auto inner = body({"endcall"}, "call", line);
  loop_depth_ = saved_loops;
  if (!inner)
    return inner.error();
  s->body = std::move(inner).value();
  if (auto ok = end_tag("endcall"); !ok)
    return ok.error();
  return s;
}

result<stmt_ptr> parser::filter_stmt(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::filter_block;
  s->line = line;
  auto chain = filter_chain(nullptr, true);
  if (!chain)
    return chain.error();
  s->filters.push_back(std::move(chain).value());
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  auto inner = body({"endfilter"}, "filter", line);
  if (!inner)
    return inner.error();
  s->body = std::move(inner).value();
  if (auto ok = end_tag("endfilter"); !ok)
    return ok.error();
  return s;
}

result<stmt_ptr> parser::with_stmt(int line) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::with;
  s->line = line;
  while (cur().kind != token_kind::block_end) {
    if (!s->params.empty()) {
      if (auto ok = expect_op(","); !ok)
        return ok.error();
    }
    auto name = expect_identifier("a variable name");
    if (!name)
      return name.error();
    if (auto ok = expect_op("="); !ok)
      return ok.error();
    auto e = expression();
    if (!e)
      return e.error();
    s->params.emplace_back(std::move(name).value(), std::move(e).value());
  }
  advance();
  auto inner = body({"endwith"}, "with", line);
  if (!inner)
    return inner.error();
  s->body = std::move(inner).value();
  if (auto ok = end_tag("endwith"); !ok)
    return ok.error();
  return s;
}

result<stmt_ptr> parser::scope_stmt(int line, std::string_view end) {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::scope;
  s->line = line;
  if (auto ok = expect(token_kind::block_end, "'%}'"); !ok)
    return ok.error();
  auto inner = body({end}, end.substr(3), line);  // "endgeneration" closes "generation"
  if (!inner)
    return inner.error();
  s->body = std::move(inner).value();
  if (auto ok = end_tag(end); !ok)
    return ok.error();
  return s;
}

}  // namespace mstar::models::jinja::internal
