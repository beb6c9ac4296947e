#pragma once

#include <vector>

#include "core/result.hpp"
#include "models/jinja/ast.hpp"
#include "models/jinja/lexer.hpp"

namespace mstar::models::jinja {

/// Builds the syntax tree of a token stream (Jinja's grammar and operator
/// precedence). Filter and test names are resolved here, so an unknown one
/// fails at parse time, as in Jinja. Tags without a counterpart here
/// (include, import, extends, block, recursive loops...) fail as unsupported.
///
/// Blocks and expressions may nest `max_nesting` deep; deeper input fails
/// instead of exhausting the stack. Errors name the line.
[[nodiscard]] result<program> parse(std::vector<token> tokens, int max_nesting);

}  // namespace mstar::models::jinja
