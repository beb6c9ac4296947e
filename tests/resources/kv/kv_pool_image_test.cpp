// KV pool prefix reuse over prompts with images (reference §1.4-§1.8, PS =
// 16): an image is an item on every page it touches, so the pages wholly
// before it are shared with any prompt that has the same ids there, the
// pages it touches only with the same image in the same place; the head of
// the page an image ends in is shared under its end key (§1.7).
#include <cstring>
#include <gtest/gtest.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/layout.hpp"
#include "tests/resources/kv/kv_pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;

// Text 20 / image 30 / text 25 (the reference's layout, §5.7): the image
// touches pages 1-3.
std::vector<prompt_span> text_image_text(std::uint8_t image_byte, token_id first = 100) {
  std::vector<token_id> before(20), after(25);
  for (std::size_t i = 0; i < before.size(); ++i)
    before[i] = first + static_cast<token_id>(i);
  for (std::size_t i = 0; i < after.size(); ++i)
    after[i] = 500 + static_cast<token_id>(i);
  return {id_span{before}, item_span{30, std::vector<std::uint8_t>(32, image_byte)},
          id_span{after}};
}

class kv_image_test : public kv_prefix_test {
 protected:
  // A prefill of `spans` under request `rid`: ingest, probe, run the rest.
  std::int64_t serve_layout(const std::string& rid, const std::vector<prompt_span>& spans) {
    auto keyed = key_prompt(spans, 16).value();
    const auto slots = static_cast<std::int64_t>(keyed.total_slots);
    pool_->ingest_request(rid, {{"main", make_prefix_seed(std::move(keyed), 16)}});
    const auto hit = pool_->resolve_cached_prefix(rid).value_or(0);
    check();
    EXPECT_TRUE(run(step_of({{rid, "main", slots - hit}})).ok);
    return hit;
  }
};

TEST_F(kv_image_test, the_same_image_in_the_same_place_reuses_the_pages_it_touches) {
  EXPECT_EQ(serve_layout("a", text_image_text(0x11)), 0);
  // 75 slots: 4 whole pages, and a copy of page 3's head (slots 48-49, the
  // image's end) under the image's end key (§1.7).
  EXPECT_EQ(pool_->num_cached_pages(), 5);
  // Every whole page matches (one key short of the 5 the prompt has).
  EXPECT_EQ(serve_layout("b", text_image_text(0x11)), 64);
  check();
}

TEST_F(kv_image_test, a_different_image_never_reuses_a_page_it_touches) {
  EXPECT_EQ(serve_layout("a", text_image_text(0x11)), 0);
  // The image starts at slot 20, on page 1: only page 0 matches.
  EXPECT_EQ(serve_layout("b", text_image_text(0x22)), 16);
  check();
}

TEST_F(kv_image_test, pages_before_an_image_are_shared_with_a_text_only_prompt) {
  // A text-only prompt with the image prompt's first 20 ids, then others.
  std::vector<token_id> text(40);
  for (std::size_t i = 0; i < text.size(); ++i)
    text[i] = i < 20 ? 100 + static_cast<token_id>(i) : 900 + static_cast<token_id>(i);
  EXPECT_EQ(serve("a", text), 0);
  EXPECT_EQ(serve_layout("b", text_image_text(0x11)), 16);
  // And the other way round: the image prompt's page 0 serves text.
  EXPECT_EQ(serve("c", text), 32);  // its own two pages from "a"
  std::vector<token_id> other = text;
  other[18] = 7;  // differs from "a" on page 1
  EXPECT_EQ(serve("d", other), 16);
  check();
}

TEST_F(kv_image_test, the_same_image_at_another_place_reuses_only_the_shared_text) {
  EXPECT_EQ(serve_layout("a", text_image_text(0x11)), 0);
  // One id more before the image moves it to slots 21-50.
  auto moved = text_image_text(0x11);
  std::get<id_span>(moved[0]).ids.push_back(7);
  EXPECT_EQ(serve_layout("b", moved), 16);
  check();
}

// The image (slots 20-49) ends at slot 50, inside page 3 (slots 48-63). A
// prompt with the same text and image and other text after misses page 3's
// key, but its end key finds a copy of that page's head: the probe answers
// 50, and the admit copies slots 48-49 into a page of the request's own.
TEST_F(kv_image_test, an_image_ending_inside_a_page_shares_that_pages_head_under_its_end_key) {
  auto a_spans = text_image_text(0x11);
  auto keyed = key_prompt(a_spans, 16).value();
  ASSERT_EQ(keyed.ends.size(), 1U);
  EXPECT_EQ(keyed.ends[0].slot, 50U);
  pool_->ingest_request("a", {{"main", make_prefix_seed(std::move(keyed), 16)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 49}})).ok);
  const auto a_page3 = info("a").pages.at(3);
  std::memset(pool_->page_data(a_page3), 0x77, pool_->geometry().page_bytes());
  const auto cached_before = pool_->num_cached_pages();
  ASSERT_TRUE(run(step_of({{"a", "main", 26}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), cached_before + 2) << "page 3 and the end key's copy";
  check();

  auto b_spans = text_image_text(0x11);
  std::get<id_span>(b_spans[2]).ids.assign(25, 900);  // other text after the image
  EXPECT_EQ(serve_layout("b", b_spans), 50);
  const auto b = info("b");
  ASSERT_GE(b.pages.size(), 5U);
  const auto a = info("a");
  EXPECT_EQ(std::vector<page_id>(b.pages.begin(), b.pages.begin() + 3),
            std::vector<page_id>(a.pages.begin(), a.pages.begin() + 3));
  EXPECT_NE(b.pages[3], a_page3) << "page 3 is b's own";
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(pool_->page_data(b.pages[3])), 0x77)
      << "the head of a's page 3 was copied in";
  check();

  // A different image there: its end key differs, only page 0 matches.
  EXPECT_EQ(serve_layout("c", text_image_text(0x22)), 16);
  pool_->remove_request("a");
  pool_->remove_request("b");
  pool_->remove_request("c");
  check();
}

