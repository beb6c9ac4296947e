#include "models/jinja/template.hpp"

#include "models/jinja/lexer.hpp"
#include "models/jinja/parser.hpp"

namespace mstar::models::jinja {

result<compiled_template> compiled_template::parse(std::string_view source, const limits& bounds) {
  auto tokens = tokenize(source);
  if (!tokens)
    return tokens.error();
  auto code = jinja::parse(std::move(tokens).value(), bounds.max_nesting);
  if (!code)
    return code.error();
  return compiled_template{std::make_shared<const program>(std::move(code).value())};
}

result<std::string> compiled_template::render(const nlohmann::ordered_json& variables,
                                              const render_options& options) const {
  if (!variables.is_object())
    return make_error(errc::invalid_argument, "template variables must be a JSON object");
  object_data globals;
  for (const auto& [name, item] : variables.items()) {
    auto v = value::from_json(item);
    if (!v)
      return v.error().with_context("variable '" + name + "'");
    globals.set(name, std::move(v).value());
  }
  interpreter run{*code_, options.limits, std::move(globals), options.now};
  return run.run();
}

}  // namespace mstar::models::jinja
