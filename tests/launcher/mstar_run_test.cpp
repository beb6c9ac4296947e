// mstar-run end to end: JSON output equals the transformers reference on a
// committed fixture, the embedded default runs without flags, bad input is one
// clear error line and exit code 2; seeded sampling, an end-of-sequence stop
// and a request larger than the pool.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/models/temp_folder.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace mstar {
namespace {

using nlohmann::json;

std::string fixture_ids(const json& prompt) {
  std::string ids;
  for (const auto& id : prompt.at("prompt_ids"))
    ids.append(ids.empty() ? "" : ",").append(id.dump());
  return ids;
}

// `argv` with every prompt of a fixture's expected.json as --prompt-ids.
std::vector<std::string> with_fixture_prompts(std::vector<std::string> argv, const json& expected) {
  for (const auto& p : expected.at("prompts")) {
    argv.push_back("--prompt-ids");
    argv.push_back(fixture_ids(p));
  }
  return argv;
}

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream lines{text};
  for (std::string line; std::getline(lines, line);)
    out.push_back(json::parse(line));
  return out;
}

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

// The embedded default (no --model) against its transformers fixture
// (models/embedded/default/expected.json): every prompt's greedy tokens.
TEST(mstar_run, the_embedded_default_generates_its_transformers_fixture_tokens) {
  std::ifstream in{std::string{MSTAR_FIXTURES_DIR} +
                   "/../../models/embedded/default/expected.json"};
  ASSERT_TRUE(in);
  const auto expected = json::parse(in);
  const auto out = test::run_process(
      with_fixture_prompts({MSTAR_RUN_PATH, "--json", "--max-tokens",
                            std::to_string(expected.at("max_new_tokens").get<int>())},
                           expected));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const auto lines = json_lines(out.out);
  ASSERT_EQ(lines.size(), expected.at("prompts").size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].at("prompt_ids"), expected.at("prompts").at(i).at("prompt_ids"));
    EXPECT_EQ(lines[i].at("generated_ids"), expected.at("prompts").at(i).at("generated_ids"))
        << "prompt " << i;
  }
}

// --tensor-parallel: ranks on threads, each over its part of the model; the
// transformers fixture's greedy tokens at 2 ranks, and rank counts or
// models that cannot split refused with one line naming why.
TEST(mstar_run, tensor_parallel_ranks_generate_the_reference_tokens) {
  const auto expected = test::load_fixture_json("models/nemotron_h_tiny_hybrid/expected.json");
  const auto out = test::run_process(
      with_fixture_prompts({MSTAR_RUN_PATH, "--model",
                            std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid",
                            "--tensor-parallel", "2", "--json", "--max-tokens", "8"},
                           expected));
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const auto lines = json_lines(out.out);
  ASSERT_EQ(lines.size(), expected.at("prompts").size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& want = expected.at("prompts").at(i).at("generated_ids");
    const auto& got = lines[i].at("generated_ids");
    ASSERT_LE(want.size(), 8u);
    for (std::size_t k = 0; k < want.size(); ++k)
      EXPECT_EQ(got.at(k), want.at(k)) << "prompt " << i << " token " << k;
  }
  EXPECT_NE(out.err.find("over 2 tensor-parallel ranks"), std::string::npos) << out.err;
}

