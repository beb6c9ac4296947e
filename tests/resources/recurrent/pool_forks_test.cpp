// The recurrent state pool's forks (byte copies of every layer and block,
// reserved at admit, copied at plan or commit) and its addressing buffers:
// captured graphs' static ones and recycled eager plans.
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "resources/recurrent/pool.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;
using ints = std::vector<std::int32_t>;
using flags = std::vector<std::uint8_t>;

class recurrent_pool_forks : public recurrent_pool_test {
 protected:
  // `a` with committed state on main, its slot holding pattern 11.
  void SetUp() override {
    recurrent_pool_test::SetUp();
    run(rstep({{"a", "main", 6}}));
    fill_slot(*pool_, slot("a"), 11);
  }
};

TEST_F(recurrent_pool_forks, a_pre_fork_reserves_at_admit_and_copies_everything_at_plan) {
  const auto s = rstep({{"a", "main", 1}}, {{"main", "draft"}});
  step_context ctx;
  ASSERT_TRUE(admit(s, ctx).ok);
  EXPECT_EQ(pool_->num_free_slots(), 3);  // the target is reserved now
  const auto draft = slot("a", "draft");
  EXPECT_TRUE(slot_holds(*pool_, draft, std::nullopt));
  EXPECT_FALSE(pool_->has_state("a", "draft"));
  const auto p = plan(s, ctx);
  EXPECT_TRUE(slot_holds(*pool_, draft, 11));  // every layer, every block
  EXPECT_TRUE(pool_->has_state("a", "draft"));
  EXPECT_EQ(pool_->generation("a", "draft"), 1U);
  EXPECT_FALSE(p->addressing("draft"));  // forked, not addressed
  fill_slot(*pool_, slot("a"), 12);      // the forward writes main after the copy
  commit(s, ctx);
  EXPECT_TRUE(slot_holds(*pool_, draft, 11));
  EXPECT_TRUE(slot_holds(*pool_, slot("a"), 12));
}

TEST_F(recurrent_pool_forks, a_post_fork_copies_what_the_forward_wrote_at_commit) {
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 4}}, {}, {{"main", "draft"}});
  step_context ctx;
  ASSERT_TRUE(admit(s, ctx).ok);
  EXPECT_EQ(pool_->num_free_slots(), 1);  // b/main and both drafts
  plan(s, ctx);
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "draft"), std::nullopt));
  EXPECT_EQ(pool_->generation("a", "draft"), 0U);
  fill_slot(*pool_, slot("a"), 13);
  fill_slot(*pool_, slot("b"), 14);
  commit(s, ctx);
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "draft"), 13));
  EXPECT_TRUE(slot_holds(*pool_, slot("b", "draft"), 14));
  // b's first step set has_state before its fork copied it.
  EXPECT_TRUE(pool_->has_state("b", "draft"));
  EXPECT_EQ(pool_->generation("b", "draft"), 1U);
}

TEST_F(recurrent_pool_forks, fork_rids_limit_which_requests_fork) {
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 3}}, {}, {{"main", "draft"}},
                       std::vector<request_id>{"a"});
  run(s);
  EXPECT_TRUE(pool_->has_state("a", "draft"));
  EXPECT_FALSE(pool_->slot_of("b", "draft"));
  EXPECT_EQ(pool_->num_free_slots(), 2);
}

TEST_F(recurrent_pool_forks, padding_and_capture_rows_never_fork) {
  step_context padded;
  padded.padding_rows = {"pad"};
  run(rstep({{"a", "main", 1}, {"pad", "main", 1}}, {{"main", "draft"}}), padded);
  EXPECT_FALSE(pool_->slot_of("pad", "draft"));
  EXPECT_EQ(pool_->generation("a", "draft"), 1U);
  step_context capture;
  capture.capture = true;
  run(rstep({{"a", "main", 1}}, {{"main", "draft"}}, {{"main", "spare"}}), capture);
  EXPECT_EQ(pool_->generation("a", "draft"), 1U);
  EXPECT_FALSE(pool_->slot_of("a", "spare"));
}

TEST_F(recurrent_pool_forks, a_fork_from_a_label_without_a_slot_copies_nothing) {
  run(rstep({{"a", "main", 1}}, {{"other", "draft"}}));
  EXPECT_TRUE(pool_->slot_of("a", "draft"));  // reserved all the same
  EXPECT_EQ(pool_->generation("a", "draft"), 0U);
  EXPECT_FALSE(pool_->has_state("a", "draft"));
}

TEST_F(recurrent_pool_forks, chained_pre_forks_copy_in_order) {
  const auto p =
      run(rstep({{"a", "main", 1}, {"a", "spare", 1}}, {{"main", "draft"}, {"draft", "spare"}}));
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "draft"), 11));
  EXPECT_TRUE(slot_holds(*pool_, slot("a", "spare"), 11));
  EXPECT_EQ(pool_->generation("a", "spare"), 1U);
  EXPECT_EQ(rows(p, "spare").has_state, (flags{1}));  // resumes from the copy
}

