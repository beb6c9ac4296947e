// The recurrent pool's prefix-reuse checkpoints (pool_checkpoints.cpp): a
// commit that lands a stream on a boundary copies its bytes into a
// checkpoint slot under the page key ending there; resolve answers the
// deepest checkpointed boundary short of the prompt's end and leases it;
// apply copies it into the request's slot when the agreed length is that
// boundary and otherwise answers the deepest checkpointed boundary below;
// eviction takes the least recently used single-use checkpoint first.
// Every call is followed by the invariant check (the fixture's driver).
#include <gtest/gtest.h>

#include "resources/kv/kv_pool.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources::test {
namespace {

class checkpoint_test : public recurrent_pool_test {
 protected:
  void SetUp() override {
    auto c = config_of(6, true, tiny_blocks());
    c.checkpoint_slots = 3;
    c.checkpoint_stride = 4;
    c.checkpoint_page_size = 4;
    make(c);
  }

  static kv_prefix_seed seed_of(std::vector<token_id> ids) {
    std::vector<prompt_span> spans{id_span{std::move(ids)}};
    return make_prefix_seed(key_prompt(spans, 4).value(), 4);
  }

  // Registers `rid` with `ids` and runs its prefill in `chunks`, the slot
  // holding pattern `first + i` after chunk i (as a kernel would write it).
  void prefill(const request_id& rid, const std::vector<token_id>& ids,
               const std::vector<std::int64_t>& chunks, std::uint32_t first) {
    const auto seed = seed_of(ids);
    pool_->ingest_request(rid, &seed);
    check();
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const auto s = rstep({{rid, "main", chunks[i]}});
      step_context ctx;
      ASSERT_TRUE(admit(s, ctx).ok);
      (void)plan(s, ctx);
      fill_slot(*pool_, *pool_->slot_of(rid), first + static_cast<std::uint32_t>(i));
      commit(s, ctx);
    }
  }
};

std::vector<token_id> ids_from(token_id first, std::size_t n) {
  std::vector<token_id> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = first + static_cast<token_id>(i);
  return ids;
}

TEST_F(checkpoint_test, a_new_request_resumes_from_the_deepest_boundary_with_its_bytes) {
  const auto a = ids_from(10, 12);
  prefill("a", a, {4, 4, 3}, 100);  // boundaries 4 and 8 (11 is none)
  EXPECT_EQ(pool_->checkpoints().captured, 2);
  auto b = std::vector<token_id>(a.begin(), a.begin() + 10);
  b.push_back(999);
  const auto seed = seed_of(b);
  pool_->ingest_request("b", &seed);
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 8);
  EXPECT_EQ(pool_->checkpoints().leased, 1);
  EXPECT_EQ(pool_->apply_cached_prefix("b", 8), 8);
  check();
  ASSERT_TRUE(pool_->slot_of("b").has_value());
  EXPECT_TRUE(pool_->has_state("b"));
  EXPECT_TRUE(slot_holds(*pool_, *pool_->slot_of("b"), 101)) << "the state after 8 tokens";
  EXPECT_EQ(pool_->checkpoints().leased, 0);
  EXPECT_EQ(pool_->checkpoints().hit_tokens, 8);
  pool_->remove_request("b");
  pool_->remove_request("a");
  check();
}

TEST_F(checkpoint_test, apply_below_the_lease_answers_the_deepest_checkpoint_below_it) {
  const auto a = ids_from(10, 13);
  prefill("a", a, {4, 4, 4, 1}, 200);  // boundaries 4, 8, 12
  const auto seed = seed_of(ids_from(10, 14));
  pool_->ingest_request("c", &seed);
  EXPECT_EQ(pool_->resolve_cached_prefix("c"), 12);
  // The KV pool matched only 6 tokens: the pool can resume at 4, no deeper.
  EXPECT_EQ(pool_->apply_cached_prefix("c", 6), 4);
  EXPECT_FALSE(pool_->slot_of("c").has_value()) << "nothing copied for a length it cannot keep";
  EXPECT_EQ(pool_->checkpoints().leased, 0);
  EXPECT_EQ(pool_->apply_cached_prefix("c", 4), 4);
  EXPECT_TRUE(slot_holds(*pool_, *pool_->slot_of("c"), 200));
  // Agreeing on nothing resumes nothing.
  const auto d_seed = seed_of(ids_from(10, 14));
  pool_->ingest_request("d", &d_seed);
  EXPECT_EQ(pool_->resolve_cached_prefix("d"), 12);
  EXPECT_EQ(pool_->apply_cached_prefix("d", 0), 0);
  EXPECT_FALSE(pool_->slot_of("d").has_value());
  EXPECT_EQ(pool_->checkpoints().leased, 0);
  check();
}

