// The recurrent state pool's pre-plan (reference §1.12, §5.3): a staged step
// is promoted as the very plan object inline planning would have built;
// pre-fork copies wait for promotion and land exactly once; an abandoned
// stage leaves no trace; one stage at a time.
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "resources/recurrent/pool.hpp"
#include "resources/step/step_runner.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"
#include "tests/resources/step/counting_pool.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;
using ints = std::vector<std::int32_t>;
using flags = std::vector<std::uint8_t>;

class recurrent_pool_preplan : public recurrent_pool_test {
 protected:
  void SetUp() override { make(config_of(16)); }

  // Pre-admits and pre-plans `s` on the pool alone, as the runner's pre-pass.
  std::shared_ptr<const recurrent_plan> stage(const recurrent_step& s, step_context& ctx) {
    ctx.is_preplan = true;
    EXPECT_TRUE(admit(s, ctx).ok);
    auto p = plan(s, ctx);
    ctx.is_preplan = false;
    return p;
  }

  // a holds main (pattern 11, has_state) and draft (zero, no state).
  void a_with_an_empty_draft() {
    run(rstep({{"a", "main", 4}, {"a", "draft", 4}}));
    pool_->reset_request("a", false);
    run(rstep({{"a", "main", 1}}));
    fill_slot(*pool_, slot("a"), 11);
    check();
  }
};

TEST_F(recurrent_pool_preplan, the_promoted_plan_is_the_staged_object_and_the_stage_is_spent) {
  const auto s = rstep({{"a", "main", 3}, {"b", "main", 2}});
  step_context ctx;
  const auto staged = stage(s, ctx);
  ASSERT_TRUE(admit(s, ctx).ok);
  const auto promoted = plan(s, ctx);
  EXPECT_EQ(promoted.get(), staged.get());
  EXPECT_EQ(rows(promoted).slot_indices, (ints{1, 2}));
  commit(s, ctx);
  // Spent: the same step planned again is built afresh, and a new stage is welcome.
  const auto again = run(s);
  EXPECT_NE(again.get(), staged.get());
  step_context next;
  EXPECT_TRUE(stage(rstep({{"a", "main", 1}}), next));
}

TEST_F(recurrent_pool_preplan, promoted_addressing_equals_inline_addressing) {
  auto inline_pool = recurrent_state_pool::make("rec", config_of(16)).value();
  const auto history = rstep({{"a", "main", 5}, {"c", "main", 2}});
  run(history);
  step_context ictx;
  ASSERT_TRUE(inline_pool->admit(history, ictx).ok);
  ASSERT_TRUE(inline_pool->plan(history, ictx));
  ASSERT_TRUE(inline_pool->commit(history, ictx));
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 4}, {"a", "draft", 1}, {"pad", "main", 1}},
                       {{"main", "draft"}});
  step_context ctx;
  ctx.padding_rows = {"pad"};
  stage(s, ctx);
  ASSERT_TRUE(admit(s, ctx).ok);
  const auto promoted = plan(s, ctx);
  step_context live;
  live.padding_rows = {"pad"};
  ASSERT_TRUE(inline_pool->admit(s, live).ok);
  const auto inlined = std::dynamic_pointer_cast<const recurrent_plan>(*inline_pool->plan(s, live));
  ASSERT_EQ(promoted->labels.size(), inlined->labels.size());
  for (const auto& [label, a] : inlined->labels) {
    EXPECT_EQ(rows(promoted, label).slot_indices, a.slot_indices) << label;
    EXPECT_EQ(rows(promoted, label).has_state, a.has_state) << label;
    EXPECT_EQ(rows(promoted, label).num_rows, a.num_rows) << label;
  }
  EXPECT_EQ(rows(promoted, "draft").has_state, (flags{1}));  // a's draft resumes from the fork
  EXPECT_EQ(pool_->generation("a", "draft"), inline_pool->generation("a", "draft"));
}

