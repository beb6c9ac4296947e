// --gpu-memory-fraction at the command line: mstar-tool memory-plan prints the
// plan engine/memory_plan makes for a checkpoint on a device of a given size,
// and mstar-run refuses a fraction outside (0, 1] and says the CPU ignores it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace {

using mstar::test::process_output;
using nlohmann::json;

const std::string hybrid = std::string{MSTAR_FIXTURES_DIR} + "/models/nemotron_h_tiny_hybrid";

process_output memory_plan(const std::vector<std::string>& args) {
  std::vector<std::string> argv{MSTAR_TOOL_PATH, "memory-plan", "--model", hybrid};
  argv.insert(argv.end(), args.begin(), args.end());
  return mstar::test::run_process(argv);
}

TEST(mstar_tool_memory_plan, prints_a_plan_whose_numbers_add_up) {
  const auto out = memory_plan({"--gpu-memory", "2", "--fraction", "0.5", "--context", "1000"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const auto plan = json::parse(out.out);
  EXPECT_EQ(plan.at("family"), "nemotron_h");
  EXPECT_EQ(plan.at("context"), 1000);
  EXPECT_EQ(plan.at("pages_per_request"), 63);  // ceil(1000 / 16)
  const auto budget = plan.at("budget_bytes").get<std::uint64_t>();
  EXPECT_EQ(budget, (std::uint64_t{1} << 30) - plan.at("weight_bytes").get<std::uint64_t>() -
                        plan.at("workspace_bytes").get<std::uint64_t>());
  const auto page = plan.at("page_bytes").get<std::uint64_t>();
  const auto slot = plan.at("slot_bytes").get<std::uint64_t>();
  const auto fixed = page + (1 + plan.at("checkpoint_slots").get<std::uint64_t>()) * slot;
  const auto n = plan.at("max_requests").get<std::int64_t>();
  EXPECT_EQ(n, static_cast<std::int64_t>((budget - fixed) / (63 * page + slot)));
  EXPECT_EQ(plan.at("slots"), n + 1);
  EXPECT_GE(plan.at("pages").get<std::int64_t>(), 1 + 63 * n);
  EXPECT_LE(plan.at("pool_bytes").get<std::uint64_t>(), budget);
  EXPECT_NE(plan.at("summary").get<std::string>().find("requests at 1000 tokens"),
            std::string::npos);
}

TEST(mstar_tool_memory_plan, refuses_a_device_too_small_naming_the_numbers) {
  const auto out = memory_plan({"--gpu-memory", "0.0005"});
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_TRUE(out.out.empty()) << out.out;
  EXPECT_NE(out.err.find("mstar-tool memory-plan: --gpu-memory-fraction 0.9: "), std::string::npos)
      << out.err;
}

TEST(mstar_tool_memory_plan, refuses_a_fraction_outside_the_unit_interval) {
  for (const char* bad : {"0", "1.5", "-1", "x"}) {
    const auto out = memory_plan({"--gpu-memory", "80", "--fraction", bad});
    EXPECT_EQ(out.exit_code, 2) << bad;
    EXPECT_NE(out.err.find("must be a number in (0, 1]"), std::string::npos) << out.err;
  }
}

TEST(mstar_run_memory_fraction, refuses_a_fraction_outside_the_unit_interval) {
  const auto out = mstar::test::run_process(
      {MSTAR_RUN_PATH, "--model", hybrid, "--prompt", "hi", "--gpu-memory-fraction", "0"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.err.find("--gpu-memory-fraction"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("must be a number in (0, 1], got '0'"), std::string::npos) << out.err;
}

TEST(mstar_run_memory_fraction, says_the_cpu_ignores_it_and_keeps_the_pool_sizes) {
  const auto out = mstar::test::run_process({MSTAR_RUN_PATH, "--model", hybrid, "--prompt-ids",
                                             "5,6,7", "--max-tokens", "2", "--gpu-memory-fraction",
                                             "0.5", "--max-pages", "100"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.err.find("--gpu-memory-fraction is ignored on the CPU: the pools keep 100 KV "
                         "pages and 64 recurrent slots"),
            std::string::npos)
      << out.err;
  const auto quiet = mstar::test::run_process(
      {MSTAR_RUN_PATH, "--model", hybrid, "--prompt-ids", "5,6,7", "--max-tokens", "2"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("gpu-memory-fraction"), std::string::npos) << quiet.err;
}

}  // namespace
