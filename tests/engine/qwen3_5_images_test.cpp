// Images through the local engine into Qwen3.5 (tests/fixtures/make_qwen3_5.py's
// image prompts): greedy tokens and logits as transformers' generate with
// pixel_values and image_grid_thw, alone and batched with text; page keys
// cover the images (the same image reuses cached pages without rerunning the
// vision tower, a different one never reuses the pages it touches, text
// before an image is shared, a cache ending inside an image still serves,
// an image's end key serves the head of the page it ends in under other
// text);
// refusals name what is wrong.
#include <algorithm>
#include <gtest/gtest.h>

#include "engine/prompt_layout.hpp"
#include "models/qwen3_5.hpp"
#include "tests/engine/front_end_wire.hpp"
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

constexpr float image_tolerance = 5e-4F;  // as the text prompts of this fixture (parity_test.cpp)

TEST(qwen3_5_images, one_and_two_image_prompts_match_transformers_alone_and_batched) {
  auto cases = load_image_cases();
  cases.resize(2);  // the others are variations on these for the page-key tests below
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
  EXPECT_LT(worst, image_tolerance);
  std::printf("max |logit - transformers| over the image prompts: %.3g\n",
              static_cast<double>(worst));
  test::expect_pools_empty(*engine);
}

// The fixture's image prompts: 0 "Look: " + image A (slots 7-10 at page size
// 4: pages 1 and 2) + " What is it?"; 1 two images; 2 image A after "Look
// again: " (slots 13-16); 3 another image in A's place; 4 prompt 0 cut after
// image A's vision_end (12 slots, page-aligned).
enum : std::size_t { look_a = 0, two_images = 1, a_elsewhere = 2, look_b = 3, ends_after_a = 4 };

class qwen3_5_image_keys : public ::testing::Test {
 protected:
  void SetUp() override {
    cases_ = load_image_cases();
    ASSERT_EQ(cases_.size(), 5U);
    engine_config config;
    config.pools.page_size = 4;
    engine_ = test::fixture_engine("qwen3_5_tiny", config);
    ASSERT_NE(engine_, nullptr);
    model_ = &dynamic_cast<models::qwen3_5_model&>(engine_->model());
  }
  void TearDown() override {
    if (engine_)
      test::expect_pools_empty(*engine_);
    std::printf("max |logit - transformers| over this test's fixture cases: %.3g\n",
                static_cast<double>(worst_));
  }

  // Runs `r` alone; its completion.
  completion run(const request_spec& r) {
    auto got = run_to_completion(*engine_, {r});
    EXPECT_TRUE(got.has_value()) << got.error().message();
    return got ? got->front() : completion{};
  }
  // Runs fixture case `i` and checks it against transformers; its cached tokens.
  std::int64_t run_case(std::size_t i) {
    const auto got = run(cases_[i].request);
    if (got.tokens.empty())
      return -1;
    const float worst = check(cases_[i], got, model_->vocab_size());
    EXPECT_LT(worst, image_tolerance) << "case " << i;
    worst_ = std::max(worst_, worst);
    return got.counts.cached_tokens;
  }

  std::vector<image_case> cases_;
  std::unique_ptr<local_engine> engine_;
  models::qwen3_5_model* model_ = nullptr;
  float worst_ = 0;
};

TEST_F(qwen3_5_image_keys, the_same_image_in_the_same_place_reuses_pages_without_encoding_again) {
  EXPECT_EQ(run_case(look_a), 0);
  EXPECT_EQ(model_->images_encoded(), 1);
  // 24 slots: six keys, five matched (one short); the image ends at slot 11.
  EXPECT_EQ(run_case(look_a), 20) << "the same image in the same place";
  EXPECT_EQ(model_->images_encoded(), 1) << "the cached image is not encoded again";
  // Two images (slots 2-7 and 16-17): 20 slots, four keys matched, and the
  // second image ends at slot 18, inside page 4: its end key serves that
  // page's head too, so neither image is encoded again.
  EXPECT_EQ(run_case(two_images), 0);
  EXPECT_EQ(model_->images_encoded(), 3);
  EXPECT_EQ(run_case(two_images), 18);
  EXPECT_EQ(model_->images_encoded(), 3);
}

