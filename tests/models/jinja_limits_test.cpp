// Malformed and hostile templates: each must end in an error naming what and
// where, never in a crash, a hang or unbounded memory.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "models/jinja/template.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models::jinja {
namespace {

using ojson = nlohmann::ordered_json;
using mstar::test::contains;

// The error of parsing or rendering `source` (fails the test if it succeeds).
error failure_of(std::string_view source, const ojson& variables = ojson::object(),
                 const limits& bounds = {}) {
  auto tmpl = compiled_template::parse(source, bounds);
  if (!tmpl)
    return tmpl.error();
  auto out = tmpl->render(variables, render_options{bounds, std::nullopt});
  EXPECT_FALSE(out) << "rendered " << out->size() << " bytes instead of failing";
  return out ? make_error(errc::internal, "no error") : out.error();
}

TEST(jinja_errors, malformed_templates_name_the_line) {
  struct bad {
    const char* source;
    const char* line;
    const char* says;
  };
  const bad cases[] = {
      {"ok\n{{ x", "line 2", "'}}'"},
      {"{% if x %}\n\n{% endfor %}", "line 3", "'endfor'"},
      {"{% for x in y %}\n{{ x }}", "line 2", "'endfor'"},
      {"a\n\n{% nosuchtag %}", "line 3", "unknown tag 'nosuchtag'"},
      {"{{ x | nosuch }}", "line 1", "no filter named 'nosuch'"},
      {"\n{{ x is nosuch }}", "line 2", "no test named 'nosuch'"},
      {"{{ 'unterminated }}", "line 1", "unterminated string"},
      {"{{ 1 + }}", "line 1", "unexpected '}}'"},
      {"{# never closed", "line 1", "comment"},
      {"{% raw %}never closed", "line 1", "endraw"},
      {"{% break %}", "line 1", "outside of a for loop"},
      {"{{ (1, 2 }}", "line 1", "unexpected"},
      {"{% set %}", "line 1", "variable name"},
      {"{{ f(a=1, 2) }}", "line 1", "positional argument follows a keyword"},
  };
  for (const auto& c : cases) {
    auto tmpl = compiled_template::parse(c.source);
    ASSERT_FALSE(tmpl) << c.source;
    EXPECT_EQ(tmpl.error().code(), errc::parse_error) << c.source;
    EXPECT_TRUE(contains(tmpl.error().message(), c.line)) << c.source;
    EXPECT_TRUE(contains(tmpl.error().message(), c.says)) << c.source;
  }
}

TEST(jinja_errors, unsupported_tags_say_so) {
  for (const char* source : {"{% include 'x' %}", "{% extends 'x' %}", "{% import 'x' as y %}",
                             "{% for x in y recursive %}{% endfor %}"}) {
    auto tmpl = compiled_template::parse(source);
    ASSERT_FALSE(tmpl) << source;
    EXPECT_EQ(tmpl.error().code(), errc::unsupported) << source;
    EXPECT_TRUE(contains(tmpl.error().message(), "not supported")) << source;
  }
}

TEST(jinja_errors, runtime_errors_name_the_line) {
  const error e = failure_of("a\nb\n{{ 1 + 'x' }}");
  EXPECT_EQ(e.code(), errc::invalid_argument);
  EXPECT_TRUE(contains(e.message(), "line 3"));
  EXPECT_TRUE(contains(e.message(), "unsupported operand types for +: 'int' and 'str'"));
  EXPECT_TRUE(contains(failure_of("\n{{ 1 // 0 }}").message(), "line 2: integer division"));
  EXPECT_TRUE(contains(failure_of("{{ undefined_thing + 1 }}").message(), "undefined value"));
  EXPECT_TRUE(contains(failure_of("{{ nothing() }}").message(), "called an undefined value"));
  EXPECT_TRUE(contains(failure_of("{% for x in 5 %}{% endfor %}").message(), "not iterable"));
  EXPECT_TRUE(contains(failure_of("{{ {'a': 1} | tojson }}{{ x | tojson }}").message(),
                       "not JSON serializable"));
}

TEST(jinja_errors, raise_exception_surfaces_the_templates_message) {
  const ojson vars = ojson::parse(R"({"messages": [{"role": "system"}]})");
  const error e = failure_of(
      "{% if messages[0].role == 'system' %}\n"
      "  {{ raise_exception('System role not supported') }}\n"
      "{% endif %}",
      vars);
  EXPECT_EQ(e.code(), errc::invalid_argument);
  EXPECT_TRUE(contains(e.message(), "line 2"));
  EXPECT_TRUE(contains(e.message(), "raise_exception: System role not supported"));
}

TEST(jinja_errors, lenient_undefined_renders_empty_and_is_falsy) {
  auto tmpl = compiled_template::parse(
      "[{{ nope }}][{{ nope.deeper.still }}][{{ nope['k'] }}][{{ nope | length }}]"
      "{% if nope %}yes{% else %}no{% endif %}{% for x in nope %}x{% endfor %}");
  ASSERT_TRUE(tmpl);
  EXPECT_EQ(*tmpl->render(ojson::object()), "[][][][0]no");
}

TEST(jinja_limits, deep_block_nesting_is_refused_at_parse_time) {
  std::string source;
  for (int i = 0; i < 5000; ++i)
    source += "{% if true %}";
  const error e = failure_of(source);
  EXPECT_EQ(e.code(), errc::out_of_range);
  EXPECT_TRUE(contains(e.message(), "nests deeper than 100"));
}

TEST(jinja_limits, deep_expression_nesting_is_refused_at_parse_time) {
  for (const std::string& open :
       {std::string{"("}, std::string{"["}, std::string{"not "}, std::string{"-"}}) {
    std::string source = "{{ ";
    for (int i = 0; i < 20000; ++i)
      source += open;
    source += "1";
    if (open == "(" || open == "[")
      source += std::string(20000, open == "(" ? ')' : ']');
    source += " }}";
    EXPECT_EQ(failure_of(source).code(), errc::out_of_range) << open;
  }
}

TEST(jinja_limits, runaway_recursion_stops_at_the_call_depth) {
  const error e = failure_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.code(), errc::out_of_range);
  EXPECT_TRUE(contains(e.message(), "recursed deeper than 64"));
}