TEST_F(recurrent_pool_preplan, staging_a_pre_fork_copies_nothing_and_clearing_keeps_the_target) {
  a_with_an_empty_draft();
  const auto s = rstep({{"a", "main", 1}, {"a", "draft", 1}}, {{"main", "draft"}});
  step_context ctx;
  const auto staged = stage(s, ctx);
  EXPECT_EQ(rows(staged, "draft").has_state, (flags{1}));  // as the copy will leave it
  EXPECT_FALSE(pool_->has_state("a", "draft"));
  EXPECT_EQ(pool_->generation("a", "draft"), 0U);
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "draft"), std::nullopt));
  pool_->clear_preplan();
  check();
  EXPECT_FALSE(pool_->has_state("a", "draft"));
  EXPECT_EQ(pool_->generation("a", "draft"), 0U);
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "draft"), std::nullopt));
  EXPECT_EQ(pool_->num_free_slots(), 13);  // a held the draft before the stage
}

TEST_F(recurrent_pool_preplan, promotion_copies_the_pre_fork_exactly_once) {
  a_with_an_empty_draft();
  const auto s = rstep({{"a", "main", 1}, {"a", "draft", 1}}, {{"main", "draft"}});
  step_context ctx;
  const auto staged = stage(s, ctx);
  ASSERT_TRUE(admit(s, ctx).ok);
  EXPECT_EQ(pool_->generation("a", "draft"), 0U);  // the live admit copies nothing either
  const auto promoted = plan(s, ctx);
  EXPECT_EQ(promoted.get(), staged.get());
  EXPECT_TRUE(pool_->has_state("a", "draft"));
  EXPECT_EQ(pool_->generation("a", "draft"), 1U);
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "draft"), 11));
  EXPECT_EQ(rows(promoted, "draft").has_state, (flags{1}));
  commit(s, ctx);
  EXPECT_EQ(pool_->generation("a", "draft"), 1U);
}

TEST_F(recurrent_pool_preplan, staging_twice_is_refused_as_already_pending) {
  const auto s = rstep({{"a", "main", 1}});
  step_context ctx;
  stage(s, ctx);
  const auto before = pool_->free_list();
  ctx.is_preplan = true;
  const auto planned = pool_->plan(s, ctx);
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message().find("already pending"), std::string::npos);
  const auto admitted = admit(rstep({{"b", "main", 1}}), ctx);
  ASSERT_FALSE(admitted.ok);
  EXPECT_NE(refusal_message(*admitted.reason).find("already pending"), std::string::npos);
  EXPECT_EQ(pool_->free_list(), before);
}

TEST_F(recurrent_pool_preplan, a_staged_fork_for_some_rows_reserves_only_their_targets) {
  const auto s = rstep({{"a", "main", 2}, {"b", "main", 2}}, {}, {{"main", "draft"}},
                       std::vector<request_id>{"a"});
  step_context ctx;
  stage(s, ctx);
  EXPECT_TRUE(pool_->slot_of("a", "draft"));
  EXPECT_FALSE(pool_->slot_of("b", "draft"));
  ASSERT_TRUE(admit(s, ctx).ok);
  plan(s, ctx);
  commit(s, ctx);
  EXPECT_TRUE(pool_->has_state("a", "draft"));
  EXPECT_FALSE(pool_->slot_of("b", "draft"));
}

TEST_F(recurrent_pool_preplan, a_different_live_step_drops_a_stale_stage) {
  run(rstep({{"a", "main", 1}}));
  const auto before = pool_->free_list();
  step_context ctx;
  stage(rstep({{"a", "main", 1}, {"b", "main", 1}}), ctx);
  const auto live = rstep({{"a", "main", 1}});
  ASSERT_TRUE(admit(live, ctx).ok);
  EXPECT_EQ(pool_->free_list(), before);  // b's staged slot went back
  EXPECT_FALSE(pool_->slot_of("b"));
  plan(live, ctx);
  commit(live, ctx);
}

