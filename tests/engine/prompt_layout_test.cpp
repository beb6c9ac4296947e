// A prompt's layout with images (engine/prompt_layout.hpp) against the
// reference's keying (kv-keys-windowing §1.4-§1.10), computed here from the
// rules: ids pages with the image's slots skipped, the image an item on each
// page it touches, its digest fingerprint(content, "image", preprocess,
// advance). A trusted front end's rows for the same prompt key it the same.
#include "engine/prompt_layout.hpp"

#include <gtest/gtest.h>

#include "engine/preprocess.hpp"
#include "models/qwen3_5.hpp"
#include "resources/kv/generation.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/engine/front_end_wire.hpp"

namespace mstar::engine {
namespace {

using resources::digest256;
using resources::page_item;

constexpr token_id image_token = 300;  // the fixture's image_token_id

// Grid (1, 4, 4): 16 patches of 96 values, 4 merged tokens, advance 2.
models::image_input image_a(float scale = 1.0F) {
  models::image_input im;
  im.t = 1;
  im.h = 4;
  im.w = 4;
  for (int i = 0; i < 16 * 96; ++i)
    im.pixel_values.push_back(scale * static_cast<float>((i * 37) % 101) / 50.0F - 1.0F);
  return im;
}

// "Look: " <vision_start> image (4 slots) <vision_end> then `after`.
std::vector<token_id> prompt_with(std::vector<token_id> after) {
  std::vector<token_id> p = {79,  114,         114,         110,         61,          35,
                             302, image_token, image_token, image_token, image_token, 303};
  p.insert(p.end(), after.begin(), after.end());
  return p;
}

std::unique_ptr<models::causal_lm> tiny_model() {
  auto model = models::load_causal_lm(test::model_dir("qwen3_5_tiny"));
  EXPECT_TRUE(model.has_value()) << model.error().message();
  return model ? std::move(*model) : nullptr;
}

// The image's digest by the reference's recipe, written out here.
std::vector<std::uint8_t> reference_digest(const models::image_input& im,
                                           const std::string& preprocess) {
  const resources::byte_view pixels{reinterpret_cast<const std::uint8_t*>(im.pixel_values.data()),
                                    im.pixel_values.size() * 4};
  const auto content =
      resources::fingerprint(std::string_view{"mstar-image-patches/1"}, std::string_view{"1"},
                             std::string_view{"4"}, std::string_view{"4"}, pixels);
  const auto d =
      resources::fingerprint(content, std::string_view{"image"}, preprocess, std::string_view{"2"});
  return {d.begin(), d.end()};
}

TEST(prompt_layout, the_keys_of_an_image_prompt_are_chain_over_its_reference_layout) {
  auto model = tiny_model();
  ASSERT_NE(model, nullptr);
  const auto prompt = prompt_with({35, 90, 107, 100, 119, 35, 108, 118, 35, 108, 119, 66});
  const std::vector<models::image_input> images = {image_a()};
  const auto spans = model->image_spans(prompt, images);
  ASSERT_EQ(spans.size(), 1U);
  EXPECT_EQ(spans[0].start, 7);
  EXPECT_EQ(spans[0].length, 4);
  EXPECT_EQ(spans[0].advance, 2);
  ASSERT_FALSE(model->preprocess_fingerprint().empty());

  auto layout = layout_prompt(*model, prompt, prompt, images);
  ASSERT_TRUE(layout.has_value()) << layout.error().message();
  const auto seed = page_keys(layout->spans, 4).value();

  // Slots 0-6 text, 7-10 the image, 11-23 text; page size 4.
  const auto d = reference_digest(images[0], model->preprocess_fingerprint());
  const std::vector<std::vector<token_id>> pages = {{prompt.begin(), prompt.begin() + 4},
                                                    {prompt.begin() + 4, prompt.begin() + 7},
                                                    {prompt[11]},
                                                    {prompt.begin() + 12, prompt.begin() + 16},
                                                    {prompt.begin() + 16, prompt.begin() + 20},
                                                    {prompt.begin() + 20, prompt.end()}};
  const resources::items_by_page items = {{1, {page_item{3, 0, 4, d}}},
                                          {2, {page_item{0, 1, 4, d}}}};
  EXPECT_EQ(seed.keys, resources::chain(pages, items).value());
  EXPECT_TRUE(seed.tail.empty());
  EXPECT_TRUE(seed.tail_items.empty());
  EXPECT_EQ(seed.slots, 24U);
  EXPECT_TRUE(seed.root.empty()) << "unsalted keys stay unrooted, as the reference sends them";

  // Text-only pages wholly before the image key as a text prompt's do.
  const std::vector<token_id> text(prompt.begin(), prompt.begin() + 6);
  EXPECT_EQ(page_keys(text, 4).value().keys[0], seed.keys[0]);
  // Another image, or the same image one slot later, changes page 1 on.
  const std::vector<models::image_input> other = {image_a(-1.0F)};
  const auto changed = page_keys(layout_prompt(*model, prompt, prompt, other)->spans, 4).value();
  EXPECT_EQ(changed.keys[0], seed.keys[0]);
  EXPECT_NE(changed.keys[1], seed.keys[1]);
  auto moved_prompt = prompt;
  moved_prompt.insert(moved_prompt.begin() + 6, 35);
  const auto moved =
      page_keys(layout_prompt(*model, moved_prompt, moved_prompt, images)->spans, 4).value();
  EXPECT_EQ(moved.keys[0], seed.keys[0]);
  EXPECT_NE(moved.keys[1], seed.keys[1]);
  // A salt roots the chain, images or not.
  EXPECT_NE(page_keys(layout->spans, 4, "tenant").value().keys[0], seed.keys[0]);
}

TEST(prompt_layout, generated_ids_fill_the_page_an_image_ends_in_with_its_item) {
  auto model = tiny_model();
  ASSERT_NE(model, nullptr);
  // 11 slots ending with the image: page 2 holds its last three slots.
  auto prompt = prompt_with({});
  prompt.pop_back();
  const std::vector<models::image_input> images = {image_a()};
  const auto seed =
      page_keys(layout_prompt(*model, prompt, prompt, images).value().spans, 4).value();
  const auto d = reference_digest(images[0], model->preprocess_fingerprint());
  EXPECT_EQ(seed.tail_items, (std::vector<page_item>{{0, 1, 4, d}}));
  EXPECT_TRUE(seed.tail.empty());

  auto chain = resources::start_page_chain(seed, 4).value();
  const std::vector<token_id> generated = {303, 35, 90, 107, 100};
  ASSERT_EQ(resources::extend_page_chain(chain, generated, 4).value(), 2);
  const std::vector<std::vector<token_id>> pages = {{prompt.begin(), prompt.begin() + 4},
                                                    {prompt.begin() + 4, prompt.begin() + 7},
                                                    {303},
                                                    {35, 90, 107, 100}};
  const resources::items_by_page items = {{1, {page_item{3, 0, 4, d}}},
                                          {2, {page_item{0, 1, 4, d}}}};
  const auto expected = resources::chain(pages, items).value();
  ASSERT_EQ(chain.keyed_pages, 4);
  EXPECT_EQ(std::vector<digest256>(chain.keys.begin(), chain.keys.begin() + 4), expected);
}

using test::wire_of;

TEST(prompt_layout, a_front_ends_rows_with_digests_key_the_prompt_as_the_engine_does) {
  auto model = tiny_model();
  ASSERT_NE(model, nullptr);
  const std::vector<models::image_input> images = {image_a()};
  for (const auto& prompt : {prompt_with({35, 90}), prompt_with({35, 90, 107, 100, 119, 35})}) {
    const auto layout = layout_prompt(*model, prompt, prompt, images).value();
    const auto own = page_keys(layout.spans, 4).value();
    const auto wire = wire_of(layout, 4);
    ASSERT_EQ(wire.layout.size(), 3U);
    EXPECT_FALSE(wire.layout[1].digest.empty());
    const auto seed = seed_from_wire(wire, prompt, 4);
    ASSERT_TRUE(seed.has_value()) << seed.error().message();
    EXPECT_EQ(seed->keys, own.keys);
    EXPECT_EQ(seed->tail, own.tail);
    EXPECT_EQ(seed->tail_items, own.tail_items);
    EXPECT_EQ(seed->slots, own.slots);
  }
  // Rows that leave the image's slots out, or a tail that is not the ids on
  // the last partial page, are refused naming the field.
  const auto prompt = prompt_with({35, 90});
  const auto layout = layout_prompt(*model, prompt, prompt, images).value();
  auto w = wire_of(layout, 4);
  w.layout.erase(w.layout.begin() + 1);
  auto bad = seed_from_wire(w, prompt, 4);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("prefix_layout"), std::string::npos);
  w = wire_of(layout, 4);
  w.tail = {35, 91};
  bad = seed_from_wire(w, prompt, 4);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("prefix_tail"), std::string::npos);
}

