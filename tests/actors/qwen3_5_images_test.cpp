// Images through the actor runtime and a prefill / decode deployment into
// Qwen3.5 (tests/fixtures/make_qwen3_5.py's image prompts): greedy tokens
// and logits as transformers', alone and batched with text; one placeholder
// per image is expanded by the preprocess stage; a decode node that adopts
// the prefill node's pages decodes on without running the vision tower, and
// one that recomputes the prompt encodes the images itself; an image's end
// key serves a later prompt with other text after the image, through the
// actors and on a decode node the key moved to.
#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>
#include <thread>

#include "models/qwen3_5.hpp"
#include "tests/actors/handle_support.hpp"
#include "tests/actors/nodes_support.hpp"
#include "tests/engine/image_cases.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::actors {
namespace {

using engine::request_spec;
using test::expect_pools_empty;
using test::image_case;
using test::load_image_cases;
using test::read_all;
using test::tokens_of;

constexpr float tolerance = 5e-4F;  // as tests/engine/qwen3_5_images_test.cpp

std::unique_ptr<runtime> start_runtime(const std::string& name) {
  auto m = models::load_causal_lm(test::model_dir(name));
  EXPECT_TRUE(m.has_value()) << m.error().message();
  if (!m)
    return nullptr;
  engine::engine_config config;
  config.pools.page_size = 4;
  auto rt = runtime::start(std::move(*m), config);
  EXPECT_TRUE(rt.has_value()) << rt.error().message();
  return rt ? std::move(*rt) : nullptr;
}

const models::qwen3_5_model& qwen(const runtime& rt) {
  return dynamic_cast<const models::qwen3_5_model&>(rt.model());
}

// Tokens first, then the largest logit gap to transformers.
float check(const image_case& c, const engine::completion& got) {
  EXPECT_TRUE(got.errors.empty() || got.errors[0].empty()) << got.errors[0];
  EXPECT_EQ(got.tokens.at(0), c.generated);
  return test::max_logit_gap(c, got.logits.at(0));
}

// Each placeholder run of `r`'s prompt cut to one token.
request_spec one_placeholder_per_image(request_spec r) {
  std::vector<engine::token_id> prompt;
  for (std::size_t i = 0; i < r.prompt.size(); ++i) {
    if (i == 0 || r.prompt[i] != 300 || r.prompt[i - 1] != 300)
      prompt.push_back(r.prompt[i]);
  }
  r.prompt = std::move(prompt);
  return r;
}

// The fixture's first two image prompts (one image; two images): the others
// are tests/engine's page-key cases, the same image again or moved.
std::vector<image_case> first_two_cases() {
  auto cases = load_image_cases();
  EXPECT_GE(cases.size(), 2U);
  cases.erase(cases.begin() + std::min<std::ptrdiff_t>(2, std::ssize(cases)), cases.end());
  return cases;
}

TEST(runtime_images, image_prompts_give_transformers_tokens_alone_and_batched_with_text) {
  const auto cases = first_two_cases();
  ASSERT_EQ(cases.size(), 2U);
  auto rt = start_runtime("qwen3_5_tiny");
  ASSERT_NE(rt, nullptr);
  float worst = 0;
  for (const auto& c : cases) {
    const auto got = complete(*rt, {c.request});
    worst = std::max(worst, check(c, got.at(0)));
  }
  EXPECT_EQ(qwen(*rt).images_encoded(), 3);
  auto text = test::greedy_request({40, 41, 42, 43, 44}, 4);
  const auto text_alone = complete(*rt, {text}).at(0).tokens.at(0);
  // Another tenant's salt: nothing of the runs above is cached for the batch.
  auto a = cases[0].request, b = cases[1].request;
  a.cache_salt = b.cache_salt = text.cache_salt = "batch";
  const auto batch = complete(*rt, {a, text, b});
  worst = std::max(worst, check(cases[0], batch.at(0)));
  EXPECT_EQ(batch.at(1).tokens.at(0), text_alone);
  worst = std::max(worst, check(cases[1], batch.at(2)));
  EXPECT_EQ(qwen(*rt).images_encoded(), 6);
  EXPECT_LT(worst, tolerance);
  std::printf("runtime: max |logit - transformers| over the image prompts: %.3g\n",
              static_cast<double>(worst));
  expect_pools_empty(*rt);
}

TEST(runtime_images, the_preprocess_stage_expands_one_placeholder_per_image) {
  const auto cases = load_image_cases();
  auto rt = start_runtime("qwen3_5_tiny");
  ASSERT_NE(rt, nullptr);
  const auto& c = cases[1];  // two images: 6 and 2 tokens
  const auto single = one_placeholder_per_image(c.request);
  ASSERT_EQ(single.prompt.size() + 6, c.request.prompt.size());
  const auto got = complete(*rt, {single});
  EXPECT_LT(check(c, got.at(0)), tolerance);
  EXPECT_EQ(got.at(0).counts.prompt_tokens, static_cast<std::int64_t>(c.request.prompt.size()));
  EXPECT_EQ(qwen(*rt).images_encoded(), 2);
  // One image whose tokens all lie on cached pages the second time: its
  // prompt comes from the cache and the tower does not run again.
  const auto first = complete(*rt, {one_placeholder_per_image(cases[0].request)});
  EXPECT_EQ(first.at(0).tokens.at(0), cases[0].generated);
  EXPECT_EQ(qwen(*rt).images_encoded(), 3);
  const auto again = complete(*rt, {one_placeholder_per_image(cases[0].request)});
  EXPECT_EQ(again.at(0).tokens.at(0), cases[0].generated);
  EXPECT_GT(again.at(0).counts.cached_tokens, 0);
  EXPECT_EQ(qwen(*rt).images_encoded(), 3);
  expect_pools_empty(*rt);
}

TEST(runtime_images, images_that_do_not_fit_fail_the_request_naming_the_problem) {
  const auto cases = load_image_cases();
  auto rt = start_runtime("qwen3_5_tiny");
  ASSERT_NE(rt, nullptr);
  auto missing = cases[1].request;
  missing.images.pop_back();
  auto h = rt->submit(missing);
  auto ds = read_all(h);
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds.back().finished, engine::finish_reason::error);
  EXPECT_TRUE(test::contains(ds.back().error, "2 image placeholder run(s)")) << ds.back().error;

