#include "models/chat_template.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/models/temp_folder.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using ojson = nlohmann::ordered_json;
using mstar::test::contains;

ojson read_ordered(const std::filesystem::path& path) {
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error("cannot open " + path.string());
  return ojson::parse(in);
}

std::string read_text(const std::filesystem::path& path) {
  return test::read_bytes(path);
}

// 2025-03-14T09:26:53, the time make_expected.py fixes strftime_now at.
std::tm fixed_now() {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 2;
  t.tm_mday = 14;
  t.tm_hour = 9;
  t.tm_min = 26;
  t.tm_sec = 53;
  return t;
}

struct tally {
  int rendered = 0;
  int failed_as_expected = 0;
};

// Renders every case of one <name>.expected.json and compares byte for byte.
tally check_expected_file(const std::filesystem::path& expected_path) {
  tally counts;
  const ojson doc = read_ordered(expected_path);
  const auto dir = expected_path.parent_path();
  const std::string source = read_text(dir / doc["template"].get<std::string>());
  chat_template::token_map tokens;
  for (const auto& [name, text] : doc["special_tokens"].items())
    tokens.emplace(name, text.get<std::string>());
  auto tmpl = chat_template::from_source(source, tokens);
  EXPECT_TRUE(tmpl) << expected_path << ": " << tmpl.error().to_string();
  if (!tmpl)
    return counts;
  EXPECT_EQ(doc["now"].get<std::string>(), "2025-03-14T09:26:53");
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(expected_path.filename().string() + " / " + name);
    chat_render_options options;
    options.add_generation_prompt = c.value("add_generation_prompt", false);
    options.continue_final_message = c.value("continue_final_message", false);
    options.tools = c.value("tools", ojson{});
    options.documents = c.value("documents", ojson{});
    options.extra = c.value("kwargs", ojson::object());
    options.now = fixed_now();
    const auto out = tmpl->render(c["messages"], options);
    if (c.contains("expected")) {
      EXPECT_TRUE(out) << out.error().to_string();
      if (!out)
        continue;
      EXPECT_EQ(*out, c["expected"].get<std::string>());
      ++counts.rendered;
      continue;
    }
    EXPECT_FALSE(out) << "expected the error '" << c["error"].get<std::string>() << "', got:\n"
                      << *out;
    if (out)
      continue;
    if (c["error_type"] == "TemplateError") {  // raise_exception: its message must reach the caller
      EXPECT_TRUE(contains(out.error().message(), c["error"].get<std::string>()));
    }
    ++counts.failed_as_expected;
  }
  return counts;
}

tally check_folder(const std::filesystem::path& dir) {
  tally total;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator{dir}) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with(".expected.json") || file == "snippets.expected.json")
      continue;
    const tally t = check_expected_file(entry.path());
    total.rendered += t.rendered;
    total.failed_as_expected += t.failed_as_expected;
    ++files;
  }
  EXPECT_GT(files, 0) << "no *.expected.json in " << dir;
  std::cout << dir.string() << ": " << files << " templates, " << total.rendered
            << " renders identical, " << total.failed_as_expected << " failures as expected\n";
  return total;
}

TEST(chat_template, renders_every_fixture_case_byte_identically_to_transformers) {
  const tally t = check_folder(std::filesystem::path{test::fixtures_dir()} / "chat_templates");
  EXPECT_GT(t.rendered, 100);
}

// Published model templates cannot be committed here (see the fixtures
// README); point MSTAR_CHAT_TEMPLATES_EXTRA at a folder of <name>.jinja with
// make_expected.py's <name>.expected.json to check them the same way.
TEST(chat_template, renders_extra_templates_from_the_environment_byte_identically) {
  const char* extra = std::getenv("MSTAR_CHAT_TEMPLATES_EXTRA");
  if (extra == nullptr || *extra == '\0')
    GTEST_SKIP() << "MSTAR_CHAT_TEMPLATES_EXTRA is not set";
  const tally t = check_folder(extra);
  EXPECT_GT(t.rendered, 0);
}

TEST(chat_template, renders_language_edge_cases_like_jinja2) {
  const ojson doc = read_ordered(std::filesystem::path{test::fixtures_dir()} / "chat_templates" /
                                 "snippets.expected.json");
  int checked = 0;
  for (const auto& s : doc["snippets"]) {
    const std::string source = s["template"].get<std::string>();
    SCOPED_TRACE(source);
    auto tmpl = jinja::compiled_template::parse(source);
    auto out = tmpl ? tmpl->render(doc["variables"]) : result<std::string>{tmpl.error()};
    if (s.contains("expected")) {
      EXPECT_TRUE(out) << out.error().to_string();
      if (out) {
        EXPECT_EQ(*out, s["expected"].get<std::string>());
      }
    } else {
      EXPECT_FALSE(out) << "expected the error '" << s["error"].get<std::string>() << "'";
    }
    ++checked;
  }
  EXPECT_GE(checked, 60);
}