// Page size 4: "Look: " (7 ids), an image of 4 slots (7-10), then ids from
// `after` (the first at slot 11). The image ends at slot 11, inside page 2
// (slots 8-11), whose key also names slot 11: a prompt that differs only
// from slot 12 on matches pages 0-2 whole.
std::vector<prompt_span> image_ending_at_11(token_id after) {
  std::vector<token_id> before(7), rest(13);
  for (std::size_t i = 0; i < before.size(); ++i)
    before[i] = 100 + static_cast<token_id>(i);
  rest[0] = 500;  // the vision_end both prompts share
  for (std::size_t i = 1; i < rest.size(); ++i)
    rest[i] = after + static_cast<token_id>(i);
  return {id_span{before}, item_span{4, std::vector<std::uint8_t>(32, 0x11)}, id_span{rest}};
}

class kv_image_head_test : public kv_pool_test {
 protected:
  void SetUp() override { make(small_config(4, 16)); }

  // Ingests `spans` under `rid`; the probe's answer.
  std::int64_t probe(const std::string& rid, const std::vector<prompt_span>& spans) {
    auto keyed = key_prompt(spans, 4).value();
    pool_->ingest_request(rid, {{"main", make_prefix_seed(std::move(keyed), 4)}});
    const auto hit = pool_->resolve_cached_prefix(rid).value_or(0);
    check();
    return hit;
  }
  // Prompt "a" (24 slots), its page 2 marked 0x77 before its end copy is taken.
  void serve_a() {
    EXPECT_EQ(probe("a", image_ending_at_11(600)), 0);
    ASSERT_TRUE(run(step_of({{"a", "main", 9}})).ok);
    std::memset(pool_->page_data(info("a").pages.at(2)), 0x77, pool_->geometry().page_bytes());
    ASSERT_TRUE(run(step_of({{"a", "main", 15}})).ok);
    EXPECT_EQ(pool_->num_cached_pages(), 7) << "six whole pages and the end copy";
  }
};

// The probe matches pages 0-2 by their keys (12 slots); a recurrent pool
// whose deepest checkpoint is the image's end agrees on 11. The whole page
// 2 the lease holds has those 3 slots: the pool keeps 11, and the admit
// copies page 2's head into a page of the request's own.
TEST_F(kv_image_head_test, a_whole_page_match_serves_a_length_inside_its_last_page) {
  serve_a();
  EXPECT_EQ(probe("b", image_ending_at_11(900)), 12);
  EXPECT_EQ(pool_->apply_cached_prefix("b", 11), 11);
  check();
  ASSERT_TRUE(run(step_of({{"b", "main", 13}})).ok);
  const auto a = info("a"), b = info("b");
  EXPECT_EQ(b.stored_len, 24);
  EXPECT_EQ(std::vector<page_id>(b.pages.begin(), b.pages.begin() + 2),
            std::vector<page_id>(a.pages.begin(), a.pages.begin() + 2));
  EXPECT_NE(b.pages.at(2), a.pages.at(2)) << "page 2 is b's own";
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(pool_->page_data(b.pages.at(2))), 0x77)
      << "the head of a's page 2 was copied in";
  pool_->remove_request("a");
  pool_->remove_request("b");
  check();
}

// A later round agreeing on less (another pool has no state at 11) gives
// back the copy's page and the lease past what is kept; agreeing on nothing
// gives back everything.
TEST_F(kv_image_head_test, a_smaller_agreement_after_a_head_gives_back_what_it_took) {
  serve_a();
  const auto free_before = pool_->num_free_pages();
  EXPECT_EQ(probe("b", image_ending_at_11(900)), 12);
  EXPECT_EQ(pool_->apply_cached_prefix("b", 11), 11);
  EXPECT_EQ(pool_->num_free_pages(), free_before - 1) << "a page for the head";
  EXPECT_EQ(pool_->apply_cached_prefix("b", 8), 8);
  EXPECT_EQ(pool_->num_free_pages(), free_before);
  EXPECT_EQ(pool_->stream("b", "main")->leased_pages, 2);
  check();
  EXPECT_EQ(pool_->apply_cached_prefix("b", 0), 0);
  EXPECT_EQ(pool_->stream("b", "main")->leased_pages, 0);
  check();
  pool_->remove_request("b");
  pool_->remove_request("a");
  check();
  EXPECT_EQ(pool_->num_free_pages() + pool_->num_cached_pages(), 15);
}

// No page free and none evictable for the head: the stream keeps whole
// pages and says so.
TEST_F(kv_image_head_test, without_a_page_for_the_head_it_keeps_whole_pages) {
  make(small_config(4, 10));  // "a" leaves 2 pages free
  serve_a();
  // 3 pages for "f": the 2 free ones and the end copy, evicted.
  ASSERT_TRUE(run(step_of({{"f", "main", 12}})).ok);
  EXPECT_EQ(pool_->num_free_pages(), 0);
  EXPECT_EQ(pool_->num_evictable_pages(), 0);
  EXPECT_EQ(probe("b", image_ending_at_11(900)), 12);
  EXPECT_EQ(pool_->apply_cached_prefix("b", 11), 8);
  EXPECT_EQ(pool_->stream("b", "main")->leased_pages, 2);
  check();
  EXPECT_EQ(pool_->apply_cached_prefix("b", 8), 8);
  pool_->remove_request("b");
  pool_->remove_request("f");
  pool_->remove_request("a");
  check();
}

}  // namespace
}  // namespace mstar::resources
