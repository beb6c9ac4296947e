// The C++ Nemotron-H against transformers: the committed fixtures hold the
// reference's greedy tokens and logits (tests/fixtures/make_nemotron_h.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "models/generator.hpp"
#include "models/safetensors.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::models {
namespace {

using nlohmann::json;

constexpr float logits_tolerance = 1e-4F;  // max |diff| per logit; seen: ~1.2e-5

using test::fixture_prompt;
using test::load_expected;
using test::model_dir;

float max_diff(std::span<const float> a, std::span<const float> b) {
  float m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

void expect_matches(const std::vector<fixture_prompt>& expected,
                    const std::vector<generation_result>& got, std::int64_t vocab) {
  ASSERT_EQ(got.size(), expected.size());
  float worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "prompt " << i);
    EXPECT_EQ(got[i].generated_ids, expected[i].generated);
    ASSERT_EQ(got[i].step_logits.size(), expected[i].generated.size());
    for (std::size_t s = 0; s < got[i].step_logits.size(); ++s) {
      const std::span<const float> ref{expected[i].step_logits.data() + s * vocab,
                                       static_cast<std::size_t>(vocab)};
      const float diff = max_diff(got[i].step_logits[s], ref);
      worst = std::max(worst, diff);
      EXPECT_LT(diff, logits_tolerance) << "step " << s;
    }
  }
  std::printf("max |logit - transformers| over %zu prompts: %.3g\n", expected.size(),
              static_cast<double>(worst));
}

std::vector<generation_request> greedy(const std::vector<fixture_prompt>& expected) {
  std::vector<generation_request> out;
  for (const auto& e : expected) {
    generation_request r;
    r.prompt = e.prompt;
    r.max_tokens = static_cast<std::int32_t>(e.generated.size());
    r.stop_at_eos = false;
    out.push_back(r);
  }
  return out;
}

class nemotron_h_parity : public ::testing::TestWithParam<std::string> {};

TEST_P(nemotron_h_parity, matches_transformers_in_one_batch) {
  const auto expected = load_expected(GetParam());
  auto model = nemotron_h_model::load(model_dir(GetParam()));
  ASSERT_TRUE(model.has_value()) << model.error().message();
  auto got = generate(**model, greedy(expected), /*keep_logits=*/true);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  expect_matches(expected, *got, (*model)->config().vocab_size);
}

TEST_P(nemotron_h_parity, matches_transformers_one_prompt_at_a_time) {
  const auto expected = load_expected(GetParam());
  auto model = nemotron_h_model::load(model_dir(GetParam()));
  ASSERT_TRUE(model.has_value()) << model.error().message();
  std::vector<generation_result> all;
  for (const auto& req : greedy(expected)) {
    auto got = generate(**model, std::span{&req, 1}, true);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    all.push_back(std::move(got->front()));
  }
  expect_matches(expected, all, (*model)->config().vocab_size);
}

INSTANTIATE_TEST_SUITE_P(tiny, nemotron_h_parity,
                         ::testing::Values("nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn"));

TEST(nemotron_h_prefix_reuse, an_attention_only_model_reuses_pages_and_matches_transformers) {
  const auto expected = load_expected("nemotron_h_tiny_attn");
  pool_options pools;
  pools.page_size = 4;
  auto model = nemotron_h_model::load(model_dir("nemotron_h_tiny_attn"), pools);
  ASSERT_TRUE(model.has_value()) << model.error().message();
  ASSERT_TRUE((*model)->prefix_skip_safe());
  const auto requests = greedy(expected);
  auto first = generate(**model, requests, true);
  ASSERT_TRUE(first.has_value());
  auto second = generate(**model, requests, true);  // the same prompts: served from cache
  ASSERT_TRUE(second.has_value());
  std::int64_t matched = 0;
  for (const auto& r : *second) matched += r.matched_tokens;
  EXPECT_GT(matched, 0);
  expect_matches(expected, *first, (*model)->config().vocab_size);
  expect_matches(expected, *second, (*model)->config().vocab_size);
}

TEST(nemotron_h_prefix_reuse, a_hybrid_model_runs_without_reuse) {
  auto model = nemotron_h_model::load(model_dir("nemotron_h_tiny_hybrid"));
  ASSERT_TRUE(model.has_value());
  EXPECT_FALSE((*model)->prefix_skip_safe());
  EXPECT_FALSE((*model)->kv()->prefix_cache_open());
}

TEST(nemotron_h_model, refuses_a_missing_folder_naming_it) {
  auto model = nemotron_h_model::load("/nonexistent/model");
  ASSERT_FALSE(model.has_value());
  EXPECT_NE(model.error().message().find("/nonexistent/model"), std::string::npos);
}

}  // namespace
}  // namespace mstar::models