  auto text_only = start_runtime("qwen3_5_tiny_text");
  ASSERT_NE(text_only, nullptr);
  auto h2 = text_only->submit(cases[0].request);
  ds = read_all(h2);
  ASSERT_FALSE(ds.empty());
  EXPECT_TRUE(test::contains(ds.back().error, "no vision tower")) << ds.back().error;
  expect_pools_empty(*rt);
}

// The fixture's prompts: 0 "Look: " + image A (slots 7-10, vision_end at
// 11) + " What is it?"; 2 "Look again: " + image A (slots 13-16); 3 another
// image, B, in A's place (tests/engine/qwen3_5_images_test.cpp).
enum : std::size_t { look_a = 0, a_elsewhere = 2, look_b = 3 };

// At page size 8 image A ends at slot 11, inside page 1 (slots 8-15),
// whose key also names the text after the vision_end: only the end key
// serves slots 8-10 to a prompt with other text there.
constexpr std::int64_t end_key_page_size = 8;

engine::engine_config end_key_config() {
  engine::engine_config config;
  config.pools.page_size = end_key_page_size;
  return config;
}

// Prompt 0 up to image A's vision_end (12 slots), then other text.
request_spec other_text_after_a(const image_case& a) {
  auto other = a.request;
  other.prompt.resize(12);
  for (const engine::token_id t : {35, 72, 111, 122, 35, 100, 111, 35, 118, 111, 119, 63})
    other.prompt.push_back(t);
  other.keep_logits = false;
  return other;
}

// What `r` generates without any cache.
std::vector<engine::token_id> cold_tokens(const request_spec& r) {
  auto cold = test::fixture_engine("qwen3_5_tiny", end_key_config());
  EXPECT_NE(cold, nullptr);
  if (cold == nullptr)
    return {};
  auto alone = engine::run_to_completion(*cold, {r});
  EXPECT_TRUE(alone.has_value()) << alone.error().message();
  if (!alone)
    return {};
  EXPECT_EQ(alone->front().counts.cached_tokens, 0);
  return alone->front().tokens.at(0);
}

