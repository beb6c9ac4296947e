#include "models/jinja/interpreter.hpp"

#include <fmt/format.h>

#include "models/jinja/builtins.hpp"
#include "models/jinja/internal/ops.hpp"

namespace mstar::models::jinja {

interpreter::interpreter(const program& code, const limits& bounds, object_data variables,
                         std::optional<std::tm> now)
    : code_(code), bounds_(bounds), now_(now), root_(std::make_shared<frame>()) {
  for (const auto& [name, v] : variables.entries())
    root_->vars.insert_or_assign(name, v);
  current_ = root_;
}

interpreter::~interpreter() {
  // Macros capture frames that hold them, and namespaces may hold
  // themselves: empty both so every cycle is broken.
  for (const auto& f : closures_)
    f->vars.clear();
  for (const auto& ns : namespaces_)
    ns->clear();
}

result<std::string> interpreter::run() {
  std::string out;
  out_ = &out;
  auto done = exec_block(code_.body);
  out_ = nullptr;
  if (!done)
    return done.error();
  return out;
}

error interpreter::fail(std::string_view what) const {
  return make_error(errc::invalid_argument, fmt::format("line {}: {}", line_, what));
}

result<void> interpreter::charge(std::uint64_t steps) {
  steps_ += steps;
  if (steps_ > bounds_.max_steps) {
    return make_error(errc::out_of_range, fmt::format("line {}: template ran past its budget of "
                                                      "{} steps (loop iterations, calls)",
                                                      line_, bounds_.max_steps));
  }
  return {};
}

result<void> interpreter::check_string(std::size_t bytes) const {
  if (bytes > bounds_.max_output_bytes) {
    return make_error(errc::out_of_range,
                      fmt::format("line {}: a string would pass the limit of {} bytes", line_,
                                  bounds_.max_output_bytes));
  }
  return {};
}

result<void> interpreter::check_list(std::size_t items) const {
  if (items > bounds_.max_list_items) {
    return make_error(errc::out_of_range,
                      fmt::format("line {}: a list would pass the limit of {} items", line_,
                                  bounds_.max_list_items));
  }
  return {};
}

value interpreter::make_namespace(object_data data) {
  value ns = value::make_namespace(std::move(data));
  namespaces_.push_back(ns.namespace_handle());
  return ns;
}

result<void> interpreter::check_namespace_name(std::string_view name) const {
  if (!name.empty() && name.front() == '_') {
    return fail(
        fmt::format("chat templates cannot store underscore-prefixed attributes on a "
                    "namespace, but got '{}'",
                    name));
  }
  return {};
}

std::tm interpreter::now() const {
  if (now_)
    return *now_;
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  return local;
}

result<void> interpreter::write(std::string_view text) {
  if (out_->size() + text.size() > bounds_.max_output_bytes) {
    return make_error(errc::out_of_range,
                      fmt::format("line {}: output would pass the limit of {} bytes", line_,
                                  bounds_.max_output_bytes));
  }
  out_->append(text);
  return {};
}

value interpreter::lookup(const std::string& name) const {
  for (const frame* f = current_.get(); f != nullptr; f = f->parent.get()) {
    if (const auto it = f->vars.find(name); it != f->vars.end())
      return it->second;
  }
  return find_global(name).value_or(value{});
}

void interpreter::assign(const std::string& name, value v) {
  current_->vars.insert_or_assign(name, std::move(v));
}

std::shared_ptr<interpreter::frame> interpreter::child_frame() {
  auto f = std::make_shared<frame>();
  f->parent = current_;
  return f;
}

result<interpreter::flow> interpreter::exec_block(const std::vector<stmt_ptr>& body) {
  for (const auto& s : body) {
    auto f = exec(*s);
    if (!f || *f != flow::normal)
      return f;
  }
  return flow::normal;
}

result<std::string> interpreter::capture(const std::vector<stmt_ptr>& body,
                                         std::shared_ptr<frame> scope) {
  std::string buffer;
  std::string* saved_out = out_;
  auto saved_frame = std::move(current_);
  out_ = &buffer;
  current_ = std::move(scope);
  auto done = exec_block(body);
  out_ = saved_out;
  current_ = std::move(saved_frame);
  if (!done)
    return done.error();
  return buffer;
}

result<interpreter::flow> interpreter::exec(const stmt& s) {
  depth_guard guard{*this};
  line_ = s.line;
  if (guard.too_deep()) {
    return make_error(errc::out_of_range, fmt::format("line {}: template nests or recurses "
                                                      "deeper than {} levels",
                                                      s.line, bounds_.max_depth));
  }
  switch (s.kind) {
    case stmt_kind::text:
      if (auto ok = write(s.text); !ok)
        return ok.error();
      return flow::normal;
    case stmt_kind::output: {
      auto v = eval(*s.value);
      if (!v)
        return v.error();
      auto text = internal::str(*this, *v);
      if (!text)
        return text.error();
      if (auto ok = write(*text); !ok)
        return ok.error();
      return flow::normal;
    }
    case stmt_kind::if_: {
      auto cond = eval(*s.value);
      if (!cond)
        return cond.error();
      return exec_block(cond->truthy() ? s.body : s.else_body);
    }
    case stmt_kind::for_:
      return exec_for(s);
    case stmt_kind::set:
    case stmt_kind::set_block:
      if (auto ok = exec_set(s); !ok)
        return ok.error();
      return flow::normal;
    case stmt_kind::macro:
      assign(s.text, define_macro(s));
      return flow::normal;
    case stmt_kind::call_block:
      if (auto ok = exec_call_block(s); !ok)
        return ok.error();
      return flow::normal;
    case stmt_kind::filter_block: {
      auto text = capture(s.body, current_);
      if (!text)
        return text.error();
      const value input{std::move(text).value()};
      auto filtered = eval_filter(*s.filters.front(), &input);
      if (!filtered)
        return filtered.error();
      auto out = internal::str(*this, *filtered);
      if (!out)
        return out.error();
      if (auto ok = write(*out); !ok)
        return ok.error();
      return flow::normal;
    }
    case stmt_kind::with:
    case stmt_kind::scope: {
      auto scope = child_frame();
      for (const auto& [name, e] : s.params) {
        auto v = eval(*e);
        if (!v)
          return v.error();
        scope->vars.insert_or_assign(name, std::move(v).value());
      }
      auto saved = std::move(current_);
      current_ = std::move(scope);
      auto f = exec_block(s.body);
      current_ = std::move(saved);
      return f;
    }
    case stmt_kind::break_:
      return flow::break_;
    case stmt_kind::continue_:
      return flow::continue_;
  }
  return flow::normal;
}

result<void> interpreter::exec_set(const stmt& s) {
  value v;
  if (s.kind == stmt_kind::set_block) {
    auto text = capture(s.body, current_);
    if (!text)
      return text.error();
    v = value{std::move(text).value()};
    if (!s.filters.empty()) {
      auto filtered = eval_filter(*s.filters.front(), &v);
      if (!filtered)
        return filtered.error();
      v = std::move(filtered).value();
    }
  } else {
    auto e = eval(*s.value);
    if (!e)
      return e.error();
    v = std::move(e).value();
  }
  if (s.namespace_target) {
    const value target = lookup(s.targets[0]);
    if (!target.is_namespace()) {
      return fail(fmt::format("cannot assign attribute '{}' on '{}': not a namespace", s.targets[1],
                              s.targets[0]));
    }
    if (auto ok = check_namespace_name(s.targets[1]); !ok)
      return ok;
    target.as_namespace().set(s.targets[1], std::move(v));
    return {};
  }
  return bind_targets(*current_, s.targets, v);
}

result<void> interpreter::bind_targets(frame& f, const std::vector<std::string>& targets,
                                       const value& v) {
  if (targets.size() == 1) {
    f.vars.insert_or_assign(targets[0], v);
    return {};
  }
  auto items = internal::iterate(*this, v);
  if (!items)
    return items.error();
  if (items->size() != targets.size()) {
    return fail(
        fmt::format("cannot unpack {} values into {} names", items->size(), targets.size()));
  }
  for (std::size_t i = 0; i < targets.size(); ++i)
    f.vars.insert_or_assign(targets[i], (*items)[i]);
  return {};
}

}  // namespace mstar::models::jinja
