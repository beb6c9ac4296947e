// The interpreter's pieces, each expectation checked against jinja2 3.1.6 in
// Hugging Face's environment (trim_blocks, lstrip_blocks, loopcontrols).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "models/jinja/template.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models::jinja {
namespace {

using ojson = nlohmann::ordered_json;
using mstar::test::contains;

// The render of `source` with `variables`, or "ERROR: <message>".
std::string render(std::string_view source, const ojson& variables = ojson::object()) {
  auto tmpl = compiled_template::parse(source);
  if (!tmpl)
    return "ERROR: " + tmpl.error().message();
  auto out = tmpl->render(variables);
  if (!out)
    return "ERROR: " + out.error().message();
  return *out;
}

TEST(jinja_template, trims_blocks_and_strips_their_leading_whitespace_as_hf_configures) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nend"), "yes\nend");
  EXPECT_EQ(render("  {% if true %}x{% endif %}  \n"), "x  ");
  EXPECT_EQ(render("a\n    {% if true %}\n    b\n    {% endif %}\nc"), "a\n    b\nc");
  EXPECT_EQ(render("  {{ 'v' }}  "), "  v  ");  // variables are never lstripped
  EXPECT_EQ(render("a  \n  {%- if true -%}  \n  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render("  {%+ if true %}kept{% endif %}"), "  kept");
  EXPECT_EQ(render("a\n{# note #}\nb"), "a\nb");
  EXPECT_EQ(render("a {#- note -#} b"), "ab");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(render("line\r\nnext\r\n"), "line\nnext");  // newlines normalised, last one dropped
}

TEST(jinja_template, exposes_loop_variables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};"
                   "{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}"),
            "-2|1-3|2-|");
  EXPECT_EQ(render("{% for x in range(4) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}"), "abca");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(9) if x is odd %}{{ x }}/{{ loop.length }} {% endfor %}"),
            "1/4 3/4 5/4 7/4 ");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1b2");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}"
                   "{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "023");
  EXPECT_EQ(render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}"
                   "{{ loop.index }}{% endfor %}"),
            "1x2y11x2y2");
}

TEST(jinja_template, scopes_assignments_like_jinja) {
  EXPECT_EQ(render("{% set x = 'out' %}{% for i in [1, 2] %}{% if i == 1 %}{% set x = 'in' %}"
                   "{% endif %}[{{ x }}]{% endfor %}{{ x }}"),
            "[in][out]out");
  EXPECT_EQ(render("{% if true %}{% set z = 3 %}{% endif %}{{ z }}"), "3");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set s %}  block {{ 1 }}{% endset %}[{{ s }}]"), "[  block 1]");
  EXPECT_EQ(render("{% set s | upper %}quiet{% endset %}{{ s }}"), "QUIET");
  EXPECT_EQ(render("{% with y = 2 %}{{ y }}{% endwith %}[{{ y }}]"), "2[]");
}

TEST(jinja_template, namespaces_carry_values_out_of_loops) {
  EXPECT_EQ(render("{% set ns = namespace(n=0, seen=[]) %}{% for i in range(3) %}"
                   "{% set ns.n = ns.n + i %}{% set ns.seen = ns.seen + [i] %}{% endfor %}"
                   "{{ ns.n }} {{ ns.seen }} {{ ns.missing is defined }}"),
            "3 [0, 1, 2] False");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }} {{ ns }}"),
            "12 <Namespace {'a': 1, 'b': 2}>");
  EXPECT_TRUE(contains(render("{% set x = 1 %}{% set x.y = 2 %}"), "not a namespace"));
  EXPECT_TRUE(contains(render("{% set ns = namespace() %}{% set ns._hidden = 1 %}"),
                       "underscore-prefixed"));
  EXPECT_TRUE(contains(render("{% set ns = namespace(_x=1) %}"), "underscore-prefixed"));
}

TEST(jinja_template, calls_macros_with_defaults_keywords_and_caller) {
  EXPECT_EQ(render("{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}"
                   "{{ m(1) }} {{ m(1, 2, 3) }} {{ m(b=5, a=4) }} {{ m() }}"),
            "1BNone 123 45None BNone");
  EXPECT_EQ(render("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}"),
            "(1, 2){'k': 3}");
  EXPECT_EQ(render("{% macro tag(n) %}<{{ n }}>{{ caller() }}</{{ n }}>{% endmacro %}"
                   "{% call tag('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %}"),
            "[1][2]");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ f(3) }}"),
            "321");
  EXPECT_EQ(render("{% set y = 1 %}{% macro m() %}{{ y }}{% endmacro %}{% set y = 2 %}{{ m() }}"),
            "2");  // macros read the template's variables when called
  EXPECT_EQ(render("{% macro m() %} x {% endmacro %}[{{ m() | trim }}]"), "[x]");
  EXPECT_TRUE(contains(render("{% macro m(a) %}{% endmacro %}{{ m(1, a=2) }}"), "ERROR"));
}

