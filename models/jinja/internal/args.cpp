#include "models/jinja/internal/args.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace mstar::models::jinja::internal {

arg_reader::arg_reader(interpreter& in, std::string_view function, call_args& args,
                       std::initializer_list<std::string_view> names)
    : in_(in), function_(function) {
  const std::vector<std::string_view> params{names};
  if (args.positional.size() > params.size()) {
    status_ = in.fail(fmt::format("{}() takes at most {} argument(s), {} given", function_,
                                  params.size(), args.positional.size()));
    return;
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i)
    bound_.emplace_back(params[i], std::move(args.positional[i]));
  for (auto& [key, v] : args.named) {
    const auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end()) {
      status_ =
          in.fail(fmt::format("{}() got an unexpected keyword argument '{}'", function_, key));
      return;
    }
    if (get(*it) != nullptr) {
      status_ = in.fail(fmt::format("{}() got multiple values for argument '{}'", function_, key));
      return;
    }
    bound_.emplace_back(*it, std::move(v));
  }
}

const value* arg_reader::get(std::string_view name) const {
  for (const auto& [key, v] : bound_) {
    if (key == name)
      return &v;
  }
  return nullptr;
}

value arg_reader::get_or(std::string_view name, value fallback) const {
  const value* v = get(name);
  return v != nullptr ? *v : std::move(fallback);
}

result<std::int64_t> arg_reader::integer(std::string_view name, std::int64_t fallback) const {
  const value* v = get(name);
  if (v == nullptr || v->is_none())
    return fallback;
  if (!v->is_integral())
    return in_.fail(
        fmt::format("{}(): '{}' must be an integer, not '{}'", function_, name, type_name(*v)));
  return v->as_int();
}

result<std::optional<std::string>> arg_reader::string(std::string_view name) const {
  const value* v = get(name);
  if (v == nullptr || v->is_none() || v->is_undefined())
    return std::optional<std::string>{};
  if (!v->is_string())
    return in_.fail(
        fmt::format("{}(): '{}' must be a string, not '{}'", function_, name, type_name(*v)));
  return std::optional<std::string>{v->as_string()};
}

bool arg_reader::flag(std::string_view name, bool fallback) const {
  const value* v = get(name);
  return v != nullptr ? v->truthy() : fallback;
}

result<value> arg_reader::required(std::string_view name) const {
  const value* v = get(name);
  if (v == nullptr)
    return in_.fail(fmt::format("{}() missing required argument '{}'", function_, name));
  return *v;
}

}  // namespace mstar::models::jinja::internal
