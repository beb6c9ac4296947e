// The paged KV pool: the step cycle, forks, pre-planning, retention (§5.2)
// and prefix reuse (§5.4-5.6), with the conservation check after every
// operation.
#include "resources/kv/kv_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "resources/windowing/window_schedule.hpp"

namespace mstar::resources {
namespace {

kv_pool_config small_config(std::int64_t ps = 8, std::int64_t pages = 64) {
  kv_pool_config c;
  c.page_size = ps;
  c.max_num_pages = pages;
  c.num_layers = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.dtype = dtype::float32;
  return c;
}

class kv_pool_test : public ::testing::Test {
 protected:
  void make(kv_pool_config c = small_config(), std::string model = "test-model") {
    pool_ = kv_pool::make("kv", c, std::move(model)).value();
  }
  void SetUp() override { make(); }

  void check() {
    auto ok = pool_->check_invariants();
    ASSERT_TRUE(ok.has_value()) << ok.error().message();
  }

  admit_outcome run(kv_step step, step_context ctx = {}) {
    auto out = pool_->admit(step, ctx);
    check();
    if (!out.ok) {
      pool_->rollback_admit(step, ctx);
      check();
      return out;
    }
    auto plan = pool_->plan(step, ctx);
    EXPECT_TRUE(plan.has_value());
    if (plan) last_plan_ = std::static_pointer_cast<const kv_plan>(*plan);
    auto committed = pool_->commit(step, ctx);
    EXPECT_TRUE(committed.has_value()) << committed.error().message();
    check();
    return out;
  }

  static kv_step step_of(std::vector<segment> segs, bool commit = true) {
    kv_step s;
    s.segments = std::move(segs);
    s.commit = commit;
    return s;
  }

  kv_stream_info info(const std::string& rid, const std::string& label = "main") {
    return pool_->stream(rid, label).value();
  }

