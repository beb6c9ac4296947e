// The recurrent state pool under the step runner (reference §5.2): a refusal
// by the pool or by a resource planned after it leaves the free list in its
// exact prior order; held slots survive; removal and commit end what a
// rollback may free; pre-planned reservations unwind with the step.
#include <algorithm>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "resources/recurrent/pool.hpp"
#include "resources/step/step_runner.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;
using ints = std::vector<std::int32_t>;

recurrent_blocks one_block() {
  recurrent_blocks blocks;
  blocks.emplace("state", recurrent_block_config({4, 8}, dtype::float32));
  return blocks;
}

// A 4-slot pool (3 usable) and a refuser planned after it.
class recurrent_pool_rollback : public recurrent_pool_test {
 protected:
  void SetUp() override {
    make(config_of(4, true, one_block()));
    runner_ = std::make_unique<step_runner>(step_runner::make({&refuser_, pool_.get()}).value());
  }

  static step_bundle bundle_of(const recurrent_step& s) {
    auto other = std::make_shared<resource_step>();
    other->segments = s.segments;
    return {{"rec", std::make_shared<recurrent_step>(s)}, {"refuser", other}};
  }

  full_admit_outcome runner_admit(const recurrent_step& s, step_context& ctx) {
    auto out = runner_->admit(bundle_of(s), ctx);
    check();
    return out;
  }

  // The whole step through the runner; admit must succeed.
  void runner_run(const recurrent_step& s, step_context ctx = {}) {
    const auto b = bundle_of(s);
    ASSERT_TRUE(runner_->admit(b, ctx).ok());
    ASSERT_TRUE(runner_->plan(b, ctx));
    ASSERT_TRUE(runner_->commit(b, ctx));
    check();
  }

  void stage(const recurrent_step& s, step_context& ctx) {
    const auto b = bundle_of(s);
    ASSERT_TRUE(runner_->pre_admit(b, ctx).ok());
    ASSERT_TRUE(runner_->pre_plan(b, ctx));
    check();
  }

  refusing_resource refuser_{"refuser", {"rec"}};
  std::unique_ptr<step_runner> runner_;
};

TEST_F(recurrent_pool_rollback, the_pool_refuses_a_fourth_request_leaving_its_free_list_exact) {
  ASSERT_EQ(runner_->order().front()->key(), "rec");
  const auto before = pool_->free_list();
  step_context ctx;
  const auto out = runner_admit(
      rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}, {"d", "main", 1}}), ctx);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.failed_resource, "rec");
  EXPECT_EQ(pool_->free_list(), before);
  for (const auto* rid : {"a", "b", "c", "d"})
    EXPECT_FALSE(pool_->slot_of(rid)) << rid;
  EXPECT_EQ(refuser_.admits, 0);
  runner_run(rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}}));
  EXPECT_EQ((ints{slot("a"), slot("b"), slot("c")}), (ints{1, 2, 3}));
}

TEST_F(recurrent_pool_rollback, a_downstream_refusal_frees_the_pools_slots) {
  refuser_.refuse = true;
  step_context ctx;
  const auto out = runner_admit(rstep({{"a", "main", 1}, {"b", "main", 1}}), ctx);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.failed_resource, "refuser");
  EXPECT_EQ(pool_->free_list(), (ints{3, 2, 1}));
  EXPECT_EQ(refuser_.rollbacks, 1);
}

TEST_F(recurrent_pool_rollback, a_held_slot_survives_a_downstream_refusal) {
  runner_run(rstep({{"a", "main", 5}}));
  fill_slot(*pool_, slot("a"), 21);
  refuser_.refuse = true;
  step_context ctx;
  ASSERT_FALSE(runner_admit(rstep({{"a", "main", 1}, {"b", "main", 5}}), ctx).ok());
  EXPECT_EQ(slot("a"), 1);
  EXPECT_TRUE(pool_->has_state("a"));
  EXPECT_TRUE(slot_holds(*pool_, 1, 21));
  EXPECT_FALSE(pool_->slot_of("b"));
  EXPECT_EQ(pool_->num_free_slots(), 2);
}

TEST_F(recurrent_pool_rollback, after_a_commit_rollback_frees_nothing) {
  runner_run(rstep({{"a", "main", 5}}));
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 1}});
  step_context ctx;
  runner_run(s, ctx);
  rollback(s, ctx);
  EXPECT_EQ(pool_->num_free_slots(), 1);
  EXPECT_TRUE(pool_->has_state("b"));
}

TEST_F(recurrent_pool_rollback, a_refused_full_admit_unwinds_what_its_pre_plan_reserved) {
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 1}});
  step_context ctx;
  stage(s, ctx);
  EXPECT_EQ(pool_->num_free_slots(), 1);
  refuser_.refuse = true;
  ASSERT_FALSE(runner_admit(s, ctx).ok());
  EXPECT_EQ(pool_->free_list(), (ints{3, 2, 1}));
  EXPECT_FALSE(pool_->slot_of("a"));
  EXPECT_FALSE(pool_->slot_of("b"));
  refuser_.refuse = false;
  runner_run(s, ctx);  // the stage is gone: planned inline
  EXPECT_EQ(slot("a"), 1);
}