TEST(mstar_run, tensor_parallel_refuses_what_cannot_split) {
  const std::string hybrid = std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid";
  // 2 B/C groups do not split 4 ways.
  auto out = test::run_process({MSTAR_RUN_PATH, "--model", hybrid, "--tensor-parallel", "4"});
  EXPECT_EQ(out.exit_code, 2) << out.err;
  EXPECT_NE(out.err.find("n_groups"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("rank 0"), std::string::npos) << out.err;
  out = test::run_process({MSTAR_RUN_PATH, "--tensor-parallel", "0"});
  EXPECT_EQ(out.exit_code, 2) << out.err;
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

// The CPU generation path (mstar-run through the actors) with what greedy
// runs never reach: seeded sampling, an end-of-sequence stop, a pool too
// small for the request.
TEST(mstar_run, seeded_sampling_is_reproducible_and_samples_differ) {
  const std::vector<std::string> argv = {
      MSTAR_RUN_PATH,
      "--model",
      std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid",
      "--prompt-ids",
      "5,6,7,8",
      "--max-tokens",
      "8",
      "--temperature",
      "1.0",
      "--top-k",
      "50",
      "--seed",
      "5",
      "-n",
      "3",
      "--ignore-eos",
      "--json"};
  const auto first = test::run_process(argv);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto again = test::run_process(argv);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto a = json_lines(first.out);
  const auto b = json_lines(again.out);
  ASSERT_EQ(a.size(), 3U);
  ASSERT_EQ(b.size(), 3U);
  std::set<std::string> distinct;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at("generated_ids"), b[i].at("generated_ids")) << "sample " << i;
    EXPECT_EQ(a[i].at("generated_ids").size(), 8U);
    EXPECT_EQ(a[i].at("finish_reason"), "length");
    distinct.insert(a[i].at("generated_ids").dump());
  }
  EXPECT_GT(distinct.size(), 1U) << "three seeded samples came out identical";
}

TEST(mstar_run, stops_at_the_models_end_of_sequence_id_unless_told_to_ignore_it) {
  // The fixture's config with eos_token_id set to the fourth greedy token of
  // a reference prompt (the first three differ from it).
  const auto expected = test::load_fixture_json("models/nemotron_h_tiny_hybrid/expected.json");
  const auto& p = expected.at("prompts").at(2);
  const auto generated = p.at("generated_ids").get<std::vector<std::int64_t>>();
  ASSERT_GE(generated.size(), 8U);
  const std::int64_t eos = generated[3];
  for (std::size_t i = 0; i < 3; ++i)
    ASSERT_NE(generated[i], eos);
  const std::filesystem::path fixture =
      std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid";
  test::temp_folder folder;
  auto config = test::load_fixture_json("models/nemotron_h_tiny_hybrid/config.json");
  config["eos_token_id"] = eos;
  folder.write("config.json", config.dump());
  std::filesystem::create_symlink(fixture / "model.safetensors",
                                  folder.path() / "model.safetensors");
  const std::vector<std::string> argv = {MSTAR_RUN_PATH,
                                         "--model",
                                         folder.path().string(),
                                         "--prompt-ids",
                                         fixture_ids(p),
                                         "--max-tokens",
                                         "8",
                                         "--json"};
  const auto stopped = test::run_process(argv);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  const auto s = json_lines(stopped.out);
  ASSERT_EQ(s.size(), 1U);
  EXPECT_EQ(s[0].at("generated_ids"),
            json(std::vector<std::int64_t>(generated.begin(), generated.begin() + 4)));
  EXPECT_EQ(s[0].at("finish_reason"), "stop");
  auto ignoring = argv;
  ignoring.push_back("--ignore-eos");
  const auto full = test::run_process(ignoring);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const auto f = json_lines(full.out);
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].at("generated_ids"), json(generated));
  EXPECT_EQ(f[0].at("finish_reason"), "length");
}

TEST(mstar_run, a_request_larger_than_the_pool_is_an_error_naming_the_pools) {
  std::string ids;
  for (int i = 0; i < 40; ++i)
    ids.append(ids.empty() ? "" : ",").append(std::to_string(5 + i));
  const auto out = test::run_process(
      {MSTAR_RUN_PATH, "--model",
       std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid", "--prompt-ids", ids,
       "--max-tokens", "4", "--page-size", "4", "--max-pages", "6"});
  EXPECT_NE(out.exit_code, 0) << out.out;
  EXPECT_NE(out.err.find("does not fit in the pools"), std::string::npos) << out.err;
}

}  // namespace
}  // namespace mstar