  std::unique_ptr<kv_pool> pool_;
  std::shared_ptr<const kv_plan> last_plan_;
};

TEST_F(kv_pool_test, allocates_a_prompt_then_grows_one_page_per_page_of_decode) {
  const auto free0 = pool_->num_free_pages();
  ASSERT_TRUE(run(step_of({{"a", "main", 20}})).ok);
  EXPECT_EQ(info("a").stored_len, 20);
  EXPECT_EQ(info("a").pages.size(), 3u);
  EXPECT_EQ(pool_->num_free_pages(), free0 - 3);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(run(step_of({{"a", "main", 1}})).ok);
  EXPECT_EQ(info("a").stored_len, 24);
  EXPECT_EQ(info("a").pages.size(), 3u);
  ASSERT_TRUE(run(step_of({{"a", "main", 1}})).ok);
  EXPECT_EQ(info("a").pages.size(), 4u);
  EXPECT_EQ(pool_->num_free_pages(), free0 - 4);
}

TEST_F(kv_pool_test, plans_indptrs_page_lists_and_last_page_lengths) {
  ASSERT_TRUE(run(step_of({{"a", "main", 10}, {"b", "main", 3}})).ok);
  const auto& lp = last_plan_->labels.at("main");
  EXPECT_EQ(lp.qo_indptr, (std::vector<std::int32_t>{0, 10, 13}));
  EXPECT_EQ(lp.kv_indptr, (std::vector<std::int32_t>{0, 2, 3}));
  EXPECT_EQ(lp.last_page_len, (std::vector<std::int32_t>{2, 3}));
  EXPECT_FALSE(lp.decode);
  const auto a = info("a").pages, b = info("b").pages;
  EXPECT_EQ(lp.kv_indices, (std::vector<std::int32_t>{a[0], a[1], b[0]}));
  // A decode step takes the cheap path: one token at the last used slot.
  ASSERT_TRUE(run(step_of({{"a", "main", 1}, {"b", "main", 1}})).ok);
  const auto& dp = last_plan_->labels.at("main");
  ASSERT_TRUE(dp.decode);
  EXPECT_EQ(dp.decode_page, (std::vector<std::int32_t>{a[1], b[0]}));
  EXPECT_EQ(dp.decode_offset, (std::vector<std::int32_t>{2, 3}));
}

TEST_F(kv_pool_test, padding_rows_address_the_sink_and_reserve_nothing) {
  const auto free0 = pool_->num_free_pages();
  step_context ctx;
  ctx.padding_rows = {"pad0"};
  ASSERT_TRUE(run(step_of({{"a", "main", 4}, {"pad0", "main", 9}}), ctx).ok);
  EXPECT_EQ(pool_->num_free_pages(), free0 - 1);
  EXPECT_FALSE(pool_->stream("pad0", "main").has_value());
  const auto& lp = last_plan_->labels.at("main");
  EXPECT_EQ(lp.kv_indices.back(), sink_page);
  EXPECT_EQ(lp.kv_indptr.back() - lp.kv_indptr[1], 2);  // ceil(9/8) sink pages
}

TEST_F(kv_pool_test, refuses_with_pages_short_and_leaves_the_free_list_exactly_as_before) {
  make(small_config(8, 6));  // 5 usable pages
  ASSERT_TRUE(run(step_of({{"a", "main", 16}})).ok);
  const auto before = pool_->pages().free_list();
  auto out = run(step_of({{"b", "main", 8}, {"c", "main", 17}}));
  ASSERT_FALSE(out.ok);
  const auto& why = std::get<allocation_failed>(*out.reason);
  EXPECT_EQ(why.pages_short, 1);
  EXPECT_EQ(pool_->pages().free_list(), before);
  EXPECT_FALSE(pool_->stream("b", "main").has_value());
}

TEST_F(kv_pool_test, rollback_after_another_resource_refuses_returns_exactly_the_fresh_pages) {
  ASSERT_TRUE(run(step_of({{"a", "main", 5}})).ok);
  const auto before = pool_->pages().free_list();
  const auto a_before = info("a").pages;
  kv_step s = step_of({{"a", "main", 20}, {"b", "main", 9}});
  step_context ctx;
  ASSERT_TRUE(pool_->admit(s, ctx).ok);
  check();
  pool_->rollback_admit(s, ctx);
  check();
  EXPECT_EQ(pool_->pages().free_list(), before);
  EXPECT_EQ(info("a").pages, a_before);
  EXPECT_EQ(info("a").stored_len, 5);
}

TEST_F(kv_pool_test, pre_fork_copies_the_source_bytes_into_pages_of_its_own) {
  ASSERT_TRUE(run(step_of({{"a", "main", 12}})).ok);
  const auto src = info("a").pages;
  std::memset(pool_->page_data(src[0]), 0x5a, pool_->layout().page_bytes);
  std::memset(pool_->page_data(src[1]), 0x33, pool_->layout().page_bytes);
  kv_step s = step_of({{"a", "main", 1}, {"a", "draft", 2}});
  s.pre_forks = {{"main", "draft"}};
  ASSERT_TRUE(run(s).ok);
  const auto draft = info("a", "draft");
  EXPECT_EQ(draft.stored_len, 14);  // 12 copied + its own 2
  ASSERT_EQ(draft.pages.size(), 2u);
  EXPECT_NE(draft.pages[0], src[0]);
  EXPECT_EQ(std::memcmp(pool_->page_data(draft.pages[0]), pool_->page_data(src[0]),
                        pool_->layout().page_bytes),
            0);
  // Only the first 4 slots of the partial page were copied.
  EXPECT_EQ(*reinterpret_cast<unsigned char*>(pool_->page_data(draft.pages[1])), 0x33);
}

TEST_F(kv_pool_test, post_fork_copies_after_the_step_and_reserves_for_its_growth) {
  ASSERT_TRUE(run(step_of({{"a", "main", 7}})).ok);
  kv_step s = step_of({{"a", "main", 2}});
  s.post_forks = {{"main", "copy"}};
  ASSERT_TRUE(run(s).ok);
  EXPECT_EQ(info("a", "copy").stored_len, 9);
  EXPECT_EQ(info("a", "copy").pages.size(), 2u);
}

TEST_F(kv_pool_test, a_staged_preplan_is_promoted_when_the_same_step_arrives) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  kv_step next = step_of({{"a", "main", 1}});
  step_context pre;
  pre.is_preplan = true;
  ASSERT_TRUE(pool_->admit(next, pre).ok);
  auto staged = pool_->plan(next, pre);
  ASSERT_TRUE(staged.has_value());
  check();
  const auto free_after_stage = pool_->num_free_pages();
  step_context live;
  ASSERT_TRUE(pool_->admit(next, live).ok);
  auto promoted = pool_->plan(next, live);
  ASSERT_TRUE(promoted.has_value());
  EXPECT_EQ(promoted->get(), staged->get());  // the very same record
  EXPECT_EQ(pool_->num_free_pages(), free_after_stage);
  ASSERT_TRUE(pool_->commit(next, live).has_value());
  check();
  EXPECT_EQ(info("a").stored_len, 9);
}

TEST_F(kv_pool_test, a_different_step_clears_the_preplan_and_deletes_invented_streams) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  kv_step staged = step_of({{"a", "main", 1}});
  staged.pre_forks = {{"main", "draft"}};
  step_context pre;
  pre.is_preplan = true;
  ASSERT_TRUE(pool_->admit(staged, pre).ok);
  ASSERT_TRUE(pool_->plan(staged, pre).has_value());
  EXPECT_TRUE(pool_->stream("a", "draft").has_value());
  ASSERT_TRUE(run(step_of({{"a", "main", 2}})).ok);  // another step reached the GPU first
  EXPECT_FALSE(pool_->stream("a", "draft").has_value());
  EXPECT_EQ(info("a").stored_len, 10);
}