TEST(prompt_layout, the_engine_reuses_a_front_ends_image_keys_like_its_own) {
  engine_config config;
  config.pools.page_size = 4;
  auto e = test::fixture_engine("qwen3_5_tiny", config);
  ASSERT_NE(e, nullptr);
  const auto prompt = prompt_with({35, 90, 107, 100, 119, 35, 108, 118, 35, 108, 119, 66});
  auto plain = test::greedy_request(prompt, 3);
  plain.images = {image_a()};
  auto keyed = plain;
  keyed.prefix = wire_of(layout_prompt(e->model(), prompt, prompt, plain.images).value(), 4);
  auto first = run_to_completion(*e, {keyed});
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(first->front().counts.cached_tokens, 0);
  auto own = run_to_completion(*e, {plain});
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->front().counts.cached_tokens, 20)
      << "the engine's keys find the front end's pages";
  EXPECT_EQ(own->front().tokens, first->front().tokens);
  test::expect_pools_empty(*e);
}

TEST(prompt_layout, refuses_spans_that_do_not_fit_the_tokens) {
  const auto prompt = prompt_with({35});
  const std::vector<models::image_input> images = {image_a()};
  const std::vector<models::image_span> past = {{10, 4, 2}};
  auto r = layout_prompt(prompt, past, images, "p");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("runs past the 13 tokens"), std::string::npos)
      << r.error().message();
  const std::vector<models::image_span> two = {{7, 4, 2}, {8, 1, 1}};
  EXPECT_FALSE(layout_prompt(prompt, two, images, "p").has_value());
  const std::vector<models::image_input> none;
  EXPECT_TRUE(layout_prompt(prompt, {}, none, "p").value().spans.size() == 1);
}

}  // namespace
}  // namespace mstar::engine
