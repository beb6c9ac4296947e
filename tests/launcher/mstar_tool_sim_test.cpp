// mstar-tool sim, end to end: a trace through the KV pool, refusals and bad
// lines that leave the pool as it was, prefix reuse from preprocess keys.
#include <gtest/gtest.h>
#include <sstream>

#include "core/hex.hpp"
#include "resources/kv/keys.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace mstar {
namespace {

using nlohmann::json;

std::vector<json> run_sim(const std::vector<std::string>& lines, int* exit_code = nullptr) {
  std::string input;
  for (const auto& l : lines)
    input += l + "\n";
  const auto out = test::run_process({MSTAR_TOOL_PATH, "sim"}, input);
  if (exit_code != nullptr)
    *exit_code = out.exit_code;
  std::vector<json> parsed;
  std::istringstream in{out.out};
  for (std::string line; std::getline(in, line);)
    parsed.push_back(json::parse(line));
  return parsed;
}

const std::string config =
    R"({"config":{"kv":{"page_size":8,"max_num_pages":8,"num_layers":1,"num_kv_heads":1,"head_dim":8,"prefix_cache":true}}})";

TEST(mstar_tool_sim, runs_steps_and_reports_plans_and_streams) {
  const auto out = run_sim(
      {config, R"({"op":"ingest","rid":"a"})",
       R"({"op":"step","kv":{"segments":[{"rid":"a","label":"main","span":12}]},"padding_rows":1})",
       R"({"op":"step","kv":{"segments":[{"rid":"a","label":"main","span":1}],"pre_forks":[["main","draft"]]}})"});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[2].at("ok").get<bool>());
  EXPECT_EQ(out[2].at("plan").at("main").at("qo_indptr"), json::array({0, 12, 13}));
  EXPECT_EQ(out[2].at("plan").at("main").at("kv_indices"), json::array({1, 2, 0}));
  EXPECT_EQ(out[2].at("kv").at("streams").at("a/main").at("stored_len"), 12);
  EXPECT_EQ(out[3].at("kv").at("streams").at("a/draft").at("stored_len"), 12);
  EXPECT_EQ(out[3].at("kv").at("free_pages"), 7 - 2 - 2);
}

TEST(mstar_tool_sim, a_refused_step_and_bad_lines_leave_the_pool_as_it_was) {
  int rc = 0;
  const auto out = run_sim(
      {config, R"({"op":"step","kv":{"segments":[{"rid":"a","span":20}]}})",
       R"({"op":"step","kv":{"segments":[{"rid":"b","span":8},{"rid":"c","span":40}]}})",
       R"({"op":"step","kv":{"segments":[{"rid":"b","span":8}],"retention":[{"rid":"b","context_budget":0}]}})",
       R"({"op":"step","kv":{"segments":[{"rid":"b","span":-3}]}})", "{not json",
       R"({"op":"fly","rid":"a"})", R"({"op":"probe","rid":"a"})"},
      &rc);
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(rc, 1);
  const json before = out[1].at("kv");
  EXPECT_FALSE(out[2].at("ok").get<bool>());
  EXPECT_NE(out[2].at("reason").get<std::string>().find("short"), std::string::npos);
  EXPECT_EQ(out[2].at("kv"), before);
  for (std::size_t i = 3; i < 7; ++i) {
    EXPECT_FALSE(out[i].at("ok").get<bool>());
    EXPECT_TRUE(out[i].contains("error")) << out[i].dump();
  }
  EXPECT_NE(out[3].at("error").get<std::string>().find("context_budget"), std::string::npos);
  EXPECT_NE(out[6].at("error").get<std::string>().find("unknown op 'fly'"), std::string::npos);
  EXPECT_EQ(out[7].at("kv"), before);
}

TEST(mstar_tool_sim, serves_a_second_request_from_cached_pages) {
  std::vector<std::vector<resources::token_id>> pages = {
      {1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 13, 14, 15, 16}, {17, 18}};
  json keys = json::array();
  for (const auto& k : resources::chain(pages).value())
    keys.push_back(to_hex(k));
  const json prefix = {{"main", {{"keys", keys}, {"tail", {17, 18}}}}};
  const auto out = run_sim({config, json{{"op", "ingest"}, {"rid", "a"}, {"prefix", prefix}}.dump(),
                            R"({"op":"step","kv":{"segments":[{"rid":"a","span":18}]}})",
                            json{{"op", "ingest"}, {"rid", "b"}, {"prefix", prefix}}.dump(),
                            R"({"op":"probe","rid":"b"})",
                            R"({"op":"step","kv":{"segments":[{"rid":"b","span":2}]}})"});
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[2].at("kv").at("cached_pages"), 2);
  EXPECT_EQ(out[4].at("matched_tokens"), 16);
  const auto a_pages = out[5].at("kv").at("streams").at("a/main").at("pages");
  const auto b_pages = out[5].at("kv").at("streams").at("b/main").at("pages");
  EXPECT_EQ(b_pages[0], a_pages[0]);
  EXPECT_EQ(b_pages[1], a_pages[1]);
  EXPECT_NE(b_pages[2], a_pages[2]);
  EXPECT_EQ(out[5].at("kv").at("streams").at("b/main").at("stored_len"), 18);
}