// --- retention (reference §5.2, PS = 8) -------------------------------------

TEST_F(kv_pool_test, release_oldest_frees_whole_pages_past_the_protected_prefix) {
  ASSERT_TRUE(run(step_of({{"a", "main", 80}})).ok);
  const auto pages = info("a").pages;
  const auto free0 = pool_->num_free_pages();
  const auto gen0 = info("a").generation;
  ASSERT_TRUE(pool_->protect_prefix("a", "main", 16).has_value());
  EXPECT_EQ(pool_->release_oldest("a", "main", 24).value(), 24);
  check();
  const auto after = info("a");
  EXPECT_EQ(after.pages, (std::vector<page_id>{pages[0], pages[1], pages[5], pages[6], pages[7],
                                               pages[8], pages[9]}));
  EXPECT_EQ(after.stored_len, 56);
  EXPECT_EQ(after.released, 24);
  EXPECT_EQ(after.generation, gen0 + 1);
  EXPECT_EQ(pool_->num_free_pages(), free0 + 3);
  EXPECT_EQ(pool_->release_oldest("a", "main", 7).value(), 0);  // page floor
  EXPECT_EQ(pool_->release_oldest("a", "main", 19).value(), 16);
}

TEST_F(kv_pool_test, never_frees_the_straddling_prefix_page_or_the_partial_tail) {
  ASSERT_TRUE(run(step_of({{"a", "main", 35}})).ok);  // 4 pages + 3 tokens
  ASSERT_TRUE(pool_->protect_prefix("a", "main", 8).has_value());
  EXPECT_EQ(pool_->release_oldest("a", "main", 1000).value(), 24);
  EXPECT_EQ(info("a").pages.size(), 2u);
  check();
  ASSERT_TRUE(run(step_of({{"b", "main", 48}})).ok);
  ASSERT_TRUE(pool_->protect_prefix("b", "main", 12).has_value());  // 1.5 pages
  EXPECT_EQ(pool_->release_oldest("b", "main", 1000).value(), 32);
  EXPECT_EQ(info("b").pages.size(), 2u);
}

