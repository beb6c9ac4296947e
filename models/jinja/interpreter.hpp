#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "models/jinja/ast.hpp"
#include "models/jinja/value.hpp"

namespace mstar::models::jinja {

/// Bounds that keep a hostile or broken template from hanging the caller,
/// exhausting its stack or its memory. Each failure is an out_of_range error.
struct limits {
  /// Bytes of output, and of any one string the template builds.
  std::size_t max_output_bytes = std::size_t{8} << 20;
  /// Units of work: one per loop iteration, macro call and filter call, plus
  /// one per element for whole-sequence work (joins, sorts, searches).
  std::uint64_t max_steps = 2'000'000;
  /// Nesting of blocks and expressions the parser accepts.
  int max_nesting = 100;
  /// Depth of evaluation (nested expressions, blocks and macro calls at once).
  int max_depth = 400;
  /// Depth of macro calls (recursion).
  int max_call_depth = 64;
  /// Items in any one list the template builds.
  std::size_t max_list_items = 1'000'000;
};

/// Runs a parsed template once. Builtins (filters, tests, methods, globals)
/// call back into it for calls, the step budget and error context. Confined
/// to the thread that renders; the program must outlive it.
class interpreter {
 public:
  /// `variables` are what the template sees as globals besides the builtins;
  /// `now` fixes what strftime_now formats (the local time when empty).
  interpreter(const program& code, const limits& bounds, object_data variables,
              std::optional<std::tm> now);
  interpreter(const interpreter&) = delete;
  interpreter& operator=(const interpreter&) = delete;
  ~interpreter();

  /// Renders the program.
  [[nodiscard]] result<std::string> run();

  /// Calls a function value (macro, global or bound method).
  [[nodiscard]] result<value> call(const value& callee, call_args& args);

  /// Spends `steps` of the work budget; fails once it is spent.
  [[nodiscard]] result<void> charge(std::uint64_t steps);

  /// Fails when a string of `bytes` would pass the size bound.
  [[nodiscard]] result<void> check_string(std::size_t bytes) const;

  /// Fails when a list of `items` would pass the size bound.
  [[nodiscard]] result<void> check_list(std::size_t items) const;

  /// An error (invalid_argument) at the line being evaluated.
  [[nodiscard]] error fail(std::string_view what) const;

  /// A new namespace, cleared when the render ends (namespaces can form
  /// reference cycles; clearing them frees everything).
  [[nodiscard]] value make_namespace(object_data data);

  /// Fails for names a namespace may not hold: transformers refuses
  /// underscore-prefixed ones (they would reach Python internals).
  [[nodiscard]] result<void> check_namespace_name(std::string_view name) const;

  /// The time strftime_now formats.
  [[nodiscard]] std::tm now() const;

  /// The limits in force.
  [[nodiscard]] const limits& bounds() const { return bounds_; }

 private:
  struct frame {
    std::unordered_map<std::string, value> vars;
    std::shared_ptr<frame> parent;
  };
  enum class flow : std::uint8_t { normal, break_, continue_ };

  /// Counts evaluation depth for the lifetime of one exec or eval.
  class depth_guard {
   public:
    explicit depth_guard(interpreter& in) : in_(in) { ++in_.depth_; }
    depth_guard(const depth_guard&) = delete;
    depth_guard& operator=(const depth_guard&) = delete;
    ~depth_guard() { --in_.depth_; }
    [[nodiscard]] bool too_deep() const { return in_.depth_ > in_.bounds_.max_depth; }

   private:
    interpreter& in_;
  };

  // Statements (interpreter.cpp, interpreter_loops.cpp).
  result<flow> exec_block(const std::vector<stmt_ptr>& body);
  result<flow> exec(const stmt& s);
  result<flow> exec_for(const stmt& s);
  result<void> exec_set(const stmt& s);
  result<void> exec_call_block(const stmt& s);
  result<std::string> capture(const std::vector<stmt_ptr>& body, std::shared_ptr<frame> scope);
  result<void> write(std::string_view text);
  result<void> bind_targets(frame& f, const std::vector<std::string>& targets, const value& v);
  value define_macro(const stmt& s);
  result<value> call_macro(const stmt& def, const std::shared_ptr<frame>& closure, call_args& args);

  // Expressions (interpreter_eval.cpp).
  result<value> eval(const expr& e);
  result<value> eval_call(const expr& e);
  result<value> eval_filter(const expr& e, const value* block_input);
  result<value> eval_binary(const expr& e);
  result<value> eval_compare(const expr& e);
  result<value> eval_collection(const expr& e);
  result<call_args> eval_args(const expr& e, std::size_t first);

  [[nodiscard]] value lookup(const std::string& name) const;
  void assign(const std::string& name, value v);
  std::shared_ptr<frame> child_frame();

  const program& code_;
  limits bounds_;
  std::optional<std::tm> now_;
  std::shared_ptr<frame> root_;
  std::shared_ptr<frame> current_;
  std::string* out_ = nullptr;
  std::uint64_t steps_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
  std::vector<std::shared_ptr<object_data>> namespaces_;  // cleared at the end
  std::vector<std::shared_ptr<frame>> closures_;          // frames macros captured
};

}  // namespace mstar::models::jinja
