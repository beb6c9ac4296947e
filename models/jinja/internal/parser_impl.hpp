#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "models/jinja/ast.hpp"
#include "models/jinja/lexer.hpp"

namespace mstar::models::jinja::internal {

/// The recursive-descent parser behind jinja::parse; statements live in
/// parser.cpp, expressions in parser_expr.cpp.
class parser {
 public:
  parser(std::vector<token> tokens, int max_nesting)
      : toks_(std::move(tokens)), max_nesting_(max_nesting) {}

  result<program> run();

  // Expressions (Jinja's precedence, lowest first).
  result<expr_ptr> tuple_expr(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                              bool explicit_parentheses);
  result<expr_ptr> expression(bool with_condexpr = true);
  result<expr_ptr> or_expr();
  result<expr_ptr> filter_chain(expr_ptr operand, bool start_inline);

 private:
  /// Counts nesting for the lifetime of a parse step; fails past the limit.
  class nesting {
   public:
    explicit nesting(parser& p) : p_(p) { ++p_.depth_; }
    nesting(const nesting&) = delete;
    nesting& operator=(const nesting&) = delete;
    ~nesting() { --p_.depth_; }
    [[nodiscard]] bool too_deep() const { return p_.depth_ > p_.max_nesting_; }

   private:
    parser& p_;
  };

  // Statements.
  result<std::vector<stmt_ptr>> body(std::initializer_list<std::string_view> end_tags,
                                     std::string_view opener, int opener_line);
  result<stmt_ptr> statement();
  result<stmt_ptr> if_rest(int line);
  result<stmt_ptr> for_stmt(int line);
  result<stmt_ptr> set_stmt(int line);
  result<stmt_ptr> macro_stmt(int line);
  result<stmt_ptr> call_stmt(int line);
  result<stmt_ptr> filter_stmt(int line);
  result<stmt_ptr> with_stmt(int line);
  result<stmt_ptr> scope_stmt(int line, std::string_view end_tag);
  result<std::vector<std::string>> assign_targets(bool allow_namespace, bool& namespace_target);
  result<void> macro_params(stmt& node);
  result<void> end_tag(std::string_view tag);

  // Expressions.
  result<expr_ptr> condexpr();
  result<expr_ptr> and_expr();
  result<expr_ptr> not_expr();
  result<expr_ptr> compare();
  result<expr_ptr> math1();
  result<expr_ptr> concat();
  result<expr_ptr> math2();
  result<expr_ptr> pow();
  result<expr_ptr> unary(bool with_filter);
  result<expr_ptr> primary();
  result<expr_ptr> postfix(expr_ptr node);
  result<expr_ptr> filter_expr(expr_ptr node);
  result<expr_ptr> test(expr_ptr node);
  result<expr_ptr> subscript(expr_ptr node);
  result<expr_ptr> sequence_literal(bool dict, int line);
  result<void> call_arguments(expr& node);

  // Tokens.
  [[nodiscard]] const token& cur() const { return toks_[pos_]; }
  [[nodiscard]] const token& peek(std::size_t ahead = 1) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  void advance() {
    if (pos_ + 1 < toks_.size())
      ++pos_;
  }
  [[nodiscard]] bool is_op(std::string_view op) const {
    return cur().kind == token_kind::op && cur().text == op;
  }
  [[nodiscard]] bool is_name(std::string_view name) const {
    return cur().kind == token_kind::name && cur().text == name;
  }
  result<void> expect_op(std::string_view op);
  result<void> expect(token_kind kind, std::string_view what);
  result<std::string> expect_identifier(std::string_view what);
  [[nodiscard]] error fail(const token& at, const std::string& what) const;
  [[nodiscard]] error too_deep(const token& at) const;
  static expr_ptr node(expr_kind kind, int line);

  std::vector<token> toks_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int max_nesting_;
  int loop_depth_ = 0;  // for bodies being parsed (break/continue are legal inside)
};

}  // namespace mstar::models::jinja::internal
