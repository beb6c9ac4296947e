#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/jinja/builtins.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja {

enum class expr_kind : std::uint8_t {
  literal,      ///< `constant`
  name,         ///< `name`
  list,         ///< `args`: the items
  tuple,        ///< `args`: the items
  dict,         ///< `args`: key, value, key, value...
  attribute,    ///< args[0].`name`
  item,         ///< args[0][args[1]]
  slice,        ///< args[0][args[1]:args[2]:args[3]], each bound may be null
  call,         ///< args[0](args[1...], `named`)
  filter,       ///< args[0] | `name`(args[1...], `named`); args[0] null in filter blocks
  test,         ///< args[0] is `name`(args[1...], `named`)
  unary,        ///< `name` ("not", "-", "+") applied to args[0]
  binary,       ///< args[0] `name` args[1]: + - * / // % ** ~ and or
  compare,      ///< args[0] ops[0] args[1] ops[1] args[2]...: == != < <= > >= in notin
  conditional,  ///< args[0] if args[1] else args[2] (null: Undefined)
};

struct expr;
using expr_ptr = std::unique_ptr<expr>;

/// One expression node, with the line it starts on for error messages.
struct expr {
  expr_kind kind = expr_kind::literal;
  int line = 0;
  value constant;
  std::string name;
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> named;
  std::vector<std::string> ops;
  filter_fn filter = nullptr;  ///< resolved when parsed
  test_fn test = nullptr;      ///< resolved when parsed
};

enum class stmt_kind : std::uint8_t {
  text,          ///< `text` as written
  output,        ///< {{ expr }}
  if_,           ///< if expr: body, else else_body (elif nests an if there)
  for_,          ///< for targets in expr [if cond]: body, else else_body
  set,           ///< set targets = expr (or namespace attribute: targets {ns, attr})
  set_block,     ///< set targets[0] [| filters]: body
  macro,         ///< macro text(params): body
  call_block,    ///< call(params) expr: body (the body is `caller`)
  filter_block,  ///< filter filters: body
  with,          ///< with params: body
  scope,         ///< body in a new scope (`generation` blocks)
  break_,
  continue_,
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;

/// One statement node.
struct stmt {
  stmt_kind kind = stmt_kind::text;
  int line = 0;
  std::string text;  ///< template text, or the macro's name
  expr_ptr value;    ///< what is printed, tested, iterated, assigned or called
  expr_ptr cond;     ///< a for loop's filter
  std::vector<std::string> targets;
  bool namespace_target = false;  ///< set ns.attr = ...
  std::vector<stmt_ptr> body;
  std::vector<stmt_ptr> else_body;
  std::vector<std::pair<std::string, expr_ptr>> params;  ///< macro parameters (default may be null)
  std::vector<expr_ptr> filters;                         ///< filter chains of blocks
};

/// A parsed template.
struct program {
  std::vector<stmt_ptr> body;
};

}  // namespace mstar::models::jinja
