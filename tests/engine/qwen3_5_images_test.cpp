// Images through the local engine into Qwen3.5 (tests/fixtures/make_qwen3_5.py's
// image prompts): greedy tokens and logits as transformers' generate with
// pixel_values and image_grid_thw, alone and batched with text; page keys
// cover the images (the same image reuses cached pages without rerunning the
// vision tower, a different one never does); refusals name what is wrong.
#include <algorithm>
#include <gtest/gtest.h>

#include "models/qwen3_5.hpp"
#include "tests/engine/image_cases.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::engine {
namespace {

using test::image_case;
using test::load_image_cases;

// Max |logit - transformers| over the case's steps (tokens checked first).
float check(const image_case& c, const completion& got, std::int64_t vocab) {
  EXPECT_EQ(got.tokens[0], c.generated);
  EXPECT_EQ(got.logits[0].size(), c.generated.size());
  for (const auto& row : got.logits[0])
    EXPECT_EQ(row.size(), static_cast<std::size_t>(vocab));
  return test::max_logit_gap(c, got.logits[0]);
}

constexpr float tolerance = 5e-4F;  // as the text prompts of this fixture (parity_test.cpp)

TEST(qwen3_5_images, one_and_two_image_prompts_match_transformers_alone_and_batched) {
  const auto cases = load_image_cases();
  ASSERT_EQ(cases.size(), 2U);
  engine_config config;
  config.pools.page_size = 4;
  auto engine = test::fixture_engine("qwen3_5_tiny", config);
  ASSERT_NE(engine, nullptr);
  float worst = 0;
  for (const auto& c : cases) {
    auto got = run_to_completion(*engine, {c.request});
    ASSERT_TRUE(got.has_value()) << got.error().message();
    worst = std::max(worst, check(c, got->front(), engine->model().vocab_size()));
  }
  // Both image prompts and a text prompt in one batch.
  auto text = test::greedy_request({40, 41, 42, 43, 44}, 4);
  text.cache_salt = "other";
  auto batch = run_to_completion(*engine, {cases[0].request, text, cases[1].request});
  ASSERT_TRUE(batch.has_value()) << batch.error().message();
  worst = std::max(worst, check(cases[0], (*batch)[0], engine->model().vocab_size()));
  worst = std::max(worst, check(cases[1], (*batch)[2], engine->model().vocab_size()));
  EXPECT_LT(worst, tolerance);
  std::printf("max |logit - transformers| over the image prompts: %.3g\n",
              static_cast<double>(worst));
  test::expect_pools_empty(*engine);
}

TEST(qwen3_5_images, the_same_image_reuses_pages_and_a_different_one_never_does) {
  const auto cases = load_image_cases();
  engine_config config;
  config.pools.page_size = 4;
  auto engine = test::fixture_engine("qwen3_5_tiny", config);
  ASSERT_NE(engine, nullptr);
  auto& model = dynamic_cast<models::qwen3_5_model&>(engine->model());
  const auto& c = cases[0];
  auto first = run_to_completion(*engine, {c.request});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->front().counts.cached_tokens, 0);
  EXPECT_EQ(model.images_encoded(), 1);
  auto again = run_to_completion(*engine, {c.request});
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(again->front().counts.cached_tokens, 0) << "the same image in the same place";
  EXPECT_EQ(model.images_encoded(), 1) << "the cached image is not encoded again";
  EXPECT_LT(check(c, again->front(), model.vocab_size()), tolerance);

  auto other = c.request;
  for (auto& v : other.images[0].pixel_values)
    v = -v;
  auto changed = run_to_completion(*engine, {other});
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->front().counts.cached_tokens, 0) << "a different image shares no pages";
  EXPECT_EQ(model.images_encoded(), 2);
  EXPECT_NE(changed->front().logits[0][0], again->front().logits[0][0]);
  test::expect_pools_empty(*engine);
}

TEST(qwen3_5_images, one_placeholder_per_image_is_expanded_to_the_images_token_count) {
  const auto cases = load_image_cases();
  auto engine = test::fixture_engine("qwen3_5_tiny");
  ASSERT_NE(engine, nullptr);
  const auto& c = cases[1];  // two images: 6 and 2 tokens
  auto single = c.request;
  std::vector<token_id> prompt;
  for (std::size_t i = 0; i < single.prompt.size(); ++i) {
    const bool repeat = i > 0 && single.prompt[i] == 300 && single.prompt[i - 1] == 300;
    if (!repeat)
      prompt.push_back(single.prompt[i]);
  }
  ASSERT_EQ(prompt.size() + 6, c.request.prompt.size());
  single.prompt = prompt;
  auto got = run_to_completion(*engine, {single});
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(got->front().counts.prompt_tokens, static_cast<std::int64_t>(c.request.prompt.size()));
  EXPECT_LT(check(c, got->front(), engine->model().vocab_size()), tolerance);
}

TEST(qwen3_5_images, refuses_images_that_do_not_fit_the_prompt_naming_the_problem) {
  const auto cases = load_image_cases();
  auto engine = test::fixture_engine("qwen3_5_tiny");
  ASSERT_NE(engine, nullptr);
  auto missing = cases[1].request;
  missing.images.pop_back();
  auto r = engine->submit(missing);
  ASSERT_FALSE(r);
  EXPECT_TRUE(test::contains(r.error().message(), "2 image placeholder run(s)"));
  auto short_run = cases[0].request;  // grid (1, 4, 4): 4 tokens; the prompt keeps 2
  const auto first = std::find(short_run.prompt.begin(), short_run.prompt.end(), 300);
  short_run.prompt.erase(first, first + 2);
  r = engine->submit(short_run);
  ASSERT_FALSE(r);
  EXPECT_TRUE(test::contains(r.error().message(),
                             "2 placeholder tokens in the prompt, its grid (1, 4, 4) makes 4"));
  auto odd = cases[0].request;
  odd.images[0].pixel_values.pop_back();
  r = engine->submit(odd);
  ASSERT_FALSE(r);
  EXPECT_TRUE(test::contains(r.error().message(), "pixel values"));

  auto text_only = test::fixture_engine("qwen3_5_tiny_text");
  ASSERT_NE(text_only, nullptr);
  r = text_only->submit(cases[0].request);
  ASSERT_FALSE(r);
  EXPECT_TRUE(test::contains(r.error().message(), "no vision tower"));
  auto nemotron = test::fixture_engine("nemotron_h_tiny_hybrid");
  ASSERT_NE(nemotron, nullptr);
  r = nemotron->submit(cases[0].request);
  ASSERT_FALSE(r);
  EXPECT_TRUE(test::contains(r.error().message(), "takes no images"));
}

TEST(qwen3_5_model, refuses_windowed_generation_whose_positions_would_be_lost) {
  auto engine = test::fixture_engine("qwen3_5_tiny_text");
  ASSERT_NE(engine, nullptr);
  auto r = test::greedy_request({40, 41, 42}, 40);
  r.window = window_params{2, 1, 1, 8};
  auto id = engine->submit(r);
  ASSERT_FALSE(id);
  EXPECT_TRUE(test::contains(id.error().message(), "windowed generation is not supported"));
}

}  // namespace
}  // namespace mstar::engine
