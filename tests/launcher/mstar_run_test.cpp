// mstar-run end to end: JSON output equals the transformers reference on a
// committed fixture, the embedded default runs without flags, bad input is one
// clear error line and exit code 2.
#include <gtest/gtest.h>
#include <sstream>

#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace mstar {
namespace {

using nlohmann::json;

TEST(mstar_run, generates_the_reference_tokens_as_json) {
  const auto expected = test::load_fixture_json("models/nemotron_h_tiny_hybrid/expected.json");
  const auto& p = expected.at("prompts").at(2);
  std::string ids;
  for (const auto& id : p.at("prompt_ids"))
    ids.append(ids.empty() ? "" : ",").append(id.dump());
  const auto out = test::run_process(
      {MSTAR_RUN_PATH, "--model",
       std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid", "--prompt-ids", ids,
       "--prompt-ids", ids, "--max-tokens", "8", "--json", "--logits"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  std::istringstream lines{out.out};
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const auto doc = json::parse(line);
    EXPECT_EQ(doc.at("generated_ids"), p.at("generated_ids"));
    EXPECT_EQ(doc.at("prompt_ids"), p.at("prompt_ids"));
    EXPECT_EQ(doc.at("step_logits").size(), 8u);
    EXPECT_EQ(doc.at("matched_tokens"), 0);
  }
  EXPECT_EQ(count, 2);
  EXPECT_NE(out.err.find("time to first token"), std::string::npos);
}

TEST(mstar_run, runs_the_embedded_default_without_flags) {
  const auto out = test::run_process({MSTAR_RUN_PATH, "--max-tokens", "4"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.err.find("4 generated"), std::string::npos) << out.err;
}

TEST(mstar_run, refuses_bad_input_with_one_line_and_exit_code_2) {
  const std::vector<std::vector<std::string>> cases = {
      {MSTAR_RUN_PATH, "--model", "/nonexistent/model"},
      {MSTAR_RUN_PATH, "--prompt-ids", "1,x"},
      {MSTAR_RUN_PATH, "--max-tokens", "-3"},
      {MSTAR_RUN_PATH, "--logits"},
      {MSTAR_RUN_PATH, "--prompt-ids", "99999"},
      {MSTAR_RUN_PATH, "--no-such-flag"},
  };
  for (const auto& argv : cases) {
    const auto out = test::run_process(argv);
    EXPECT_EQ(out.exit_code, 2) << argv.back() << ": " << out.err;
    EXPECT_FALSE(out.err.empty()) << argv.back();
    EXPECT_TRUE(out.out.empty()) << argv.back();
  }
  EXPECT_EQ(test::run_process({MSTAR_RUN_PATH, "--help"}).exit_code, 0);
}

}  // namespace
}  // namespace mstar
