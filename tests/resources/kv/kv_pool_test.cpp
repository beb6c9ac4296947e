// The paged KV pool: the step cycle, forks, pre-planning and retention
// (reference §5.2), with the conservation check after every operation.
#include "resources/kv/kv_pool.hpp"

#include <cstring>
#include <gtest/gtest.h>
#include <random>

#include "resources/windowing/window_schedule.hpp"
#include "tests/resources/kv/kv_pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;

TEST_F(kv_pool_test, allocates_a_prompt_then_grows_one_page_per_page_of_decode) {
  const auto free0 = pool_->num_free_pages();
  ASSERT_TRUE(run(step_of({{"a", "main", 20}})).ok);
  EXPECT_EQ(info("a").stored_len, 20);
  EXPECT_EQ(info("a").pages.size(), 3u);
  EXPECT_EQ(pool_->num_free_pages(), free0 - 3);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(run(step_of({{"a", "main", 1}})).ok);
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
  std::memset(pool_->page_data(src[0]), 0x5a, pool_->geometry().page_bytes());
  std::memset(pool_->page_data(src[1]), 0x33, pool_->geometry().page_bytes());
  kv_step s = step_of({{"a", "main", 1}, {"a", "draft", 2}});
  s.pre_forks = {{"main", "draft"}};
  ASSERT_TRUE(run(s).ok);
  const auto draft = info("a", "draft");
  EXPECT_EQ(draft.stored_len, 14);  // 12 copied + its own 2
  ASSERT_EQ(draft.pages.size(), 2u);
  EXPECT_NE(draft.pages[0], src[0]);
  EXPECT_EQ(std::memcmp(pool_->page_data(draft.pages[0]), pool_->page_data(src[0]),
                        pool_->geometry().page_bytes()),
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

// Reference §1.12: an abandoned stage leaves no trace. The pages it
// reserved on an existing stream go back to the front of the free queue in
// order, so the next admit takes the pages it would have taken unstaged
// (overlap scheduling's checker compares page ids with sync mode's).
TEST_F(kv_pool_test, a_cleared_stage_gives_its_pages_back_in_order) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  const auto before = pool_->pages().free_list();
  const auto pages_before = info("a").pages;
  kv_step next = step_of({{"a", "main", 9}, {"b", "main", 3}});
  step_context pre;
  pre.is_preplan = true;
  ASSERT_TRUE(pool_->admit(next, pre).ok);
  ASSERT_TRUE(pool_->plan(next, pre).has_value());
  EXPECT_GT(info("a").pages.size(), pages_before.size());  // the stage grew a's stream
  pool_->clear_preplan();
  check();
  EXPECT_EQ(info("a").pages, pages_before);
  EXPECT_FALSE(pool_->stream("b", "main").has_value());
  EXPECT_EQ(pool_->pages().free_list(), before);
}

TEST_F(kv_pool_test, clearing_a_stage_the_live_admit_took_over_keeps_the_live_reservations) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  const auto before = pool_->pages().free_list();
  kv_step next = step_of({{"a", "main", 9}, {"b", "main", 3}});
  step_context pre;
  pre.is_preplan = true;
  ASSERT_TRUE(pool_->admit(next, pre).ok);
  step_context live;
  ASSERT_TRUE(pool_->admit(next, live).ok);  // takes the stage over
  pool_->clear_preplan();
  check();
  EXPECT_TRUE(pool_->stream("b", "main").has_value());
  pool_->rollback_admit(next, live);  // another resource refused the live step
  check();
  EXPECT_EQ(pool_->pages().free_list(), before);
  EXPECT_FALSE(pool_->stream("b", "main").has_value());
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

TEST_F(kv_pool_test, a_retention_commit_would_refuse_is_refused_at_admit_untouched) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  const auto before = pool_->pages().free_list();
  kv_step s = step_of({{"a", "main", 8}});
  s.retention[{"a", "main"}] = retention_policy::make(8, 100).value();
  step_context ctx;
  const auto out = pool_->admit(s, ctx);
  ASSERT_FALSE(out.ok);
  EXPECT_NE(refusal_message(*out.reason).find("protects"), std::string::npos);
  check();
  EXPECT_EQ(pool_->pages().free_list(), before);
  EXPECT_EQ(info("a").stored_len, 8);
}

TEST_F(kv_pool_test, a_refused_pre_admit_leaves_the_running_step_its_pages) {
  ASSERT_TRUE(run(step_of({{"a", "main", 8}})).ok);
  kv_step running = step_of({{"a", "main", 9}});
  step_context live;
  ASSERT_TRUE(pool_->admit(running, live).ok);
  ASSERT_TRUE(pool_->plan(running, live).has_value());
  // Step N+1 is staged while N runs, then another resource refuses it.
  kv_step next = step_of({{"b", "main", 20}});
  step_context pre;
  pre.is_preplan = true;
  ASSERT_TRUE(pool_->admit(next, pre).ok);
  pool_->rollback_admit(next, pre);
  check();
  EXPECT_FALSE(pool_->stream("b", "main").has_value());
  ASSERT_TRUE(pool_->commit(running, live).has_value());
  check();
  EXPECT_EQ(info("a").stored_len, 17);
  EXPECT_EQ(info("a").pages.size(), 3u);
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

}  // namespace
}  // namespace mstar::resources