TEST_F(recurrent_pool_preplan, a_stage_under_another_lease_is_not_promoted) {
  const auto s = rstep({{"a", "main", 1}});
  step_context ctx;
  ctx.lease = graph_lease{1, 4};
  const auto staged = stage(s, ctx);
  ctx.lease = graph_lease{0, 4};
  ASSERT_TRUE(admit(s, ctx).ok);
  const auto live = plan(s, ctx);
  EXPECT_NE(live.get(), staged.get());
  EXPECT_NE(rows(live).graph_slot_indices, rows(staged).graph_slot_indices);
  EXPECT_EQ(rows(live).slot_indices, (ints{1, 0, 0, 0}));
}

TEST_F(recurrent_pool_preplan, removing_a_staged_request_drops_the_stage) {
  run(rstep({{"a", "main", 1}}));
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 1}});
  step_context ctx;
  stage(s, ctx);
  pool_->remove_request("b");
  check();
  EXPECT_EQ(pool_->num_free_slots(), 14);
  ASSERT_TRUE(admit(s, ctx).ok);  // b is new again: admitted afresh
  EXPECT_EQ(rows(plan(s, ctx)).slot_indices, (ints{1, 2}));
  commit(s, ctx);
}

TEST_F(recurrent_pool_preplan, a_refused_pre_admit_stages_nothing) {
  make(config_of(3));
  run(rstep({{"a", "main", 1}}));
  step_context ctx;
  ctx.is_preplan = true;
  ASSERT_FALSE(admit(rstep({{"b", "main", 1}, {"c", "main", 1}}), ctx).ok);
  EXPECT_EQ(pool_->free_list(), (ints{2}));
  rollback(rstep({{"b", "main", 1}, {"c", "main", 1}}), ctx);  // the runner's unwind
  EXPECT_EQ(slot("a"), 1);
  ctx.is_preplan = false;
  EXPECT_TRUE(stage(rstep({{"b", "main", 1}}), ctx));  // nothing was left pending
}

TEST_F(recurrent_pool_preplan, overlapped_steps_unwind_only_what_the_refused_step_took) {
  refusing_resource refuser{"refuser", {"rec"}};
  auto runner = step_runner::make({&refuser, pool_.get()}).value();
  auto bundle = [](const recurrent_step& s) {
    auto other = std::make_shared<resource_step>();
    other->segments = s.segments;
    return step_bundle{{"rec", std::make_shared<recurrent_step>(s)}, {"refuser", other}};
  };
  run(rstep({{"a", "main", 1}}));
  // Step N (a, new b) runs while step N+1 (a, b, new c) is staged.
  const auto n = bundle(rstep({{"a", "main", 1}, {"b", "main", 3}}));
  step_context ctx;
  ASSERT_TRUE(runner.admit(n, ctx).ok());
  ASSERT_TRUE(runner.plan(n, ctx));
  const auto n1 = bundle(rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 3}}));
  step_context next;
  ASSERT_TRUE(runner.pre_admit(n1, next).ok());
  ASSERT_TRUE(runner.pre_plan(n1, next));
  ASSERT_TRUE(runner.commit(n, ctx));
  check();
  refuser.refuse = true;
  ASSERT_FALSE(runner.admit(n1, next).ok());
  check();
  EXPECT_EQ(slot("b"), 2);  // step N's, committed
  EXPECT_TRUE(pool_->has_state("b"));
  EXPECT_FALSE(pool_->slot_of("c"));
  EXPECT_EQ(pool_->free_list().back(), 3);
}

TEST(recurrent_pool_preplan_order, the_pool_pre_plans_before_a_backend_planning_against_it) {
  auto pool = recurrent_state_pool::make("rec", config_of(4)).value();
  std::vector<std::string> log;
  test_support::counting_pool backend{
      "gdn", test_support::pool_options{}.preplanning().after({"rec"}), &log};
  const auto runner = step_runner::make({&backend, pool.get()}).value();
  EXPECT_EQ(test_support::keys_of(runner.preplan_order()),
            (std::vector<std::string>{"rec", "gdn"}));
}

}  // namespace
}  // namespace mstar::resources