TEST(mstar_tool_sim, retention_and_explicit_release_show_in_the_stream) {
  const auto out = run_sim(
      {config, R"({"op":"step","kv":{"segments":[{"rid":"a","span":24}]}})",
       R"({"op":"protect_prefix","rid":"a","label":"main","tokens":8})",
       R"({"op":"release_oldest","rid":"a","label":"main","tokens":9})",
       R"({"op":"step","kv":{"segments":[{"rid":"a","span":16}],"retention":[{"rid":"a","label":"main","context_budget":8,"protected_prefix":8}]}})"});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[3].at("released_tokens"), 8);
  const auto s = out[4].at("kv").at("streams").at("a/main");
  EXPECT_EQ(s.at("released"), 24);
  EXPECT_EQ(s.at("stored_len"), 16);
  EXPECT_EQ(s.at("protected_prefix"), 8);
}

TEST(mstar_tool_sim, refuses_a_trace_without_a_config_line) {
  int rc = 0;
  const auto out = run_sim({R"({"op":"probe","rid":"a"})", config}, &rc);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].at("error").get<std::string>().find("config"), std::string::npos);
  EXPECT_TRUE(out[1].at("ok").get<bool>());
  EXPECT_EQ(rc, 1);
}

}  // namespace
}  // namespace mstar

namespace mstar {
namespace {

const std::string both =
    R"({"config":{"kv":{"page_size":8,"max_num_pages":16,"num_layers":1,"num_kv_heads":1,"head_dim":8},)"
    R"("recurrent":{"num_layers":2,"max_slots":4,"geometry":{"family":"mamba2","num_heads":4,"head_dim":8,"state_size":16,"n_groups":2,"conv_kernel_size":4}}}})";

TEST(mstar_tool_sim, drives_a_kv_and_a_recurrent_pool_in_one_step) {
  const auto out = run_sim(
      {both,
       R"({"op":"step","kv":{"segments":[{"rid":"a","span":10}]},"recurrent":{"segments":[{"rid":"a","span":10}],"pre_forks":[["main","draft"]]},"padding_rows":1})",
       R"({"op":"step","kv":{"segments":[{"rid":"a","span":1}]},"recurrent":{"segments":[{"rid":"a","span":1}]}})"});
  ASSERT_EQ(out.size(), 3u);
  const auto& rec = out[1].at("recurrent");
  EXPECT_EQ(rec.at("free_slots"), 1);
  EXPECT_EQ(rec.at("plan").at("main").at("slot_indices"), json::array({1, 0}));  // pad row: sink
  EXPECT_EQ(rec.at("plan").at("main").at("num_rows"), 2);
  EXPECT_EQ(rec.at("streams").at("a/main").at("has_state"), true);
  EXPECT_EQ(rec.at("streams").at("a/draft").at("slot"), 2);
  EXPECT_EQ(out[2].at("recurrent").at("plan").at("main").at("has_state"), json::array({true}));
}

TEST(mstar_tool_sim, a_refusal_by_either_pool_leaves_both_as_they_were) {
  const auto out = run_sim(
      {both,
       R"({"op":"step","kv":{"segments":[{"rid":"a","span":10}]},"recurrent":{"segments":[{"rid":"a","span":10}]}})",
       // The recurrent pool has 3 usable slots: b, c, d cannot all get one.
       R"({"op":"step","kv":{"segments":[{"rid":"b","span":8},{"rid":"c","span":8},{"rid":"d","span":8}]},"recurrent":{"segments":[{"rid":"b","span":8},{"rid":"c","span":8},{"rid":"d","span":8}]}})",
       // The KV pool has 13 pages left: 120 tokens need 15.
       R"({"op":"step","kv":{"segments":[{"rid":"b","span":120}]},"recurrent":{"segments":[{"rid":"b","span":120}]}})"});
  ASSERT_EQ(out.size(), 4u);
  const json kv_before = out[1].at("kv");
  const json rec_before = out[1].at("recurrent").at("free_slots");
  for (std::size_t i : {2u, 3u}) {
    EXPECT_FALSE(out[i].at("ok").get<bool>());
    EXPECT_EQ(out[i].at("kv"), kv_before);
    EXPECT_EQ(out[i].at("recurrent").at("free_slots"), rec_before);
    EXPECT_EQ(out[i].at("recurrent").at("streams").size(), 1u);
  }
  EXPECT_NE(out[2].at("reason").get<std::string>().find("recurrent refused"), std::string::npos);
  EXPECT_NE(out[3].at("reason").get<std::string>().find("kv refused"), std::string::npos);
}

TEST(mstar_tool_sim, reads_a_delta_net_geometry_and_rejects_a_bad_one) {
  int rc = 0;
  const auto out = run_sim(
      {R"({"config":{"recurrent":{"num_layers":1,"max_slots":3,"geometry":{"family":"delta_net","num_k_heads":2,"num_v_heads":4,"head_k_dim":16,"head_v_dim":16,"conv_kernel_size":4}}}})",
       R"({"op":"step","recurrent":{"segments":[{"rid":"a","span":3}]}})"},
      &rc);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out[1].at("recurrent").at("streams").at("a/main").at("slot"), 1);
  const auto bad =
      run_sim({R"({"config":{"recurrent":{"num_layers":1,"geometry":{"family":"rwkv"}}}})"}, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(bad.at(0).at("error").get<std::string>().find("family"), std::string::npos);
}

}  // namespace
}  // namespace mstar