TEST(chat_template, loads_chat_template_jinja_before_tokenizer_config) {
  test::temp_folder dir;
  dir.write("chat_template.jinja", "file:{{ bos_token }}{{ messages[0].content }}");
  dir.write("tokenizer_config.json",
            R"({"chat_template": "config", "bos_token": {"content": "<s>", "lstrip": false},
                "eos_token": "</s>", "pad_token": null})");
  auto tmpl = chat_template::load(dir.path());
  ASSERT_TRUE(tmpl) << tmpl.error().to_string();
  EXPECT_EQ(tmpl->special_token("bos_token"), "<s>");
  EXPECT_EQ(tmpl->special_token("eos_token"), "</s>");
  EXPECT_EQ(tmpl->special_token("pad_token"), std::nullopt);
  auto out = tmpl->render(ojson::parse(R"([{"role": "user", "content": "hi"}])"));
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ(*out, "file:<s>hi");
}

TEST(chat_template, loads_a_string_template_from_tokenizer_config) {
  test::temp_folder dir;
  dir.write("tokenizer_config.json",
            R"({"chat_template": "{{ eos_token }}{% for m in messages %}{{ m.role }}{% endfor %}",
                "eos_token": "<|im_end|>"})");
  auto tmpl = chat_template::load(dir.path());
  ASSERT_TRUE(tmpl) << tmpl.error().to_string();
  auto out = tmpl->render(ojson::parse(R"([{"role": "user", "content": "hi"}])"));
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "<|im_end|>user");
}

TEST(chat_template, picks_default_or_tool_use_from_a_list_of_named_templates) {
  test::temp_folder dir;
  dir.write("tokenizer_config.json", R"({"chat_template": [
      {"name": "default", "template": "plain"},
      {"name": "tool_use", "template": "tools:{{ tools | length }}"},
      {"name": "rag", "template": "rag"}]})");
  auto tmpl = chat_template::load(dir.path());
  ASSERT_TRUE(tmpl) << tmpl.error().to_string();
  const ojson messages = ojson::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(*tmpl->render(messages), "plain");
  chat_render_options with_tools;
  with_tools.tools = ojson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(*tmpl->render(messages, with_tools), "tools:1");
}

TEST(chat_template, says_clearly_when_the_folder_has_no_template) {
  test::temp_folder dir;
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  auto tmpl = chat_template::load(dir.path());
  ASSERT_FALSE(tmpl);
  EXPECT_EQ(tmpl.error().code(), errc::not_found);
  EXPECT_TRUE(contains(tmpl.error().message(), "no chat template"));
  test::temp_folder empty;
  EXPECT_EQ(chat_template::load(empty.path()).error().code(), errc::not_found);
}

TEST(chat_template, names_the_file_and_line_of_a_template_that_does_not_parse) {
  test::temp_folder dir;
  dir.write("chat_template.jinja", "line one\n{% for m in messages %}\n{{ m.content }}\n");
  auto tmpl = chat_template::load(dir.path());
  ASSERT_FALSE(tmpl);
  EXPECT_EQ(tmpl.error().code(), errc::parse_error);
  EXPECT_TRUE(contains(tmpl.error().message(), "chat_template.jinja"));
  EXPECT_TRUE(contains(tmpl.error().message(), "line 3"));  // the end of the template
  EXPECT_TRUE(contains(tmpl.error().message(), "'endfor'"));
}

TEST(chat_template, refuses_a_named_list_without_a_default) {
  test::temp_folder dir;
  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  auto tmpl = chat_template::load(dir.path());
  ASSERT_FALSE(tmpl);
  EXPECT_TRUE(contains(tmpl.error().message(), "'default'"));
}

TEST(chat_template, drops_null_keys_and_aliases_reasoning_like_transformers) {
  auto tmpl = chat_template::from_source("{% for m in messages %}{{ m | tojson }}\n{% endfor %}");
  ASSERT_TRUE(tmpl);
  const ojson messages = ojson::parse(R"([
      {"role": "assistant", "content": null, "reasoning": "r", "tool_calls": []}])");
  auto out = tmpl->render(messages);
  ASSERT_TRUE(out) << out.error().to_string();
  EXPECT_EQ(*out, R"({"thinking": "r", "role": "assistant", "reasoning": "r", "tool_calls": [], )"
                  R"("reasoning_content": "r"})"
                  "\n");
}

TEST(chat_template, refuses_inputs_transformers_refuses) {
  auto tmpl = chat_template::from_source("{{ messages | length }}");
  ASSERT_TRUE(tmpl);
  EXPECT_FALSE(tmpl->render(ojson::array()));
  EXPECT_FALSE(tmpl->render(ojson::object()));
  chat_render_options both;
  both.add_generation_prompt = true;
  both.continue_final_message = true;
  EXPECT_FALSE(tmpl->render(ojson::parse(R"([{"role": "user", "content": "x"}])"), both));
  chat_render_options bad_documents;
  bad_documents.documents = ojson::parse(R"(["not an object"])");
  EXPECT_FALSE(tmpl->render(ojson::parse(R"([{"role": "user", "content": "x"}])"), bad_documents));
  chat_render_options shadowing;
  shadowing.extra = ojson::parse(R"({"messages": []})");
  EXPECT_FALSE(tmpl->render(ojson::parse(R"([{"role": "user", "content": "x"}])"), shadowing));
}

}  // namespace
}  // namespace mstar::models
