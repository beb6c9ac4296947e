// An image ending inside a page that the next prompt matches whole
// (reference §1.7, §3.6.7 "image ends"), through the local engine into
// Qwen3.5 (tests/fixtures/make_qwen3_5.py's image prompts). At page size 4
// image A (slots 7-10) ends at slot 11, inside page 2 (slots 8-11), and
// the vision_end at slot 11 is shared by a prompt with other text after
// it: the KV pool matches pages 0-2 by their keys (12 slots). With
// recurrent checkpoints every 8 slots the state at 12 is never taken; the
// state at the image's end (11) is. The pools agree on 11: the KV pool
// serves it from the head of its whole page 2, the recurrent pool from the
// image's end, and the output is that of the prompt run without a cache.
#include <algorithm>
#include <gtest/gtest.h>

#include "engine/prompt_layout.hpp"
#include "models/qwen3_5.hpp"
#include "resources/kv/layout.hpp"
#include "tests/engine/image_cases.hpp"

namespace mstar::engine {
namespace {

using test::load_image_cases;

constexpr float tolerance = 5e-4F;  // as tests/engine/qwen3_5_images_test.cpp

// Prompt 0 ("Look: " + image A + " What is it?") up to image A's
// vision_end (12 slots), then other text (24 slots in all).
request_spec other_text_after_a(const request_spec& a) {
  auto other = a;
  other.prompt.resize(12);
  for (const token_id t : {35, 72, 111, 122, 35, 100, 111, 35, 118, 111, 119, 63})
    other.prompt.push_back(t);
  return other;
}

engine_config stride_8(std::int64_t checkpoint_slots) {
  engine_config config;
  config.pools.page_size = 4;
  config.pools.checkpoint_stride = 8;
  config.pools.checkpoint_slots = checkpoint_slots;
  return config;
}

// Whether the recurrent pool holds the state after `slots` slots of `r`'s
// prompt (a stride boundary) or at its image's end.
bool checkpointed(local_engine& e, const request_spec& r, std::uint64_t slots) {
  auto& model = e.model();
  const auto layout = layout_prompt(model, r.prompt, r.prompt, r.images).value();
  const auto keyed = resources::key_prompt(layout.spans, 4).value();
  const auto* rec = e.pools().recurrent();
  for (const auto& end : keyed.ends) {
    if (end.slot == slots)
      return rec->has_checkpoint(end.key);
  }
  return slots % 4 == 0 && rec->has_checkpoint(keyed.keys.at(slots / 4 - 1));
}

// checkpoint_slots: 64 (the stride checkpoint at 8 is kept) or 3 (prompt
// 0's captures at 8, 11, 16 and 24 leave 11, 16 and 24).
class qwen3_5_image_end_in_matched_page : public testing::TestWithParam<std::int64_t> {};

TEST_P(qwen3_5_image_end_in_matched_page, reuses_up_to_the_image_end) {
  const auto cases = load_image_cases();
  ASSERT_FALSE(cases.empty());
  const auto& a = cases[0];
  const auto other = other_text_after_a(a.request);
  auto cold = test::fixture_engine("qwen3_5_tiny", stride_8(GetParam()));
  auto warm = test::fixture_engine("qwen3_5_tiny", stride_8(GetParam()));
  ASSERT_NE(cold, nullptr);
  ASSERT_NE(warm, nullptr);
  auto alone = run_to_completion(*cold, {other});
  ASSERT_TRUE(alone.has_value()) << alone.error().message();
  EXPECT_EQ(alone->front().counts.cached_tokens, 0);

  auto first = run_to_completion(*warm, {a.request});
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(first->front().tokens[0], a.generated);
  EXPECT_TRUE(checkpointed(*warm, other, 11)) << "the state at image A's end";
  EXPECT_FALSE(checkpointed(*warm, other, 12)) << "no stride boundary at 12";
  EXPECT_EQ(checkpointed(*warm, other, 8), GetParam() > 3) << "the stride boundary at 8";

  auto served = run_to_completion(*warm, {other});
  ASSERT_TRUE(served.has_value()) << served.error().message();
  const auto& got = served->front();
  EXPECT_EQ(got.counts.cached_tokens, 11)
      << "pages 0-1 by their keys, slots 8-10 from page 2's head, the state at the image's end";
  EXPECT_EQ(dynamic_cast<models::qwen3_5_model&>(warm->model()).images_encoded(), 1)
      << "the image is served whole from the cache";
  EXPECT_EQ(got.tokens, alone->front().tokens);
  ASSERT_EQ(got.logits[0].size(), alone->front().logits[0].size());
  float drift = 0;
  for (std::size_t s = 0; s < got.logits[0].size(); ++s) {
    for (std::size_t v = 0; v < got.logits[0][s].size(); ++v)
      drift = std::max(drift, std::abs(got.logits[0][s][v] - alone->front().logits[0][s][v]));
  }
  EXPECT_LT(drift, tolerance);
  std::printf("%lld checkpoint slots: %lld cached, max |logit diff| to no cache %.3g\n",
              static_cast<long long>(GetParam()), static_cast<long long>(got.counts.cached_tokens),
              static_cast<double>(drift));
  test::expect_pools_empty(*warm);
  test::expect_pools_empty(*cold);
}

INSTANTIATE_TEST_SUITE_P(checkpoint_slots, qwen3_5_image_end_in_matched_page,
                         testing::Values(64, 3));

}  // namespace
}  // namespace mstar::engine