TEST(jinja_template, applies_filters_like_jinja_and_hf) {
  const ojson vars = ojson::parse(R"({"xs": [{"n": "b", "v": 2}, {"n": "a", "v": 1}]})");
  EXPECT_EQ(
      render("{{ xs | map(attribute='n') | join(',') }} {{ xs | sort(attribute='v') | first }}"
             " {{ xs | selectattr('v', 'gt', 1) | list | length }} {{ xs | length }}",
             vars),
      "b,a {'n': 'a', 'v': 1} 1 2");
  EXPECT_EQ(
      render("{{ '  a  ' | trim }}|{{ 'ab' | upper }}|{{ 'x-y z' | title }}|"
             "{{ 'aXa' | replace('a', 'b') }}|{{ u | default('d') }}|{{ '' | d('e', true) }}"),
      "a|AB|X-Y Z|bXb|d|e");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 'é']} | tojson }} {{ [1] | tojson(indent=2) }}"),
            "{\"b\": 1, \"a\": [1, \"é\"]} [\n  1\n]");
  EXPECT_EQ(render("{{ '5' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float }} {{ 2.5 | round }} "
                   "{{ 2.675 | round(2) }} {{ -2 | abs }} {{ [3, 1] | max }} {{ [1, 2] | sum }}"),
            "6 0 2.5 2.0 2.67 2 3 3");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2) }}|{{ 'ab' | center(6) }}|{{ 'a b  c' | wordcount }}"),
            "a\n  b|  ab  |3");
  EXPECT_EQ(render("{{ [1, 1, 2] | unique | list }} {{ {'b': 1, 'a': 2} | dictsort }} "
                   "{{ {'a': 1} | items | list }} {{ 'ab' | list }} {{ [1, 2] | reverse | list }}"),
            "[1, 2] [('a', 2), ('b', 1)] [('a', 1)] ['a', 'b'] [2, 1]");
  EXPECT_TRUE(contains(render("{{ x | nosuchfilter }}"), "no filter named 'nosuchfilter'"));
}

TEST(jinja_template, evaluates_tests_and_operators_like_python) {
  EXPECT_EQ(
      render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 8 }} {{ 1 + 1.5 }} "
             "{{ 'a' ~ 1 ~ none }} {{ [1] + [2] }} {{ 'ab' * 2 }} {{ 1 == 1.0 }} {{ 1 < 2 < 3 }}"),
      "3 -4 2 3.5 256 2.5 a1None [1, 2] abab True True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k': 0} }} {{ x in y }}"),
            "True True True False");
  EXPECT_EQ(
      render("{{ none is none }} {{ 1 is string }} {{ 'a' is string }} {{ {} is mapping }} "
             "{{ [] is iterable }} {{ true is boolean }} {{ 1 is integer }} {{ x is defined }} "
             "{{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ x is not defined }}"),
      "True False True True True True True False True True True");
  EXPECT_EQ(render("{{ 'x' if true else 'y' }}{{ 'x' if false }}{{ 0 or 'z' }}{{ 1 and 2 }}"),
            "xz2");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 3.0 }} {{ 2 ** -1 }}"),
            "0.30000000000000004 1e+16 1e-05 3.0 0.5");
}

TEST(jinja_template, slices_and_indexes_strings_and_lists_by_python_rules) {
  EXPECT_EQ(render("{{ 'abcdef'[::-1] }} {{ 'abcdef'[1:3] }} {{ 'abcdef'[-2:] }} {{ 'abc'[:-1] }} "
                   "{{ [1, 2, 3, 4][::2] }} {{ [1, 2, 3][5:] }} {{ [1, 2, 3][-1] }} "
                   "{{ 'héllo'[1:3] }} {{ [1, 2][7] is defined }}"),
            "fedcba bc ef ab [1, 3] [] 3 él False");
  const ojson vars = ojson::parse(R"({"m": [{"role": "system"}, {"role": "user"}]})");
  EXPECT_EQ(render("{{ m[1:] | map(attribute='role') | list }} {{ m[0].role }} {{ m[0]['role'] }} "
                   "{{ m.0.role }} {{ m[-1].get('role') }} {{ m[0].items() | list }}",
                   vars),
            "['user'] system system system user [('role', 'system')]");
  EXPECT_TRUE(contains(render("{{ 'abc'[::0] }}"), "slice step cannot be zero"));
}

TEST(jinja_template, calls_the_string_methods_templates_use) {
  EXPECT_EQ(
      render("{{ ' a '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b'.split(',') }}|"
             "{{ 'a  b'.split() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|"
             "{{ 'aa'.replace('a', 'b') }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|"
             "{{ 'ab cd'.title() }}|{{ 'abc'.find('c') }}|{{ '{}-{x}'.format(1, x=2) }}|"
             "{{ '\\n'.join(['a', 'b']) }}"),
      "a|a|['a', 'b']|['a', 'b']|True|True|bb|ABab|Ab Cd|2|1-2|a\nb");
  EXPECT_EQ(render("{{ 'a</think>b'.split('</think>')[-1].lstrip('\\n') }}"), "b");
}

TEST(jinja_template, formats_now_from_the_fixed_time) {
  auto tmpl = compiled_template::parse("{{ strftime_now('%d %b %Y %H:%M') }}");
  ASSERT_TRUE(tmpl);
  render_options options;
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  now.tm_hour = 8;
  now.tm_min = 5;
  options.now = now;
  EXPECT_EQ(*tmpl->render(ojson::object(), options), "26 Jul 2024 08:05");
  EXPECT_EQ(render("{{ strftime_now is defined }}"), "True");
}

TEST(jinja_template, keeps_the_key_order_of_its_inputs) {
  const ojson vars = ojson::parse(R"({"t": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})");
  EXPECT_EQ(render("{{ t | tojson }} {{ t.keys() | list }}", vars),
            "{\"zeta\": 1, \"alpha\": {\"y\": 2, \"b\": 3}} ['zeta', 'alpha']");
}

}  // namespace
}  // namespace mstar::models::jinja