TEST_F(recurrent_pool_rollback, a_request_removed_before_the_unwind_is_not_freed_twice) {
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}});
  step_context ctx;
  ASSERT_TRUE(admit(s, ctx).ok);
  pool_->remove_request("b");
  check();
  rollback(s, ctx);  // the invariants reject a duplicate on the free list
  auto sorted = pool_->free_list();
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (ints{1, 2, 3}));
}

TEST_F(recurrent_pool_rollback, a_discarded_pre_plan_restores_the_free_list_exactly) {
  runner_run(rstep({{"a", "main", 1}, {"b", "main", 1}}));
  pool_->remove_request("a");
  check();
  ASSERT_EQ(pool_->free_list(), (ints{3, 1}));
  step_context ctx;
  stage(rstep({{"b", "main", 1}, {"c", "main", 1}, {"d", "main", 1}}), ctx);
  EXPECT_EQ(pool_->num_free_slots(), 0);
  runner_->clear_preplan();
  check();
  EXPECT_EQ(pool_->free_list(), (ints{3, 1}));
  EXPECT_EQ(slot("b"), 2);  // held before the stage, kept
}

TEST_F(recurrent_pool_rollback, a_discarded_pre_plan_then_a_refused_admit_leaves_all_free) {
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 1}});
  step_context ctx;
  stage(s, ctx);
  runner_->clear_preplan();
  check();
  refuser_.refuse = true;
  ASSERT_FALSE(runner_admit(s, ctx).ok());
  EXPECT_EQ(pool_->free_list(), (ints{3, 2, 1}));
}

TEST_F(recurrent_pool_rollback, clearing_a_stage_keeps_a_live_steps_slots) {
  const auto live = rstep({{"a", "main", 1}, {"b", "main", 1}});
  step_context ctx;
  const auto b = bundle_of(live);
  ASSERT_TRUE(runner_->admit(b, ctx).ok());
  ASSERT_TRUE(runner_->plan(b, ctx));
  step_context next;
  stage(rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}}), next);
  EXPECT_EQ(pool_->num_free_slots(), 0);
  runner_->clear_preplan();
  check();
  EXPECT_EQ(pool_->free_list(), (ints{3}));
  EXPECT_EQ(slot("a"), 1);
  EXPECT_EQ(slot("b"), 2);
  ASSERT_TRUE(runner_->commit(b, ctx));
  check();
  fill_slot(*pool_, slot("a"), 5);
  pool_->remove_request("a");
  check();
  runner_run(rstep({{"d", "main", 1}}));
  EXPECT_EQ(slot("d"), 1);  // a's slot, the last freed
  EXPECT_TRUE(slot_holds(*pool_, 1, std::nullopt));
}

TEST_F(recurrent_pool_rollback, a_rolled_back_slot_the_forward_wrote_returns_zeroed) {
  const auto s = rstep({{"a", "main", 1}});
  step_context ctx;
  ASSERT_TRUE(admit(s, ctx).ok);
  fill_slot(*pool_, slot("a"), 7);
  rollback(s, ctx);  // the invariants check that free slots read zero
  EXPECT_EQ(pool_->free_list(), (ints{3, 2, 1}));
  EXPECT_TRUE(slot_holds(*pool_, 1, std::nullopt));
}

TEST_F(recurrent_pool_rollback, two_forking_requests_cannot_strand_each_others_fork_slot) {
  const auto both = rstep({{"a", "main", 3}, {"b", "main", 3}}, {}, {{"main", "draft"}});
  step_context ctx;
  const auto out = runner_admit(both, ctx);  // four slots wanted, three free
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.failed_resource, "rec");
  EXPECT_EQ(pool_->free_list(), (ints{3, 2, 1}));
  // Had a kept main+draft and b its main, neither could ever fork.
  runner_run(rstep({{"a", "main", 3}}, {}, {{"main", "draft"}}));
  EXPECT_EQ(pool_->num_free_slots(), 1);
  step_context again;
  ASSERT_FALSE(runner_admit(rstep({{"b", "main", 3}}, {}, {{"main", "draft"}}), again).ok());
  EXPECT_EQ(pool_->free_list(), (ints{3}));
  pool_->remove_request("a");
  check();
  runner_run(rstep({{"b", "main", 3}}, {}, {{"main", "draft"}}));
  EXPECT_TRUE(pool_->has_state("b", "draft"));
}

TEST_F(recurrent_pool_rollback, a_downstream_refusal_of_forking_requests_restores_the_order) {
  make(config_of(6, true, one_block()));
  runner_ = std::make_unique<step_runner>(step_runner::make({&refuser_, pool_.get()}).value());
  runner_run(rstep({{"x", "main", 1}, {"y", "main", 1}, {"z", "main", 1}}));
  pool_->remove_request("y");
  pool_->remove_request("x");
  check();
  ASSERT_EQ(pool_->free_list(), (ints{5, 4, 2, 1}));
  refuser_.refuse = true;
  step_context ctx;
  const auto s = rstep({{"a", "main", 3}, {"b", "main", 3}}, {{"main", "draft"}});
  ASSERT_FALSE(runner_admit(s, ctx).ok());
  EXPECT_EQ(pool_->free_list(), (ints{5, 4, 2, 1}));
}

}  // namespace
}  // namespace mstar::resources