// End keys (reference §1.7) through the conductor and the pool actors:
// prompt 0 with other text after image A reuses page 0 by its key and
// slots 8-10 by the image's end key (the KV copy of page 1's head and the
// recurrent checkpoint there), exactly up to the image's end, without
// encoding it again. Image B in A's place reuses nothing (the 7 text slots
// before it fill no page); after "Look again: " (13 text slots) it reuses
// page 0 and nothing past the text.
TEST(runtime_images, an_end_key_reuses_exactly_up_to_the_image_end_through_the_actors) {
  const auto cases = load_image_cases();
  ASSERT_EQ(cases.size(), 5U);
  const auto other = other_text_after_a(cases[look_a]);
  auto b_elsewhere = cases[a_elsewhere].request;
  b_elsewhere.images = cases[look_b].request.images;
  b_elsewhere.keep_logits = false;
  const auto expected = cold_tokens(other);
  const auto expected_b = cold_tokens(b_elsewhere);
  auto rt = runtime::start(models::load_causal_lm(test::model_dir("qwen3_5_tiny")).value(),
                           end_key_config());
  ASSERT_TRUE(rt.has_value()) << rt.error().message();
  auto& r = **rt;
  const auto cached = [&](const request_spec& spec) {
    const auto got = complete(r, {spec}).at(0);
    EXPECT_TRUE(got.errors.empty() || got.errors[0].empty()) << got.errors[0];
    return std::pair{got.counts.cached_tokens, got.tokens.at(0)};
  };
  EXPECT_EQ(cached(cases[look_a].request), std::pair(std::int64_t{0}, cases[look_a].generated));
  EXPECT_EQ(cached(other), std::pair(std::int64_t{11}, expected))
      << "page 0 by its key, slots 8-10 by the end key";
  EXPECT_EQ(qwen(r).images_encoded(), 1) << "image A is served whole from the cache";
  EXPECT_EQ(cached(cases[look_b].request), std::pair(std::int64_t{0}, cases[look_b].generated));
  EXPECT_EQ(cached(cases[a_elsewhere].request),
            std::pair(std::int64_t{0}, cases[a_elsewhere].generated));
  EXPECT_EQ(cached(b_elsewhere), std::pair(std::int64_t{8}, expected_b))
      << "the whole page of text before image B";
  EXPECT_EQ(qwen(r).images_encoded(), 4);
  expect_pools_empty(r);
}

// At page size 4 image A ends inside page 2 (slots 8-11), which the prompt
// with other text after it matches whole (its vision_end at 11 is shared).
// With checkpoints every 8 slots, 3 of them (prompt 0's at 8, 11, 16 and 24
// leave 11, 16 and 24), the recurrent pool's deepest state is the image's
// end: the conductor's rounds agree on 11, the KV pool serving the head of
// its whole page 2 (tests/engine/qwen3_5_image_ends_test.cpp, locally).
TEST(runtime_images, an_image_end_inside_a_whole_matched_page_is_reused_through_the_actors) {
  const auto cases = load_image_cases();
  ASSERT_EQ(cases.size(), 5U);
  const auto other = other_text_after_a(cases[look_a]);
  engine::engine_config config;
  config.pools.page_size = 4;
  config.pools.checkpoint_stride = 8;
  config.pools.checkpoint_slots = 3;
  const auto expected = cold_tokens(other);
  auto rt = runtime::start(models::load_causal_lm(test::model_dir("qwen3_5_tiny")).value(), config);
  ASSERT_TRUE(rt.has_value()) << rt.error().message();
  auto& r = **rt;
  const auto first = complete(r, {cases[look_a].request}).at(0);
  EXPECT_EQ(first.tokens.at(0), cases[look_a].generated);
  const auto got = complete(r, {other}).at(0);
  EXPECT_TRUE(got.errors.empty() || got.errors[0].empty()) << got.errors[0];
  EXPECT_EQ(got.counts.cached_tokens, 11);
  EXPECT_EQ(got.tokens.at(0), expected);
  EXPECT_EQ(qwen(r).images_encoded(), 1) << "image A is served whole from the cache";
  expect_pools_empty(r);
}

// Prefill on one node, decode on another: with transfer agents the decode
// node adopts the prompt's pages and slot and never encodes an image (its
// M-RoPE positions continue from the prompt's grids); without, it
// recomputes the prompt, images included.
class pd_images : public testing::TestWithParam<bool> {};

