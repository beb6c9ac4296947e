// KV pool prefix reuse (reference §5.4-5.6, PS = 16): leases, conversion,
// indexing, generation keying, eviction, roots, and a random walk.
#include <cstdio>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

#include "resources/kv/kv_pool.hpp"
#include "resources/windowing/window_schedule.hpp"
#include "tests/resources/kv/kv_pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;

TEST_F(kv_prefix_test, matches_whole_pages_and_stops_one_key_short) {
  EXPECT_EQ(serve("a", prompt(100)), 0);
  EXPECT_EQ(pool_->num_cached_pages(), 6);
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 96);
  pool_->ingest_request("c", {{"main", seed_for(prompt(100, 48), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("c"), 48);
  pool_->ingest_request("d", {{"main", seed_for(prompt(96), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("d"), 80);
  pool_->ingest_request("e", {{"main", seed_for(prompt(100, 0), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("e"), 0);
  EXPECT_EQ(info("e").leased_pages, 0);
  check();
}

TEST_F(kv_prefix_test, a_repeat_probe_answers_the_same_without_a_second_reference) {
  serve("a", prompt(100));
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  ASSERT_EQ(pool_->resolve_cached_prefix("b"), 96);
  const auto page0 = info("a").pages[0];
  const auto owners = pool_->pages().owners(page0);
  ASSERT_EQ(pool_->resolve_cached_prefix("b"), 96);
  EXPECT_EQ(pool_->pages().owners(page0), owners);
  pool_->remove_request("b");
  EXPECT_EQ(pool_->pages().owners(page0), owners - 1);
  check();
}

TEST_F(kv_prefix_test, admit_converts_the_lease_into_the_streams_first_pages) {
  serve("a", prompt(100));
  EXPECT_EQ(serve("b", prompt(100)), 96);
  const auto a = info("a"), b = info("b");
  EXPECT_EQ(b.stored_len, 100);
  EXPECT_TRUE(std::equal(a.pages.begin(), a.pages.begin() + 6, b.pages.begin()));
  EXPECT_NE(a.pages[6], b.pages[6]);
  EXPECT_EQ(b.leased_pages, 0);
  EXPECT_EQ(pool_->num_cached_pages(), 6);  // served from cache: not indexed again
}

TEST_F(kv_prefix_test, the_smallest_agreed_prefix_trims_the_lease) {
  serve("a", prompt(100));
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  ASSERT_EQ(pool_->resolve_cached_prefix("b"), 96);
  pool_->apply_cached_prefix("b", 40);
  EXPECT_EQ(info("b").leased_pages, 2);
  EXPECT_EQ(pool_->pages().owners(info("a").pages[5]), 2);  // index + a only
  check();
}

TEST_F(kv_prefix_test, first_writer_wins_and_the_losers_pages_stay_private) {
  pool_->ingest_request("a", {{"main", seed_for(prompt(40), 16)}});
  pool_->ingest_request("b", {{"main", seed_for(prompt(40), 16)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 40}, {"b", "main", 40}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 2);
  EXPECT_EQ(pool_->pages().owners(info("b").pages[0]), 1);
  EXPECT_EQ(pool_->pages().owners(info("a").pages[0]), 2);
}

TEST_F(kv_prefix_test, opted_out_capture_and_padding_rows_index_nothing) {
  serve("a", prompt(40), /*prefix_cache=*/false);
  EXPECT_EQ(pool_->num_cached_pages(), 0);
  pool_->ingest_request("b", {{"main", seed_for(prompt(40), 16)}});
  step_context capture;
  capture.capture = true;
  ASSERT_TRUE(run(step_of({{"b", "main", 40}}), capture).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 0);
}

TEST_F(kv_prefix_test, a_generated_page_is_indexed_at_the_commit_that_fills_it) {
  const auto ids = prompt(30);
  serve("a", ids);
  EXPECT_EQ(pool_->num_cached_pages(), 1);
  // Decode: each sampled id is fed back (and keyed) before the step that
  // stores it commits.
  std::vector<token_id> generated;
  for (token_id t = 0; t < 2; ++t) {
    generated.push_back(5000 + t);
    pool_->extend_prefix_chain("a", "main", std::span{&generated.back(), 1});
    ASSERT_TRUE(run(step_of({{"a", "main", 1}})).ok);
  }
  EXPECT_EQ(pool_->num_cached_pages(), 2);  // page 1 holds ids 16..31 now
  auto next_turn = ids;
  next_turn.insert(next_turn.end(), generated.begin(), generated.end());
  next_turn.push_back(7);
  pool_->ingest_request("b", {{"main", seed_for(next_turn, 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 32);
  check();
}

// An image ending inside page 1 (ps 16: text 10, image 10): generated ids
// get the 12 slots it leaves, and the filled page is indexed under the key
// the next turn's layout (prompt, image, generated ids) gives it (§1.10).
TEST_F(kv_prefix_test, a_generated_page_after_an_image_is_indexed_under_the_layouts_key) {
  const std::vector<std::uint8_t> image(32, 0x5a);
  const std::vector<token_id> text(10, 3);
  const std::vector<prompt_span> prompt_spans = {id_span{text}, item_span{10, image}};
  pool_->ingest_request("a",
                        {{"main", make_prefix_seed(key_prompt(prompt_spans, 16).value(), 16)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 20}})).ok);
  // Page 0, and page 1's head up to the image's end (slot 20) under its end key.
  EXPECT_EQ(pool_->num_cached_pages(), 2);
  const std::vector<token_id> generated(12, 9);
  pool_->extend_prefix_chain("a", "main", generated);
  ASSERT_TRUE(run(step_of({{"a", "main", 12}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 3);
  check();

  std::vector<token_id> after = generated;
  after.push_back(4);
  const std::vector<prompt_span> next = {id_span{text}, item_span{10, image}, id_span{after}};
  pool_->ingest_request("b", {{"main", make_prefix_seed(key_prompt(next, 16).value(), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 32);
  // A different last generated id changes page 1's key: page 0 matches, and
  // page 1's head up to the image's end by the end key.
  auto changed = after;
  changed[11] = 8;
  const std::vector<prompt_span> other = {id_span{text}, item_span{10, image}, id_span{changed}};
  pool_->ingest_request("c", {{"main", make_prefix_seed(key_prompt(other, 16).value(), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("c"), 20);
  check();
}

// A salted prompt shorter than a page: the page generated ids fill folds the
// salt root like the prompt's keys, so only the same tenant's next turn
// finds it (the first generated page used to fold an empty parent).
TEST_F(kv_prefix_test, a_salted_prompts_first_generated_page_keeps_its_salt) {
  const std::vector<std::uint8_t> salt(32, 0x11);
  const std::vector<prompt_span> prompt_spans = {id_span{prompt(10)}};
  pool_->ingest_request(
      "a", {{"main", make_prefix_seed(key_prompt(prompt_spans, 16, salt).value(), 16, salt)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 10}})).ok);
  const std::vector<token_id> generated(6, 9);
  pool_->extend_prefix_chain("a", "main", generated);
  ASSERT_TRUE(run(step_of({{"a", "main", 6}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 1);

  auto next_ids = prompt(10);
  next_ids.insert(next_ids.end(), generated.begin(), generated.end());
  next_ids.push_back(4);
  const std::vector<prompt_span> next = {id_span{next_ids}};
  pool_->ingest_request("same",
                        {{"main", make_prefix_seed(key_prompt(next, 16, salt).value(), 16, salt)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("same"), 16);
  pool_->ingest_request("unsalted", {{"main", make_prefix_seed(key_prompt(next, 16).value(), 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("unsalted"), 0);
  check();
}

// A seed with a tail but no keys (mstar-tool sim accepts one; the fuzzer
// found it): the chain keys nothing yet, and ids fed back key whole pages
// from the first (keyed_pages went to -1, then keys[-2] was read).
TEST_F(kv_prefix_test, a_seed_with_a_tail_and_no_keys_keys_pages_from_the_first) {
  kv_prefix_seed seed;
  seed.tail = {1, 2, 3};
  pool_->ingest_request("a", {{"main", seed}});
  ASSERT_TRUE(run(step_of({{"a", "main", 3}})).ok);
  std::vector<token_id> more(20, 7);
  pool_->extend_prefix_chain("a", "main", more);
  ASSERT_TRUE(run(step_of({{"a", "main", 20}})).ok);
  check();
  // The filled first page is indexed under the key of its tokens.
  std::vector<token_id> next{1, 2, 3};
  next.insert(next.end(), more.begin(), more.end());
  next.push_back(9);
  pool_->ingest_request("b", {{"main", seed_for(next, 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 16);
  check();
}

TEST_F(kv_prefix_test, cached_pages_are_evicted_before_a_live_request_fails) {
  make(small_config(16, 9));  // 8 usable pages
  serve("a", prompt(100));    // 7 pages, 6 indexed
  pool_->remove_request("a");
  EXPECT_EQ(pool_->num_cached_pages(), 6);
  ASSERT_TRUE(run(step_of({{"b", "main", 128}})).ok);  // needs all 8
  EXPECT_EQ(pool_->num_cached_pages(), 0);
  auto out = run(step_of({{"c", "main", 1}}));  // a pool full of live pages refuses
  ASSERT_FALSE(out.ok);
  EXPECT_EQ(std::get<allocation_failed>(*out.reason).pages_short, 1);
}

TEST_F(kv_prefix_test, salts_and_models_change_the_root) {
  const auto base = pool_->root();
  auto salted = small_config(16, 64);
  salted.prefix_cache_salt = "tenant-b";
  EXPECT_NE(kv_pool::make("kv", salted, "test-model").value()->root(), base);
  EXPECT_NE(kv_pool::make("kv", small_config(16, 64), "other").value()->root(), base);
  EXPECT_NE(kv_pool::make("kv", small_config(8, 64), "test-model").value()->root(), base);
  EXPECT_EQ(kv_pool::make("kv", small_config(16, 64), "test-model").value()->root(), base);
  EXPECT_FALSE(kv_pool::make("kv", small_config(16, 64), "").value()->prefix_cache_open());
}

TEST_F(kv_prefix_test, a_refused_admit_keeps_the_converted_pages_and_reprobes_the_same) {
  make(small_config(16, 10));  // 9 usable pages
  serve("a", prompt(100));     // 7 pages, 6 indexed
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  ASSERT_EQ(pool_->resolve_cached_prefix("b"), 96);
  const auto owners = pool_->pages().owners(info("a").pages[0]);
  auto refused = run(step_of({{"b", "main", 4}, {"c", "main", 64}}));  // c needs 4, 2 free
  ASSERT_FALSE(refused.ok);
  EXPECT_EQ(info("b").stored_len, 96);  // the lease was converted and stays converted
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 96);
  EXPECT_EQ(pool_->pages().owners(info("a").pages[0]), owners);
  ASSERT_TRUE(run(step_of({{"b", "main", 4}})).ok);
  EXPECT_EQ(info("b").stored_len, 100);
}

TEST_F(kv_prefix_test, reset_and_remove_give_back_an_unconverted_lease) {
  serve("a", prompt(100));
  const auto page0 = info("a").pages[0];
  const auto owners = pool_->pages().owners(page0);
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  ASSERT_EQ(pool_->resolve_cached_prefix("b"), 96);
  pool_->reset_request("b", /*free=*/true);
  check();
  EXPECT_EQ(pool_->pages().owners(page0), owners);
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 96);  // the rewound request probes afresh
  pool_->remove_request("b");
  check();
  EXPECT_EQ(pool_->pages().owners(page0), owners);
}

TEST_F(kv_prefix_test, a_pre_fork_off_a_leased_stream_gets_pages_of_its_own) {
  serve("a", prompt(100));
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  ASSERT_EQ(pool_->resolve_cached_prefix("b"), 96);
  kv_step s = step_of({{"b", "main", 4}});
  s.pre_forks = {{"main", "draft"}};
  ASSERT_TRUE(run(s).ok);
  const auto main_pages = info("b").pages;
  const auto draft = info("b", "draft");
  EXPECT_EQ(draft.stored_len, 96);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_NE(draft.pages[i], main_pages[i]);
  for (const auto p : draft.pages)
    EXPECT_EQ(pool_->pages().owners(p), 1);
}

TEST_F(kv_prefix_test, a_chunked_prefill_indexes_a_page_only_once_it_is_full) {
  make(small_config(128, 16));
  pool_->ingest_request("a", {{"main", seed_for(prompt(128), 128)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 100}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 0);
  ASSERT_TRUE(run(step_of({{"a", "main", 28}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 1);
}

TEST_F(kv_prefix_test, reset_then_rerun_indexes_again_from_page_zero) {
  serve("a", prompt(40));
  EXPECT_EQ(pool_->num_cached_pages(), 2);
  pool_->reset_request("a", /*free=*/true);
  make(small_config(16, 64));  // a fresh pool: nothing cached
  serve("a", prompt(40));
  pool_->reset_request("a", /*free=*/false);
  ASSERT_TRUE(run(step_of({{"a", "main", 40}})).ok);  // rerun on its own pages
  EXPECT_EQ(pool_->num_cached_pages(), 2);
  check();
}

TEST_F(kv_prefix_test, the_loser_of_a_race_chains_its_next_page_under_the_winners) {
  pool_->ingest_request("a", {{"main", seed_for(prompt(40), 16)}});
  pool_->ingest_request("b", {{"main", seed_for(prompt(40), 16)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 40}, {"b", "main", 40}})).ok);
  ASSERT_EQ(pool_->num_cached_pages(), 2);
  // b generates the rest of page 2; its key chains under a's page 1.
  std::vector<token_id> more(8, 77);
  pool_->extend_prefix_chain("b", "main", more);
  ASSERT_TRUE(run(step_of({{"b", "main", 8}})).ok);
  EXPECT_EQ(pool_->num_cached_pages(), 3);
  EXPECT_EQ(pool_->pages().owners(info("b").pages[2]), 2);  // indexed under the winner's chain
  auto next = prompt(40);
  next.insert(next.end(), more.begin(), more.end());
  next.push_back(1);
  pool_->ingest_request("c", {{"main", seed_for(next, 16)}});
  EXPECT_EQ(pool_->resolve_cached_prefix("c"), 48);
}

// Every result is checked (a commit after a good plan succeeds; a release
// frees whole pages, at most what was asked, and moves the stream's
// `released` by exactly that), and counters show the walk reached each case.
TEST_F(kv_prefix_test, a_seeded_random_walk_conserves_pages) {
  const std::uint32_t seed = 0xC0FFEE;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  constexpr std::int64_t page_size = 16;
  make(small_config(page_size, 40));
  std::mt19937 rng{seed};
  std::vector<std::string> live;
  struct {
    int cache_hits = 0, committed = 0, refused = 0, rolled_back = 0, forked = 0, retained = 0;
    int removed = 0, reset = 0, released_some = 0, released_none = 0, release_refused = 0;
  } seen;
  for (int op = 0; op < 3000; ++op) {
    const auto pick = rng() % 10;
    if (pick < 2 || live.empty()) {
      const std::string rid = 'r' + std::to_string(op);
      pool_->ingest_request(rid, {{"main", seed_for(prompt(16 + rng() % 80, rng() % 96), 16)}});
      const auto hit = pool_->resolve_cached_prefix(rid);
      if (hit && *hit > 0) {
        ++seen.cache_hits;
        EXPECT_EQ(*hit % page_size, 0) << "a cached prefix is whole pages";
      }
      check();
      live.push_back(rid);
    } else if (pick < 7) {
      std::vector<segment> segs;
      for (const auto& rid : live) {
        if (rng() % 2)
          segs.push_back({rid, "main", static_cast<std::int64_t>(rng() % 20)});
      }
      kv_step s = step_of(segs);
      const bool fork = rng() % 5 == 0;
      if (fork)
        s.pre_forks = {{"main", "draft"}};
      const bool retain = rng() % 4 == 0 && !segs.empty();
      if (retain)
        s.retention[{segs[0].rid, "main"}] = retention_policy::make(32, 0).value();
      step_context ctx;
      auto out = pool_->admit(s, ctx);
      check();
      if (!out.ok || rng() % 6 == 0) {
        ++(out.ok ? seen.rolled_back : seen.refused);
        pool_->rollback_admit(s, ctx);
      } else {
        ASSERT_TRUE(pool_->plan(s, ctx).has_value());
        const auto committed = pool_->commit(s, ctx);
        ASSERT_TRUE(committed.has_value()) << committed.error().to_string();
        ++seen.committed;
        seen.forked += fork ? 1 : 0;
        seen.retained += retain ? 1 : 0;
      }
      check();
    } else if (pick < 9) {
      const auto i = rng() % live.size();
      if (rng() % 2) {
        pool_->remove_request(live[i]);
        live.erase(live.begin() + static_cast<long>(i));
        ++seen.removed;
      } else {
        pool_->reset_request(live[i], /*free=*/true);
        ++seen.reset;
      }
      check();
    } else {
      const std::string& rid = live[rng() % live.size()];
      const auto want = static_cast<std::int64_t>(rng() % 64);
      const auto before = pool_->stream(rid, "main");
      const auto freed = pool_->release_oldest(rid, "main", want);
      if (!freed) {
        ++seen.release_refused;
        const auto after = pool_->stream(rid, "main");
        ASSERT_EQ(before.has_value(), after.has_value());
        if (before) {
          EXPECT_EQ(after->released, before->released) << "a refused release freed tokens";
        }
      } else {
        EXPECT_GE(*freed, 0);
        EXPECT_LE(*freed, want);
        EXPECT_EQ(*freed % page_size, 0) << "releases free whole pages";
        ++(*freed > 0 ? seen.released_some : seen.released_none);
        ASSERT_TRUE(before.has_value());
        const auto after = pool_->stream(rid, "main");
        ASSERT_TRUE(after.has_value());
        EXPECT_EQ(after->released, before->released + *freed);
      }
      check();
    }
  }
  for (const auto& rid : live)
    pool_->remove_request(rid);
  check();
  EXPECT_EQ(pool_->num_free_pages() + pool_->num_cached_pages(), 39);
  std::printf(
      "[ coverage ] hits %d, committed %d (forked %d, retained %d), refused %d, rolled back %d, "
      "removed %d, reset %d, released some %d / none %d / refused %d\n",
      seen.cache_hits, seen.committed, seen.forked, seen.retained, seen.refused, seen.rolled_back,
      seen.removed, seen.reset, seen.released_some, seen.released_none, seen.release_refused);
  EXPECT_GT(seen.cache_hits, 0);
  EXPECT_GT(seen.committed, 0);
  EXPECT_GT(seen.forked, 0);
  EXPECT_GT(seen.retained, 0);
  EXPECT_GT(seen.refused, 0);
  EXPECT_GT(seen.rolled_back, 0);
  EXPECT_GT(seen.removed, 0);
  EXPECT_GT(seen.reset, 0);
  EXPECT_GT(seen.released_some, 0);
  EXPECT_GT(seen.released_none, 0);
}

}  // namespace
}  // namespace mstar::resources