TEST_F(qwen3_5_image_keys, a_different_image_never_reuses_a_page_at_or_after_its_start) {
  EXPECT_EQ(run_case(look_a), 0);
  // Image B's run starts at slot 7, on page 1: page 0 is the text before it.
  EXPECT_EQ(run_case(look_b), 4);
  EXPECT_EQ(model_->images_encoded(), 2);
  // Image A's pixels negated (no transformers reference: checked against
  // image A's output only to differ).
  auto negated = cases_[look_a].request;
  for (auto& v : negated.images[0].pixel_values)
    v = -v;
  const auto got = run(negated);
  EXPECT_EQ(got.counts.cached_tokens, 4) << "a different image shares no page it touches";
  EXPECT_EQ(model_->images_encoded(), 3);
  ASSERT_FALSE(got.logits.empty() || got.logits[0].empty());
  const auto& a = cases_[look_a].step_logits;
  const std::vector<float> a_first(a.begin(), a.begin() + model_->vocab_size());
  EXPECT_NE(got.logits[0][0], a_first);
}

TEST_F(qwen3_5_image_keys, the_same_image_elsewhere_reuses_only_the_text_they_share) {
  EXPECT_EQ(run_case(look_a), 0);
  // "Look again: " shares "Look" (page 0); image A then sits at slots 13-16.
  EXPECT_EQ(run_case(a_elsewhere), 4);
  EXPECT_EQ(model_->images_encoded(), 2);
}

TEST_F(qwen3_5_image_keys, text_before_an_image_is_shared_with_a_text_only_prompt) {
  // "Look: " then other text: page 0 ("Look") is the image prompt's page 0;
  // page 1 holds image A's vision_start and first slot in the image prompt.
  std::vector<token_id> text(cases_[look_a].request.prompt.begin(),
                             cases_[look_a].request.prompt.begin() + 6);
  for (const token_id t : {90, 107, 100, 119, 35})
    text.push_back(t);
  auto plain = test::greedy_request(text, 4, true);
  const auto alone = run(plain);
  ASSERT_FALSE(alone.logits.empty());
  EXPECT_EQ(alone.counts.cached_tokens, 0);
  EXPECT_EQ(run_case(look_a), 4) << "the text-only prompt's page 0 serves the image prompt";
  // The other way round on a fresh engine: the image prompt's page 0 serves
  // the text-only prompt, with the same tokens and (within the cached against
  // uncached drift) logits.
  engine_config config;
  config.pools.page_size = 4;
  auto fresh = test::fixture_engine("qwen3_5_tiny", config);
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(run_to_completion(*fresh, {cases_[look_a].request}).has_value());
  auto served = run_to_completion(*fresh, {plain});
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->front().counts.cached_tokens, 4);
  EXPECT_EQ(served->front().tokens[0], alone.tokens[0]);
  ASSERT_EQ(served->front().logits[0].size(), alone.logits[0].size());
  float drift = 0;
  for (std::size_t s = 0; s < alone.logits[0].size(); ++s) {
    for (std::size_t v = 0; v < alone.logits[0][s].size(); ++v)
      drift = std::max(drift, std::abs(alone.logits[0][s][v] - served->front().logits[0][s][v]));
  }
  EXPECT_LT(drift, image_tolerance);
  std::printf("text-only prompt, page 0 cached against not: max |logit diff| %.3g\n",
              static_cast<double>(drift));
  test::expect_pools_empty(*fresh);
}