TEST_F(kv_pool_test, protect_prefix_refuses_what_the_reference_refuses) {
  ASSERT_TRUE(run(step_of({{"a", "main", 40}})).ok);
  auto beyond = pool_->protect_prefix("a", "main", 41);
  ASSERT_FALSE(beyond.has_value());
  EXPECT_NE(beyond.error().message().find("outside the committed"), std::string::npos);
  ASSERT_TRUE(pool_->protect_prefix("a", "main", 8).has_value());
  ASSERT_TRUE(pool_->protect_prefix("a", "main", 8).has_value());
  auto changed = pool_->protect_prefix("a", "main", 16);
  ASSERT_FALSE(changed.has_value());
  EXPECT_NE(changed.error().message().find("already"), std::string::npos);
  ASSERT_TRUE(run(step_of({{"b", "main", 40}})).ok);
  ASSERT_EQ(pool_->release_oldest("b", "main", 8).value(), 8);
  auto late = pool_->protect_prefix("b", "main", 8);
  ASSERT_FALSE(late.has_value());
  EXPECT_NE(late.error().message().find("must precede"), std::string::npos);
}

TEST_F(kv_pool_test, release_oldest_is_refused_under_an_admitted_step) {
  ASSERT_TRUE(run(step_of({{"a", "main", 40}})).ok);
  kv_step s = step_of({{"a", "main", 1}});
  step_context ctx;
  ASSERT_TRUE(pool_->admit(s, ctx).ok);
  auto r = pool_->release_oldest("a", "main", 8);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("admitted step"), std::string::npos);
  ASSERT_TRUE(pool_->plan(s, ctx).has_value());
  ASSERT_TRUE(pool_->commit(s, ctx).has_value());
  EXPECT_TRUE(pool_->release_oldest("a", "main", 8).has_value());
  check();
}

TEST_F(kv_pool_test, step_declared_retention_releases_inside_commit) {
  const auto policy = retention_policy::make(32, 24).value();  // budget 4 pages, prefix 3
  ASSERT_TRUE(run(step_of({{"a", "main", 24}})).ok);
  for (int i = 0; i < 4; ++i) {
    kv_step s = step_of({{"a", "main", 8}});
    s.retention[{"a", "main"}] = policy;
    ASSERT_TRUE(run(s).ok);
    EXPECT_EQ(info("a").released, 0);
  }
  kv_step fifth = step_of({{"a", "main", 8}});
  fifth.retention[{"a", "main"}] = policy;
  ASSERT_TRUE(run(fifth).ok);
  EXPECT_EQ(info("a").released, 8);
  EXPECT_EQ(info("a").stored_len, 56);
  EXPECT_EQ(info("a").pages.size(), 7u);
  kv_step two = step_of({{"a", "main", 16}});
  two.retention[{"a", "main"}] = policy;
  ASSERT_TRUE(run(two).ok);
  EXPECT_EQ(info("a").released, 24);
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);  // no policy on this step: nothing released
  EXPECT_EQ(info("a").released, 24);
}

TEST_F(kv_pool_test, retention_validation_leaves_the_pool_untouched) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  kv_step s = step_of({{"a", "main", 8}});
  s.retention[{"a", "main"}] = retention_policy::make(8, 100).value();
  step_context ctx;
  ASSERT_TRUE(pool_->admit(s, ctx).ok);
  ASSERT_TRUE(pool_->plan(s, ctx).has_value());
  auto r = pool_->commit(s, ctx);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("protects"), std::string::npos);
  EXPECT_EQ(info("a").stored_len, 8);
}

TEST_F(kv_pool_test, a_window_schedule_bounds_the_retained_context) {
  const auto schedule = window_schedule::make(48, 8, 16).value();
  const auto policy = schedule.retention(4, 24).value().value();
  ASSERT_TRUE(run(step_of({{"a", "main", 24}})).ok);  // the protected text prefix
  for (const auto& w : schedule.windows()) {
    kv_step s = step_of({{"a", "main", (w.commit_end() - w.commit_start()) * 4}});
    s.retention[{"a", "main"}] = policy;
    ASSERT_TRUE(run(s).ok);
    const auto st = info("a");
    EXPECT_LE((st.stored_len - 24) / 4, 16 + 2) << "window " << w.index;
  }
  EXPECT_EQ(info("a").released, 128);
}