TEST(jinja_limits, huge_loops_stop_at_the_step_budget) {
  limits bounds;
  bounds.max_steps = 100'000;  // the default (2M) takes about 0.4 s in an optimised build
  const error e =
      failure_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 ojson::object(), bounds);
  EXPECT_EQ(e.code(), errc::out_of_range);
  EXPECT_TRUE(contains(e.message(), "budget of 100000 steps"));
  EXPECT_TRUE(contains(failure_of("{{ range(100001) | length }}").message(), "range()"));
}

TEST(jinja_limits, giant_output_stops_at_the_output_bound) {
  limits small;
  small.max_output_bytes = 1 << 20;
  const error e = failure_of("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
                             ojson::object(), small);
  EXPECT_EQ(e.code(), errc::out_of_range);
  EXPECT_TRUE(contains(e.message(), "output would pass the limit"));
}

TEST(jinja_limits, doubling_strings_and_lists_stop_at_their_bounds) {
  EXPECT_EQ(failure_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .code(),
            errc::out_of_range);
  EXPECT_EQ(failure_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}"
                       "{% set ns.l = ns.l + ns.l %}{% endfor %}")
                .code(),
            errc::out_of_range);
  EXPECT_EQ(failure_of("{{ 'x' * 10000000000 }}").code(), errc::out_of_range);
  EXPECT_EQ(failure_of("{{ [1] * 10000000000 }}").code(), errc::out_of_range);
}

TEST(jinja_limits, deep_values_built_in_loops_are_refused) {
  const error e = failure_of(
      "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}"
      "{% endfor %}");
  EXPECT_EQ(e.code(), errc::out_of_range);
  EXPECT_TRUE(contains(e.message(), "nests deeper"));
}

TEST(jinja_limits, self_referencing_namespaces_fail_to_print_and_do_not_leak) {
  const error e = failure_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_EQ(e.code(), errc::out_of_range);
  auto tmpl = compiled_template::parse(
      "{% set ns = namespace() %}{% set ns.me = ns %}{% macro m() %}{% endmacro %}ok");
  ASSERT_TRUE(tmpl);
  EXPECT_EQ(*tmpl->render(ojson::object()), "ok");  // the sanitizer builds check the cycle is freed
}

TEST(jinja_limits, deeply_nested_inputs_are_refused) {
  ojson deep = ojson::array();
  for (int i = 0; i < 1000; ++i)
    deep = ojson::array({deep});
  auto tmpl = compiled_template::parse("{{ x | length }}");
  ASSERT_TRUE(tmpl);
  auto out = tmpl->render(ojson{{"x", deep}});
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), errc::out_of_range);
  EXPECT_TRUE(contains(out.error().message(), "variable 'x'"));
}

TEST(jinja_limits, invalid_utf8_templates_are_refused) {
  auto tmpl = compiled_template::parse("ok \xC3\x28");
  ASSERT_FALSE(tmpl);
  EXPECT_TRUE(contains(tmpl.error().message(), "UTF-8"));
}

}  // namespace
}  // namespace mstar::models::jinja
