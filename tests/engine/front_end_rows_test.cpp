// A trusted front end's `prefix_layout` rows (engine/preprocess.hpp,
// `check_layout_rows`) checked against the prompt's image placeholder runs
// at submit: rows on the runs are taken and key the prompt as the engine
// keys it itself; an item row of the wrong length, an item row over text
// ids, an ids row over an image, rows that do not cover the prompt and no
// rows for a prompt with images are refused naming the row and what
// differed, and a refused request leaves the engine and its pools as they
// were. Prompts: the tiny Qwen3.5 fixture's image prompts.
#include <gtest/gtest.h>

#include "engine/preprocess.hpp"
#include "engine/prompt_layout.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/engine/front_end_wire.hpp"
#include "tests/engine/image_cases.hpp"

namespace mstar::engine {
namespace {

engine_config paged(std::int64_t page_size) {
  engine_config config;
  config.pools.page_size = page_size;
  return config;
}

// The fixture's second image prompt: 20 slots, images on [2, 8) and [16, 18);
// its rows are ids 2, item 6, ids 8, item 2, ids 2.
request_spec two_image_request(local_engine& e, prefix_wire* wire) {
  auto r = test::load_image_cases().at(1).request;
  const auto layout = layout_prompt(e.model(), r.prompt, r.prompt, r.images).value();
  *wire = test::wire_of(layout, e.pools().key_page_size());
  return r;
}

prefix_row ids_row(std::uint64_t n) {
  return {n, n, "prefill", "", ""};
}

prefix_row item_row(std::uint64_t n, const prefix_row& like) {
  return {n, like.advance, like.walk, like.digest, ""};
}

TEST(front_end_rows, rows_on_the_placeholder_runs_are_taken_and_key_as_the_engine_does) {
  auto e = test::fixture_engine("qwen3_5_tiny", paged(4));
  ASSERT_NE(e, nullptr);
  for (auto c : test::load_image_cases()) {
    auto& r = c.request;
    ASSERT_TRUE(e->model().place_images(r.prompt, r.images).has_value());
    const auto layout = layout_prompt(e->model(), r.prompt, r.prompt, r.images).value();
    r.prefix = test::wire_of(layout, 4);
    const auto runs = e->model().image_spans(r.prompt, r.images);
    const auto seed = front_end_seed(r, 4, runs);
    ASSERT_TRUE(seed.has_value()) << seed.error().message();
    ASSERT_TRUE(seed->has_value());
    const auto own = page_keys(layout.spans, 4).value();
    EXPECT_EQ((*seed)->keys, own.keys);
    EXPECT_EQ((*seed)->tail, own.tail);
    EXPECT_EQ((*seed)->tail_items, own.tail_items);
  }
  // Through the engine: the front end's keys, then the engine's own, find
  // each other's pages and give transformers' tokens.
  const auto c = test::load_image_cases().at(1);
  prefix_wire wire;
  auto keyed = two_image_request(*e, &wire);
  keyed.prefix = wire;
  auto first = run_to_completion(*e, {keyed});
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(first->front().tokens[0], c.generated);
  auto own = run_to_completion(*e, {c.request});
  ASSERT_TRUE(own.has_value()) << own.error().message();
  // 4 whole pages of the 20-slot prompt, then slots 16-17 of page 4 (the
  // second image, ending at slot 18) by the end key the front end's row sent.
  EXPECT_EQ(own->front().counts.cached_tokens, 18);
  EXPECT_EQ(own->front().tokens[0], c.generated);
  test::expect_pools_empty(*e);
}

// Submits `r` with rows `rows`, expects a refusal containing each of
// `says`, and checks the engine kept nothing of it.
void expect_refused(local_engine& e, request_spec r, std::vector<prefix_row> rows,
                    const std::vector<std::string>& says) {
  const auto before = e.pools().stats();
  r.prefix->layout = std::move(rows);
  const auto id = e.submit(r);
  ASSERT_FALSE(id.has_value()) << says.front();
  for (const auto& s : says)
    EXPECT_NE(id.error().message().find(s), std::string::npos) << id.error().message();
  EXPECT_TRUE(e.idle());
  const auto after = e.pools().stats();
  EXPECT_EQ(after.kv_free_pages, before.kv_free_pages);
  EXPECT_EQ(after.kv_cached_pages, before.kv_cached_pages);
  EXPECT_EQ(after.free_slots, before.free_slots);
  EXPECT_EQ(after.checkpoints, before.checkpoints);
  test::expect_pools_whole(e);
}

TEST(front_end_rows, an_item_row_of_the_wrong_length_is_refused_naming_the_row) {
  auto e = test::fixture_engine("qwen3_5_tiny", paged(4));
  ASSERT_NE(e, nullptr);
  prefix_wire wire;
  auto r = two_image_request(*e, &wire);
  r.prefix = wire;
  const auto& item = wire.layout.at(1);
  ASSERT_EQ(wire.layout.size(), 5U);
  ASSERT_EQ(item.length, 6U);
  // One slot short, then one slot long; the rows still cover the prompt.
  expect_refused(*e, r, {ids_row(2), item_row(5, item), ids_row(9), wire.layout[3], ids_row(2)},
                 {"prefix_layout[1]", "an item row of 5 slots at slot 2",
                  "image 0's placeholder run [2, 8) has 6 slots"});
  expect_refused(*e, r, {ids_row(2), item_row(7, item), ids_row(7), wire.layout[3], ids_row(2)},
                 {"prefix_layout[1]", "an item row of 7 slots at slot 2", "has 6 slots"});
  // The second image's row one slot long.
  expect_refused(*e, r, {ids_row(2), item, ids_row(8), item_row(3, wire.layout[3]), ids_row(1)},
                 {"prefix_layout[3]", "an item row of 3 slots at slot 16",
                  "image 1's placeholder run [16, 18) has 2 slots"});
  // Nothing was keyed: the same prompt finds no cached page.
  auto plain = test::load_image_cases().at(1).request;
  auto done = run_to_completion(*e, {plain});
  ASSERT_TRUE(done.has_value()) << done.error().message();
  EXPECT_EQ(done->front().counts.cached_tokens, 0);
  test::expect_pools_empty(*e);
}

TEST(front_end_rows, an_item_row_over_text_ids_is_refused_naming_the_row) {
  auto e = test::fixture_engine("qwen3_5_tiny", paged(4));
  ASSERT_NE(e, nullptr);
  prefix_wire wire;
  auto r = two_image_request(*e, &wire);
  r.prefix = wire;
  const auto& item = wire.layout.at(1);
  // An extra item over slots 10-13, which hold text.
  expect_refused(
      *e, r,
      {ids_row(2), item, ids_row(2), item_row(4, item), ids_row(2), wire.layout[3], ids_row(2)},
      {"prefix_layout[3]",
       "an item row over slots [10, 14), where the prompt has "
       "token ids, not an image's placeholder run"});
  // An item row starting inside text and running into the second image.
  expect_refused(*e, r, {ids_row(2), item, ids_row(6), item_row(4, item), ids_row(2)},
                 {"prefix_layout[3]",
                  "an item row over slots [14, 18) does not line up with "
                  "image 1's placeholder run [16, 18)"});
  // A text prompt takes no item row at all.
  auto text = test::greedy_request({35, 90, 107, 100, 119, 35}, 2);
  text.prefix = prefix_wire{};
  expect_refused(*e, text, {ids_row(2), item_row(2, item), ids_row(2)},
                 {"prefix_layout[1]",
                  "an item row over slots [2, 4), where the prompt has token "
                  "ids"});
  EXPECT_EQ(e->pools().stats().kv_cached_pages, 0);
}

TEST(front_end_rows, rows_that_do_not_cover_the_prompt_are_refused) {
  auto e = test::fixture_engine("qwen3_5_tiny", paged(4));
  ASSERT_NE(e, nullptr);
  prefix_wire wire;
  auto r = two_image_request(*e, &wire);
  r.prefix = wire;
  auto rows = wire.layout;
  rows.pop_back();
  expect_refused(*e, r, rows, {"prefix_layout: its 4 rows cover 18 slots but the prompt has 20"});
  rows = wire.layout;
  rows.push_back(ids_row(3));
  expect_refused(*e, r, rows, {"prefix_layout: its 6 rows cover 23 slots but the prompt has 20"});
  // An ids row over an image's slots (it would key every image alike).
  expect_refused(*e, r, {ids_row(2), wire.layout[1], ids_row(12)},
                 {"prefix_layout[2]",
                  "an ids row over slots [8, 20) holds image 1's placeholder "
                  "run [16, 18)"});
  // No rows stand for one ids row over the prompt, images and all.
  expect_refused(*e, r, {},
                 {"prefix_layout: no rows", "2 image(s)", "image 0's placeholder run [2, 8)"});
  // The rows as sent still run.
  auto ok = run_to_completion(*e, {r});
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_EQ(ok->front().tokens[0], test::load_image_cases().at(1).generated);
  test::expect_pools_empty(*e);
}

}  // namespace
}  // namespace mstar::engine
