// Runs the real mstar-tool binary: the published window-schedule vectors
// through `mstar-tool windows`, and its error and help behaviour.
#include <cstdint>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace {

using json = nlohmann::json;
using mstar::test::process_output;

const std::string error_prefix = "mstar-tool windows: ";

process_output run_windows(const std::vector<std::string>& args) {
  std::vector<std::string> argv{MSTAR_TOOL_PATH, "windows"};
  argv.insert(argv.end(), args.begin(), args.end());
  return mstar::test::run_process(argv);
}

std::vector<std::string> schedule_args(const json& inputs) {
  // --name=value keeps negative values from reading as options.
  std::vector<std::string> args;
  for (const char* name : {"total", "window", "context", "overlap"}) {
    const auto value = inputs.at(std::string{name} + "_units").get<std::int64_t>();
    args.push_back("--" + std::string{name} + "=" + std::to_string(value));
  }
  return args;
}

std::string describe(const process_output& out) {
  return "exit " + std::to_string(out.exit_code) + "\nstdout: " + out.out + "\nstderr: " + out.err;
}

void expect_refused(const process_output& out) {
  EXPECT_EQ(out.exit_code, 2) << describe(out);
  EXPECT_TRUE(out.out.empty()) << describe(out);
  EXPECT_EQ(out.err.rfind(error_prefix, 0), 0u) << describe(out);
  EXPECT_GT(out.err.size(), error_prefix.size() + 1) << describe(out);
}

json parse_one_line(const process_output& out) {
  EXPECT_EQ(out.exit_code, 0) << describe(out);
  EXPECT_TRUE(out.err.empty()) << describe(out);
  EXPECT_FALSE(out.out.empty());
  if (out.out.empty())
    return json{};
  EXPECT_EQ(out.out.find('\n'), out.out.size() - 1) << "not exactly one line: " << out.out;
  return json::parse(out.out);
}

json schedule_cases(const char* kind) {
  const json vectors = mstar::test::load_fixture_json("vectors/windowing.json");
  json picked = json::array();
  for (const json& c : vectors.at("cases")) {
    if (c.at("kind") == kind)
      picked.push_back(c);
  }
  return picked;
}

TEST(mstar_tool_windows, prints_every_published_schedule) {
  const json cases = schedule_cases("schedule");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("id").get<std::string>());
    const json& expected = c.at("expected");
    const json got = parse_one_line(run_windows(schedule_args(c.at("inputs"))));
    ASSERT_TRUE(got.is_object()) << got.dump();
    EXPECT_EQ(got.at("stride"), expected.at("stride"));
    EXPECT_EQ(got.at("num_windows"), expected.at("num_windows"));
    EXPECT_EQ(got.at("windows"), expected.at("windows"));
    EXPECT_FALSE(got.contains("retention")) << "retention without token options";
    EXPECT_EQ(got.size(), 3u) << got.dump();
  }
}

TEST(mstar_tool_windows, prints_every_published_retention_probe) {
  int probes = 0;
  for (const json& c : schedule_cases("schedule")) {
    for (const json& probe : c.at("expected").at("retention")) {
      auto args = schedule_args(c.at("inputs"));
      args.push_back("--tokens-per-unit=" + probe.at("tokens_per_unit").dump());
      args.push_back("--prefix-tokens=" + probe.at("prefix_tokens").dump());
      SCOPED_TRACE(c.at("id").get<std::string>() + " " + args[4] + " " + args[5]);
      ++probes;
      const process_output out = run_windows(args);
      if (probe.contains("raises")) {
        expect_refused(out);
        continue;
      }
      const json got = parse_one_line(out);
      ASSERT_TRUE(got.contains("retention")) << got.dump();
      EXPECT_EQ(got.at("retention"), probe.at("result"));
      EXPECT_EQ(got.at("windows"), c.at("expected").at("windows"));
    }
  }
  EXPECT_GT(probes, 0);
}

TEST(mstar_tool_windows, refuses_published_construct_errors_with_the_library_reason) {
  const json cases = schedule_cases("construct");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("id").get<std::string>());
    const process_output out = run_windows(schedule_args(c.at("inputs")));
    expect_refused(out);
    if (c.at("expected").contains("message")) {
      EXPECT_EQ(out.err, error_prefix + c.at("expected").at("message").get<std::string>() + "\n");
    }
  }
}

TEST(mstar_tool_windows, refuses_each_invalid_argument_naming_it) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--total=0", "--window=8"}, "total_units must be >= 1, got 0"},
      {{"--total=8", "--window=0"}, "window_units must be >= 1, got 0"},
      {{"--total=8", "--window=4", "--overlap=-1"}, "overlap_units must be in [0, window_units)"},
      {{"--total=8", "--window=4", "--context=-1"}, "context_units must be >= 0, got -1"},
      {{"--total=8", "--window=4", "--tokens-per-unit=0", "--prefix-tokens=0"},
       "tokens_per_unit must be >= 1, got 0"},
  };
  for (const auto& [args, reason] : cases) {
    SCOPED_TRACE(reason);
    const process_output out = run_windows(args);
    expect_refused(out);
    EXPECT_NE(out.err.find(reason), std::string::npos) << out.err;
  }
}

TEST(mstar_tool_windows, refuses_one_token_option_without_the_other) {
  for (const char* lone : {"--tokens-per-unit=4", "--prefix-tokens=24"}) {
    SCOPED_TRACE(lone);
    const process_output out = run_windows({"--total=48", "--window=8", "--context=16", lone});
    expect_refused(out);
    EXPECT_NE(out.err.find("--tokens-per-unit and --prefix-tokens"), std::string::npos) << out.err;
  }
}

TEST(mstar_tool_windows, refuses_a_missing_required_option) {
  const process_output out = run_windows({"--window=8"});
  EXPECT_EQ(out.exit_code, 2) << describe(out);
  EXPECT_TRUE(out.out.empty()) << describe(out);
  EXPECT_NE(out.err.find("--total"), std::string::npos) << describe(out);
}

TEST(mstar_tool_windows, accepts_negative_looking_values_as_separate_arguments) {
  const process_output out = run_windows({"--total", "8", "--window", "4", "--context", "-1"});
  expect_refused(out);
  EXPECT_NE(out.err.find("context_units must be >= 0, got -1"), std::string::npos) << out.err;
}

TEST(mstar_tool_windows, help_exits_zero_and_explains_units_and_options) {
  const process_output out = run_windows({"--help"});
  EXPECT_EQ(out.exit_code, 0) << describe(out);
  for (const char* needle : {"latent frame", "--total", "--window", "--context", "--overlap",
                             "--tokens-per-unit", "--prefix-tokens", "released_end"}) {
    EXPECT_NE(out.out.find(needle), std::string::npos) << needle << "\n" << out.out;
  }
}

}  // namespace