TEST_F(qwen3_5_image_keys, a_cache_that_ends_inside_an_image_encodes_it_for_the_rest) {
  // Prompt 0 keyed by a front end that sends no end keys: its pages are
  // cached, the head of the page image A ends in is not.
  auto keyed = cases_[look_a].request;
  keyed.prefix =
      test::wire_of(layout_prompt(*model_, keyed.prompt, keyed.prompt, keyed.images).value(), 4);
  for (auto& row : keyed.prefix->layout)
    row.end_key.clear();
  const auto first = run(keyed);
  EXPECT_EQ(first.tokens, std::vector<std::vector<token_id>>{cases_[look_a].generated});
  // Three keys, two matched: the cache ends at slot 8, inside image A
  // (slots 7-10); the tower encodes the image once and the step feeds its
  // rows 1-3.
  EXPECT_EQ(run_case(ends_after_a), 8);
  EXPECT_EQ(model_->images_encoded(), 2);
  // Prompt 0 keyed by the engine left the end key: slots 0-10 now serve.
  EXPECT_EQ(run_case(look_a), 20);
  EXPECT_EQ(run_case(ends_after_a), 11);
  EXPECT_EQ(model_->images_encoded(), 2);
}

// End keys (reference §1.7) at page size 8: image A (slots 7-10) ends inside
// page 1 (slots 8-15), whose key also names the text after the image. A
// prompt with the same text and image and other text after finds page 0 by
// its key and the head of page 1 (slots 8-10) by the image's end key:
// reuse reaches the image's end, the image is not encoded again, and the
// logits are those of the same prompt run without any cache.
TEST(qwen3_5_images, an_end_key_reuses_the_image_end_page_under_other_text) {
  const auto cases = load_image_cases();
  const auto& a = cases[look_a].request;
  auto other = a;
  other.prompt.resize(12);  // "Look: " <vision_start> A <vision_end>
  for (const token_id t : {35, 72, 111, 122, 35, 100, 111, 35, 118, 111, 119, 63})
    other.prompt.push_back(t);
  engine_config config;
  config.pools.page_size = 8;
  auto cold = test::fixture_engine("qwen3_5_tiny", config);
  auto warm = test::fixture_engine("qwen3_5_tiny", config);
  ASSERT_NE(cold, nullptr);
  ASSERT_NE(warm, nullptr);
  auto alone = run_to_completion(*cold, {other});
  ASSERT_TRUE(alone.has_value()) << alone.error().message();
  EXPECT_EQ(alone->front().counts.cached_tokens, 0);

  auto first = run_to_completion(*warm, {a});
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(first->front().tokens[0], cases[look_a].generated);
  const auto cached_pages = warm->pools().stats().kv_cached_pages;
  auto served = run_to_completion(*warm, {other});
  ASSERT_TRUE(served.has_value()) << served.error().message();
  const auto& got = served->front();
  EXPECT_EQ(got.counts.cached_tokens, 11) << "page 0 by its key, slots 8-10 by the end key";
  auto* model = &dynamic_cast<models::qwen3_5_model&>(warm->model());
  EXPECT_EQ(model->images_encoded(), 1) << "the image is served whole from the cache";
  EXPECT_EQ(got.tokens, alone->front().tokens);
  ASSERT_EQ(got.logits[0].size(), alone->front().logits[0].size());
  float drift = 0;
  for (std::size_t s = 0; s < got.logits[0].size(); ++s) {
    for (std::size_t v = 0; v < got.logits[0][s].size(); ++v)
      drift = std::max(drift, std::abs(got.logits[0][s][v] - alone->front().logits[0][s][v]));
  }
  EXPECT_LT(drift, image_tolerance);
  std::printf(
      "end key reuse (11 slots cached) against no cache: max |logit diff| %.3g; %lld "
      "pages cached after the first prompt\n",
      static_cast<double>(drift), static_cast<long long>(cached_pages));
  // The first prompt again: its own whole pages, not the end key's copy.
  auto again = run_to_completion(*warm, {a});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->front().counts.cached_tokens, 16);
  EXPECT_EQ(again->front().tokens[0], cases[look_a].generated);
  test::expect_pools_empty(*warm);
  test::expect_pools_empty(*cold);
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
  EXPECT_LT(check(c, got->front(), engine->model().vocab_size()), image_tolerance);
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
