#include "serve/internal/json_fields.hpp"

#include <cmath>
#include <fmt/format.h>

namespace mstar::serve::internal {

using json = nlohmann::ordered_json;

const json* fields::find(const char* name) const {
  if (error_)
    return nullptr;
  const auto it = body_.find(name);
  return it == body_.end() || it->is_null() ? nullptr : &*it;
}

void fail_value(std::optional<api_error>& error, const char* name, std::string_view what) {
  if (!error)
    error = bad_request(fmt::format("'{}' {}", name, what), name);
}

void fields::fail(const char* name, std::string_view what) {
  fail_value(error_, name, what);
}

void fields::string(const char* name, std::optional<std::string>& out) {
  if (const auto* v = find(name)) {
    if (!v->is_string())
      return fail(name, "must be a string");
    out = v->get<std::string>();
  }
}

void fields::integer(const char* name, std::optional<std::int64_t>& out, std::int64_t lo,
                     std::int64_t hi) {
  const auto* v = find(name);
  if (v == nullptr)
    return;
  std::int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      return fail(name, fmt::format("must be at most {}", hi));
    value = v->get<std::int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             std::trunc(v->get<double>()) == v->get<double>() &&
             std::abs(v->get<double>()) < 9e15) {
    value = static_cast<std::int64_t>(v->get<double>());
  } else {
    return fail(name, "must be an integer");
  }
  if (value < lo || value > hi)
    return fail(name, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  out = value;
}

void fields::number(const char* name, std::optional<double>& out, double lo, double hi) {
  const auto* v = find(name);
  if (v == nullptr)
    return;
  if (!v->is_number())
    return fail(name, "must be a number");
  const double value = v->get<double>();
  if (!(value >= lo && value <= hi))
    return fail(name, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  out = value;
}

void fields::boolean(const char* name, bool& out) {
  std::optional<bool> v;
  boolean(name, v);
  if (v)
    out = *v;
}

void fields::boolean(const char* name, std::optional<bool>& out) {
  if (const auto* v = find(name)) {
    if (!v->is_boolean())
      return fail(name, "must be true or false");
    out = v->get<bool>();
  }
}

void fields::strings_or_string(const char* name, std::vector<std::string>& out, std::size_t max) {
  const auto* v = find(name);
  if (v == nullptr)
    return;
  if (v->is_string()) {
    out = {v->get<std::string>()};
    return;
  }
  if (!v->is_array())
    return fail(name, "must be a string or a list of strings");
  if (v->size() > max)
    return fail(name, fmt::format("lists more than {} entries", max));
  for (const auto& s : *v) {
    if (!s.is_string())
      return fail(name, "must be a string or a list of strings");
    out.push_back(s.get<std::string>());
  }
}

void fields::token_ids(const char* name, std::vector<engine::token_id>& out, std::int64_t vocab) {
  const auto* v = find(name);
  if (v == nullptr)
    return;
  if (!v->is_array())
    return fail(name, "must be a list of token ids");
  for (const auto& id : *v) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= vocab)
      return fail(name, fmt::format("must hold token ids in [0, {})", vocab));
    out.push_back(static_cast<engine::token_id>(id.get<std::int64_t>()));
  }
}

void fields::stream_options(bool& include_usage) {
  const auto* v = find("stream_options");
  if (v == nullptr)
    return;
  if (!v->is_object())
    return fail("stream_options", "must be an object");
  const auto it = v->find("include_usage");
  if (it != v->end() && !it->is_null()) {
    if (!it->is_boolean())
      return fail("stream_options", "has an 'include_usage' that is not true or false");
    include_usage = it->get<bool>();
  }
}

void fields::object(const char* name, json& out) {
  if (const auto* v = find(name)) {
    if (!v->is_object())
      return fail(name, "must be an object");
    out = *v;
  }
}

void fields::array(const char* name, json& out) {
  if (const auto* v = find(name)) {
    if (!v->is_array())
      return fail(name, "must be a list");
    out = *v;
  }
}

}  // namespace mstar::serve::internal