// Waits (bounded: 2 s) until the prefill node (runtime 0) holds nothing but
// its cached pages and the sink: what it published was let go.
void await_prefill_release(test::nodes_fixture& f) {
  for (int i = 0; i < 100; ++i) {
    auto pre = f.rt(0).stats();
    ASSERT_TRUE(pre.has_value());
    if (pre->kv_free_pages + pre->kv_cached_pages == pre->kv_pages - 1 &&
        pre->free_slots == pre->slots - 1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST_P(pd_images, prefill_and_decode_nodes_give_transformers_tokens) {
  const bool transfer = GetParam();
  const auto cases = first_two_cases();
  ASSERT_EQ(cases.size(), 2U);
  test::nodes_fixture f{"qwen3_5_tiny"};
  engine::engine_config config;
  config.pools.page_size = 4;
  f.add("prefill-0", "prefill", config, transfer);
  f.add("decode-0", "decode", config, transfer);
  auto& d = f.dep();
  for (const auto& c : cases) {  // one at a time: each adopts
    auto spec = one_placeholder_per_image(c.request);
    spec.keep_logits = false;  // the prefill node's row is not relayed with logits
    auto h = d.submit(spec);
    const auto ds = read_all(h);
    EXPECT_EQ(tokens_of(ds), c.generated);
    ASSERT_FALSE(ds.empty());
    EXPECT_EQ(ds.back().finished, engine::finish_reason::length) << ds.back().error;
    EXPECT_EQ(ds.back().counts.prompt_tokens, static_cast<std::int64_t>(c.request.prompt.size()));
  }
  // Both at once, with a text request between them.
  const auto text = test::greedy_request({40, 41, 42, 43, 44}, 4);
  auto local = test::fixture_engine("qwen3_5_tiny");
  ASSERT_NE(local, nullptr);
  const auto text_alone = engine::run_to_completion(*local, {text});
  ASSERT_TRUE(text_alone.has_value());
  std::vector<request_handle> hs;
  for (const auto& c : cases) {
    auto spec = one_placeholder_per_image(c.request);
    spec.keep_logits = false;
    spec.cache_salt = "again";
    hs.push_back(d.submit(spec));
    if (hs.size() == 1)
      hs.push_back(d.submit(text));
  }
  EXPECT_EQ(tokens_of(read_all(hs[0])), cases[0].generated);
  EXPECT_EQ(tokens_of(read_all(hs[1])), text_alone->front().tokens.at(0));
  EXPECT_EQ(tokens_of(read_all(hs[2])), cases[1].generated);
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->handoffs, 5);
  EXPECT_EQ(s->adopted, transfer ? 5 : 0);
  EXPECT_EQ(qwen(f.rt(0)).images_encoded(), 6);
  EXPECT_EQ(qwen(f.rt(1)).images_encoded(), transfer ? 0 : 6);
  // The prefill node let go of what it published (the router said so).
  await_prefill_release(f);
  f.expect_pools_empty();
}

// The end key moves with the prompt (reference §1.7): the prefill node
// publishes the KV copy of the head of the page image A ends in and the
// recurrent checkpoint at its end with the prompt's pages and slot, the
// decode node indexes them, and a later prompt with image A and other text
// after it run on the decode node reuses exactly up to the image's end
// there, although that node never encoded the image.
TEST(pd_images_end_keys, the_end_key_arrives_on_the_decode_node) {
  const auto cases = load_image_cases();
  ASSERT_EQ(cases.size(), 5U);
  const auto other = other_text_after_a(cases[look_a]);
  const auto expected = cold_tokens(other);
  test::nodes_fixture f{"qwen3_5_tiny"};
  f.add("prefill-0", "prefill", end_key_config(), true);
  f.add("decode-0", "decode", end_key_config(), true);
  auto& d = f.dep();
  auto spec = one_placeholder_per_image(cases[look_a].request);
  spec.keep_logits = false;
  auto h = d.submit(spec);
  EXPECT_EQ(tokens_of(read_all(h)), cases[look_a].generated);
  auto n = d.node_stats();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->transfers.pulls, 1);
  EXPECT_EQ(n->transfers.failed, 0);
  // 24 prompt slots: 3 pages and the end copy; the slot and the checkpoint.
  EXPECT_EQ(n->transfers.pages_fetched, 4);
  EXPECT_EQ(n->transfers.slots_fetched, 2);
  EXPECT_EQ(qwen(f.rt(1)).images_encoded(), 0);

  // On the decode node itself (as a request re-routed or recomputed there
  // runs, or any prompt on a node of role "both").
  const auto served = complete(f.rt(1), {other}).at(0);
  EXPECT_EQ(served.counts.cached_tokens, 11) << "page 0 by its key, slots 8-10 by the end key";
  EXPECT_EQ(served.tokens.at(0), expected);
  EXPECT_EQ(qwen(f.rt(1)).images_encoded(), 0) << "image A is served whole from the moved cache";
  auto b = cases[look_b].request;
  b.keep_logits = false;
  const auto other_image = complete(f.rt(1), {b}).at(0);
  EXPECT_EQ(other_image.counts.cached_tokens, 0) << "image B in A's place: no page before it";
  EXPECT_EQ(other_image.tokens.at(0), cases[look_b].generated);
  EXPECT_EQ(qwen(f.rt(1)).images_encoded(), 1);
  // The prefill node let go of what it published, end copy and checkpoint
  // included (the router said so).
  await_prefill_release(f);
  f.expect_pools_empty();
}

INSTANTIATE_TEST_SUITE_P(transfer, pd_images, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) {
                           return p.param ? "adopted_over_ucx" : "recomputed";
                         });

}  // namespace
}  // namespace mstar::actors