TEST_F(checkpoint_test, single_use_checkpoints_leave_before_shared_ones_and_leases_stay) {
  const auto shared = ids_from(10, 9);
  prefill("a", shared, {4, 4, 1}, 300);  // 4, 8
  prefill("b", shared, {4, 4, 1}, 300);  // the same keys: both now used twice
  EXPECT_EQ(pool_->checkpoints().held, 2);
  EXPECT_EQ(pool_->checkpoints().captured, 2);
  // Three single-use boundaries of another prompt: one free slot, then the
  // newest single-use ones make way for each other; the shared ones stay.
  prefill("e", ids_from(100, 13), {4, 4, 4, 1}, 400);
  EXPECT_EQ(pool_->checkpoints().held, 3);
  const auto seed = seed_of(ids_from(10, 10));
  pool_->ingest_request("f", &seed);
  EXPECT_EQ(pool_->resolve_cached_prefix("f"), 8) << "the shared prefix's checkpoint survived";
  // A leased checkpoint is never evicted: fill the rest with new captures.
  prefill("g", ids_from(200, 13), {4, 4, 4, 1}, 500);
  EXPECT_EQ(pool_->apply_cached_prefix("f", 8), 8);
  EXPECT_TRUE(slot_holds(*pool_, *pool_->slot_of("f"), 301));
  check();
}

// "Look: " (7 ids), an image of 4 slots ending at slot 11 (inside page 2),
// then 5 ids from `after`, the first (slot 11) shared.
kv_prefix_seed image_seed(token_id after) {
  std::vector<token_id> rest{500};
  for (token_id i = 1; i < 5; ++i)
    rest.push_back(after + i);
  std::vector<prompt_span> spans{id_span{ids_from(100, 7)},
                                 item_span{4, std::vector<std::uint8_t>(32, 0x11)}, id_span{rest}};
  return make_prefix_seed(key_prompt(spans, 4).value(), 4);
}

// A request resumed at the image's end in one round of the agreement, then
// given less (the KV pool could not keep it): no checkpoint lies at or
// below 8, so the pool answers 0, and the state it copied in must not stay
// behind (the request would run from slot 0 on the state after slot 11).
TEST_F(checkpoint_test, a_resume_undone_by_a_smaller_agreement_leaves_no_state) {
  const auto a = image_seed(600);
  pool_->ingest_request("a", &a);
  for (const std::int64_t chunk : {11, 5}) {  // the image's end, then 16: no 4, 8 or 12
    const auto s = rstep({{"a", "main", chunk}});
    step_context ctx;
    ASSERT_TRUE(admit(s, ctx).ok);
    (void)plan(s, ctx);
    fill_slot(*pool_, *pool_->slot_of("a"), static_cast<std::uint32_t>(700 + chunk));
    commit(s, ctx);
  }
  EXPECT_EQ(pool_->checkpoints().captured, 2);
  const auto b = image_seed(900);
  pool_->ingest_request("b", &b);
  EXPECT_EQ(pool_->resolve_cached_prefix("b"), 11);
  EXPECT_EQ(pool_->apply_cached_prefix("b", 11), 11);
  EXPECT_TRUE(slot_holds(*pool_, *pool_->slot_of("b"), 711));
  check();
  EXPECT_EQ(pool_->apply_cached_prefix("b", 8), 0);
  EXPECT_FALSE(pool_->has_state("b"));
  EXPECT_FALSE(pool_->slot_of("b").has_value()) << "the slot the resume took is given back";
  EXPECT_EQ(pool_->apply_cached_prefix("b", 0), 0);
  EXPECT_EQ(pool_->checkpoints().leased, 0);
  EXPECT_EQ(pool_->checkpoints().hits, 0) << "nothing was reused";
  check();
  // Resumed again at 11, the request runs on from there.
  EXPECT_EQ(pool_->apply_cached_prefix("b", 11), 11);
  EXPECT_TRUE(slot_holds(*pool_, *pool_->slot_of("b"), 711));
  pool_->remove_request("b");
  pool_->remove_request("a");
  check();
}

TEST_F(checkpoint_test, a_config_with_checkpoints_needs_a_stride_of_whole_pages) {
  auto c = config_of(6, true, tiny_blocks());
  c.checkpoint_slots = 2;
  c.checkpoint_page_size = 4;
  c.checkpoint_stride = 6;
  const auto made = recurrent_state_pool::make("rec", c);
  ASSERT_FALSE(made.has_value());
  EXPECT_NE(made.error().message().find("checkpoint_stride 6"), std::string::npos)
      << made.error().message();
  c.checkpoint_stride = 8;
  EXPECT_TRUE(recurrent_state_pool::make("rec", c).has_value());
  EXPECT_EQ(c.total_bytes(), c.slot_bytes() * 8) << "6 slots and 2 checkpoints";
}

}  // namespace
}  // namespace mstar::resources::test
