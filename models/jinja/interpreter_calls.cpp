// The interpreter's loops, macros and calls.
#include <fmt/format.h>

#include "models/jinja/internal/ops.hpp"
#include "models/jinja/interpreter.hpp"

namespace mstar::models::jinja {
namespace {

// Jinja's loop variable for iteration i of n.
result<value> loop_object(std::int64_t i, const std::vector<value>& items, const value& cycle) {
  const auto n = static_cast<std::int64_t>(items.size());
  object_data loop;
  loop.append_unique("index", value{i + 1});
  loop.append_unique("index0", value{i});
  loop.append_unique("revindex", value{n - i});
  loop.append_unique("revindex0", value{n - i - 1});
  loop.append_unique("first", value{i == 0});
  loop.append_unique("last", value{i == n - 1});
  loop.append_unique("length", value{n});
  loop.append_unique("depth", value{1});
  loop.append_unique("depth0", value{0});
  if (i > 0)
    loop.append_unique("previtem", items[static_cast<std::size_t>(i - 1)]);
  if (i + 1 < n)
    loop.append_unique("nextitem", items[static_cast<std::size_t>(i + 1)]);
  loop.append_unique("cycle", cycle);
  return value::object(std::move(loop));
}

}  // namespace

result<interpreter::flow> interpreter::exec_for(const stmt& s) {
  auto iterable = eval(*s.value);
  if (!iterable)
    return iterable.error();
  auto all = internal::iterate(*this, *iterable);
  if (!all)
    return all.error();
  std::vector<value> items;
  if (s.cond) {
    for (auto& item : *all) {
      if (auto ok = charge(1); !ok)
        return ok.error();
      auto scope = child_frame();
      if (auto ok = bind_targets(*scope, s.targets, item); !ok)
        return ok.error();
      auto saved = std::exchange(current_, std::move(scope));
      auto keep = eval(*s.cond);
      current_ = std::move(saved);
      if (!keep)
        return keep.error();
      if (keep->truthy())
        items.push_back(std::move(item));
    }
  } else {
    items = std::move(all).value();
  }
  if (items.empty())
    return exec_block(s.else_body);
  auto position = std::make_shared<std::int64_t>(0);
  const value cycle =
      value::function("loop.cycle", [position](interpreter& in, call_args& args) -> result<value> {
        if (args.positional.empty())
          return in.fail("loop.cycle needs at least one item");
        const auto n = static_cast<std::int64_t>(args.positional.size());
        return args.positional[static_cast<std::size_t>(*position % n)];
      });
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto ok = charge(1); !ok)
      return ok.error();
    *position = static_cast<std::int64_t>(i);
    auto scope = child_frame();
    if (auto ok = bind_targets(*scope, s.targets, items[i]); !ok)
      return ok.error();
    auto loop = loop_object(static_cast<std::int64_t>(i), items, cycle);
    if (!loop)
      return loop.error();
    scope->vars.insert_or_assign("loop", std::move(loop).value());
    auto saved = std::exchange(current_, std::move(scope));
    auto f = exec_block(s.body);
    current_ = std::move(saved);
    if (!f)
      return f;
    if (*f == flow::break_)
      break;
  }
  return flow::normal;
}

value interpreter::define_macro(const stmt& s) {
  auto closure = current_;
  closures_.push_back(closure);
  const stmt* def = &s;
  return value::function(s.text, [def, closure](interpreter& in, call_args& args) {
    return in.call_macro(*def, closure, args);
  });
}

result<value> interpreter::call_macro(const stmt& def, const std::shared_ptr<frame>& closure,
                                      call_args& args) {
  const std::string name = def.kind == stmt_kind::macro ? def.text : "caller";
  if (call_depth_ >= bounds_.max_call_depth) {
    return make_error(errc::out_of_range,
                      fmt::format("line {}: macro '{}' recursed deeper than {} calls", line_, name,
                                  bounds_.max_call_depth));
  }
  if (auto ok = charge(1); !ok)
    return ok.error();
  auto scope = std::make_shared<frame>();
  scope->parent = closure;
  std::vector<bool> bound(def.params.size(), false);
  std::vector<value> varargs;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < def.params.size()) {
      scope->vars.insert_or_assign(def.params[i].first, std::move(args.positional[i]));
      bound[i] = true;
    } else {
      varargs.push_back(std::move(args.positional[i]));
    }
  }
  object_data kwargs;
  for (auto& [key, v] : args.named) {
    std::size_t at = 0;
    while (at < def.params.size() && def.params[at].first != key)
      ++at;
    if (at == def.params.size()) {
      if (key == "caller")
        scope->vars.insert_or_assign(key, std::move(v));
      else
        kwargs.set(key, std::move(v));
      continue;
    }
    if (bound[at])
      return fail(fmt::format("macro '{}' got multiple values for argument '{}'", name, key));
    scope->vars.insert_or_assign(key, std::move(v));
    bound[at] = true;
  }
  for (std::size_t i = 0; i < def.params.size(); ++i) {
    if (bound[i])
      continue;
    value fallback;
    if (def.params[i].second) {
      auto saved = std::exchange(current_, scope);
      auto v = eval(*def.params[i].second);
      current_ = std::move(saved);
      if (!v)
        return v.error();
      fallback = std::move(v).value();
    }
    scope->vars.insert_or_assign(def.params[i].first, std::move(fallback));
  }
  auto varargs_value = value::list(std::move(varargs), true);  // a tuple, as in Jinja
  auto kwargs_value = value::object(std::move(kwargs));
  if (!varargs_value || !kwargs_value)
    return varargs_value ? kwargs_value.error() : varargs_value.error();
  scope->vars.insert_or_assign("varargs", std::move(varargs_value).value());
  scope->vars.insert_or_assign("kwargs", std::move(kwargs_value).value());
  ++call_depth_;
  auto text = capture(def.body, std::move(scope));
  --call_depth_;
  if (!text)
    return text.error();
  return value{std::move(text).value()};
}

result<void> interpreter::exec_call_block(const stmt& s) {
  auto closure = current_;
  closures_.push_back(closure);
  const stmt* def = &s;
  value caller = value::function("caller", [def, closure](interpreter& in, call_args& args) {
    return in.call_macro(*def, closure, args);
  });
  const expr& call_expr = *s.value;
  auto callee = eval(*call_expr.args[0]);
  if (!callee)
    return callee.error();
  auto args = eval_args(call_expr, 1);
  if (!args)
    return args.error();
  args->named.emplace_back("caller", std::move(caller));
  auto v = call(*callee, *args);
  if (!v)
    return v.error();
  auto text = internal::str(*this, *v);
  if (!text)
    return text.error();
  return write(*text);
}

result<value> interpreter::call(const value& callee, call_args& args) {
  if (callee.is_function())
    return callee.as_function().call(*this, args);
  if (callee.is_undefined())
    return fail("called an undefined value (no such function or method)");
  return fail(fmt::format("'{}' object is not callable", type_name(callee)));
}

}  // namespace mstar::models::jinja