TEST_F(recurrent_pool_forks, a_full_pool_refuses_a_fork_target_taking_nothing) {
  run(rstep({{"b", "main", 1}, {"c", "main", 1}, {"d", "main", 1}}));
  const auto before = pool_->free_list();
  step_context ctx;
  const auto out = admit(rstep({{"a", "main", 1}, {"e", "main", 1}}, {{"main", "draft"}}), ctx);
  ASSERT_FALSE(out.ok);
  EXPECT_EQ(std::get<allocation_failed>(*out.reason).label, "draft");
  EXPECT_EQ(std::get<allocation_failed>(*out.reason).rid, "a");
  EXPECT_EQ(pool_->free_list(), before);
  EXPECT_FALSE(pool_->slot_of("e"));
}

TEST_F(recurrent_pool_forks, a_fork_target_admit_never_reserved_fails_without_a_change) {
  step_context ctx;
  const auto pre = rstep({{"a", "main", 1}}, {{"main", "draft"}});
  const auto planned = pool_->plan(pre, ctx);
  ASSERT_FALSE(planned);
  EXPECT_NE(planned.error().message().find("fork target a/draft was never reserved"),
            std::string::npos);
  pool_->reset_request("a", false);
  check();
  const auto post = rstep({{"a", "main", 1}}, {}, {{"main", "draft"}});
  ASSERT_FALSE(pool_->commit(post, ctx));
  EXPECT_FALSE(pool_->has_state("a"));  // refused before marking anything
  check();
}

TEST_F(recurrent_pool_test, captured_buffers_keep_their_address_and_rewrite_the_tail) {
  pool_->build_accelerator_graph_buffers(2, 4, 1024);
  pool_->build_accelerator_graph_buffers(2, 2, 1024);  // a smaller runner: the largest wins
  step_context ctx;
  ctx.lease = graph_lease{0, 2};
  const auto two = run(rstep({{"a", "main", 3}, {"b", "main", 3}}), ctx);
  const auto& r2 = rows(two);
  ASSERT_NE(r2.graph_slot_indices, nullptr);
  EXPECT_EQ(r2.num_rows, 2);
  EXPECT_EQ(r2.slot_indices, (ints{1, 2, 0, 0}));
  EXPECT_EQ(ints(r2.graph_slot_indices, r2.graph_slot_indices + 4), (ints{1, 2, 0, 0}));
  const auto* address = r2.graph_slot_indices;
  const auto one = run(rstep({{"b", "main", 1}}), ctx);
  const auto& r1 = rows(one);
  EXPECT_EQ(r1.graph_slot_indices, address);                  // a graph holds this address
  EXPECT_EQ(ints(address, address + 4), (ints{2, 0, 0, 0}));  // the tail is rewritten
  EXPECT_EQ(flags(r1.graph_has_state, r1.graph_has_state + 4), (flags{1, 0, 0, 0}));
  EXPECT_EQ(r1.slot_indices, (ints{2, 0, 0, 0}));
  step_context other_slot;
  other_slot.lease = graph_lease{1, 2};
  EXPECT_NE(rows(run(rstep({{"b", "main", 1}}), other_slot)).graph_slot_indices, address);
}

TEST_F(recurrent_pool_test, a_captured_buffer_is_as_long_as_the_most_rows_it_may_see) {
  step_context ctx;
  ctx.lease = graph_lease{0, 2};
  const auto p = run(rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}}), ctx);
  EXPECT_EQ(rows(p).slot_indices.size(), 3U);  // no batch announced: the rows decide
  pool_->build_accelerator_graph_buffers(1, 8, 1);
  step_context wide;
  wide.lease = graph_lease{0, 4};
  EXPECT_EQ(rows(run(rstep({{"a", "main", 1}}), wide)).slot_indices.size(), 8U);
}

TEST_F(recurrent_pool_test, more_rows_than_a_captured_buffer_holds_is_an_error_before_any_copy) {
  pool_->build_accelerator_graph_buffers(1, 2, 1);
  step_context ctx;
  ctx.lease = graph_lease{0, 2};
  run(rstep({{"a", "main", 1}, {"b", "main", 1}}), ctx);
  const auto s = rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}}, {{"main", "draft"}},
                       {}, std::vector<request_id>{"a"});
  ASSERT_TRUE(admit(s, ctx).ok);
  const auto planned = pool_->plan(s, ctx);
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.error().code(), errc::out_of_range);
  EXPECT_NE(planned.error().message().find("holds 2"), std::string::npos);
  EXPECT_EQ(pool_->generation("a", "draft"), 0U);  // no fork was copied
  rollback(s, ctx);
  EXPECT_EQ(pool_->num_free_slots(), 3);
}

TEST_F(recurrent_pool_test, eager_plans_are_exact_and_recycled_once_released) {
  auto first = run(rstep({{"a", "main", 2}, {"b", "main", 2}}));
  const auto& r = rows(first);
  EXPECT_EQ(r.graph_slot_indices, nullptr);
  EXPECT_EQ(r.slot_indices, (ints{1, 2}));
  // A plan still held is never rewritten.
  const auto second = run(rstep({{"b", "main", 1}}));
  EXPECT_NE(second.get(), first.get());
  EXPECT_EQ(rows(first).slot_indices, (ints{1, 2}));
  const auto* recycled = first.get();
  first.reset();
  const auto third = run(rstep({{"a", "main", 1}}));
  EXPECT_EQ(third.get(), recycled);
  EXPECT_EQ(rows(third).slot_indices, (ints{1}));
  EXPECT_EQ(rows(third).has_state, (flags{1}));
}

}  // namespace
}  // namespace mstar::resources