// --- prefix reuse (reference §5.4-5.6, PS = 16) ------------------------------

std::vector<token_id> prompt(std::size_t n, token_id diverge_at = 1u << 30) {
  std::vector<token_id> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = i >= diverge_at ? 9000 + i : 100 + i;
  return ids;
}

kv_prefix_seed seed_for(const std::vector<token_id>& ids, std::int64_t ps) {
  std::vector<std::vector<token_id>> pages;
  for (std::size_t i = 0; i < ids.size(); i += static_cast<std::size_t>(ps)) {
    pages.emplace_back(ids.begin() + static_cast<long>(i),
                       ids.begin() + static_cast<long>(std::min(ids.size(), i + ps)));
  }
  kv_prefix_seed seed;
  seed.keys = chain(pages).value();
  if (ids.size() % static_cast<std::size_t>(ps) != 0) seed.tail = pages.back();
  return seed;
}

class kv_prefix_test : public kv_pool_test {
 protected:
  void SetUp() override { make(small_config(16, 64)); }

  // Ingests, probes, admits the rest of the prompt and commits: a request's
  // prefill as the worker runs it. Returns the probe's answer.
  std::int64_t serve(const std::string& rid, const std::vector<token_id>& ids,
                     bool prefix_cache = true) {
    pool_->ingest_request(rid, {{"main", seed_for(ids, 16)}}, prefix_cache);
    const auto hit = pool_->resolve_cached_prefix(rid).value_or(0);
    check();
    EXPECT_TRUE(run(step_of({{rid, "main", static_cast<std::int64_t>(ids.size()) - hit}})).ok);
    return hit;
  }
};

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

TEST_F(kv_prefix_test, a_seeded_random_walk_conserves_pages) {
  const std::uint32_t seed = 0xC0FFEE;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  make(small_config(16, 40));
  std::mt19937 rng{seed};
  std::vector<std::string> live;
  for (int op = 0; op < 3000; ++op) {
    const auto pick = rng() % 10;
    if (pick < 2 || live.empty()) {
      const std::string rid = "r" + std::to_string(op);
      pool_->ingest_request(rid, {{"main", seed_for(prompt(16 + rng() % 80, rng() % 96), 16)}});
      (void)pool_->resolve_cached_prefix(rid);
      check();
      live.push_back(rid);
    } else if (pick < 7) {
      std::vector<segment> segs;
      for (const auto& rid : live) {
        if (rng() % 2) segs.push_back({rid, "main", static_cast<std::int64_t>(rng() % 20)});
      }
      kv_step s = step_of(segs);
      if (rng() % 5 == 0) s.pre_forks = {{"main", "draft"}};
      if (rng() % 4 == 0 && !segs.empty()) {
        s.retention[{segs[0].rid, "main"}] = retention_policy::make(32, 0).value();
      }
      step_context ctx;
      auto out = pool_->admit(s, ctx);
      check();
      if (!out.ok || rng() % 6 == 0) {
        pool_->rollback_admit(s, ctx);
      } else {
        ASSERT_TRUE(pool_->plan(s, ctx).has_value());
        (void)pool_->commit(s, ctx);
      }
      check();
    } else if (pick < 9) {
      const auto i = rng() % live.size();
      if (rng() % 2) {
        pool_->remove_request(live[i]);
        live.erase(live.begin() + static_cast<long>(i));
      } else {
        pool_->reset_request(live[i], /*free=*/true);
      }
      check();
    } else {
      (void)pool_->release_oldest(live[rng() % live.size()], "main", rng() % 64);
      check();
    }
  }
  for (const auto& rid : live) pool_->remove_request(rid);
  check();
  EXPECT_EQ(pool_->num_free_pages() + pool_->num_cached_pages(), 39);
}

}  // namespace
}  // namespace mstar::resources
