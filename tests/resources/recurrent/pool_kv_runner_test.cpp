// A KV pool and a recurrent state pool under one step runner (a hybrid
// model's attention and linear-attention layers): whichever refuses, in
// either order, both pools are left exactly as before the admit.
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "resources/step/step_runner.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;

kv_pool_config kv_config() {
  kv_pool_config c;
  c.geometry.page_size = 8;
  c.max_num_pages = 8;  // 7 pages beside the sink: 56 tokens
  c.geometry.num_layers = 2;
  c.geometry.num_kv_heads = 1;
  c.geometry.head_dim = 4;
  c.geometry.dtype = dtype::float32;
  return c;
}

// Everything a refusal must leave alone, in both pools.
struct snapshot {
  std::vector<page_id> kv_free;
  std::vector<std::int32_t> rec_free;
  std::vector<std::optional<std::int32_t>> rec_slots;
  std::vector<std::pair<std::int64_t, std::vector<page_id>>> kv_streams;  // length -1: none
  friend bool operator==(const snapshot&, const snapshot&) = default;
};

class recurrent_with_kv : public ::testing::Test {
 protected:
  void SetUp() override {
    kv_ = kv_pool::make("kv", kv_config(), "test-model").value();
    rec_ = recurrent_state_pool::make("rec", config_of(4, true, tiny_blocks())).value();
  }

  void check() {
    const auto kv_ok = kv_->check_invariants();
    ASSERT_TRUE(kv_ok.has_value()) << kv_ok.error().message();
    const auto rec_ok = rec_->check_invariants();
    ASSERT_TRUE(rec_ok.has_value()) << rec_ok.error().message();
  }

  snapshot take() const {
    snapshot s{kv_->pages().free_list(), rec_->free_list(), {}, {}};
    for (const auto* rid : {"a", "b", "c", "d"}) {
      s.rec_slots.push_back(rec_->slot_of(rid));
      const auto st = kv_->stream(rid, "main");
      s.kv_streams.emplace_back(st ? st->stored_len : -1, st ? st->pages : std::vector<page_id>{});
    }
    return s;
  }

  static step_bundle bundle_of(std::vector<segment> segs) {
    auto kv = std::make_shared<kv_step>();
    kv->segments = segs;
    auto rec = std::make_shared<recurrent_step>();
    rec->segments = segs;
    auto other = std::make_shared<resource_step>();
    other->segments = std::move(segs);
    return {{"kv", kv}, {"rec", rec}, {"refuser", other}};
  }

  // a: 10 tokens, committed in both pools, with a recognisable state.
  void prepare(step_runner& runner) {
    const auto b = bundle_of({{"a", "main", 10}});
    step_context ctx;
    ASSERT_TRUE(runner.admit(b, ctx).ok());
    ASSERT_TRUE(runner.plan(b, ctx));
    ASSERT_TRUE(runner.commit(b, ctx));
    fill_slot(*rec_, rec_->slot_of("a").value(), 31);
    check();
  }

  std::unique_ptr<kv_pool> kv_;
  std::unique_ptr<recurrent_state_pool> rec_;
  refusing_resource refuser_{"refuser", {"kv", "rec"}};
};

TEST_F(recurrent_with_kv, kv_refusing_after_the_recurrent_pool_leaves_both_as_before) {
  auto runner = step_runner::make({&refuser_, rec_.get(), kv_.get()}).value();
  ASSERT_EQ(runner.order()[0]->key(), "rec");
  prepare(runner);
  const auto before = take();
  step_context ctx;
  // The recurrent pool has room for b and c; the KV pool lacks b's 60 tokens.
  const auto out =
      runner.admit(bundle_of({{"a", "main", 1}, {"b", "main", 60}, {"c", "main", 1}}), ctx);
  check();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.failed_resource, "kv");
  EXPECT_TRUE(std::holds_alternative<allocation_failed>(*out.outcome.reason));
  EXPECT_EQ(take(), before);
  EXPECT_TRUE(rec_->has_state("a"));
  EXPECT_TRUE(slot_holds(*rec_, rec_->slot_of("a").value(), 31));
}

TEST_F(recurrent_with_kv, the_recurrent_pool_refusing_after_kv_leaves_both_as_before) {
  auto runner = step_runner::make({&refuser_, kv_.get(), rec_.get()}).value();
  ASSERT_EQ(runner.order()[0]->key(), "kv");
  prepare(runner);
  const auto before = take();
  step_context ctx;
  // KV has pages for all four; the recurrent pool has three usable slots.
  const auto out = runner.admit(
      bundle_of({{"a", "main", 1}, {"b", "main", 5}, {"c", "main", 5}, {"d", "main", 5}}), ctx);
  check();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.failed_resource, "rec");
  EXPECT_EQ(std::get<allocation_failed>(*out.outcome.reason).rid, "d");
  EXPECT_EQ(take(), before);
  EXPECT_TRUE(slot_holds(*rec_, rec_->slot_of("a").value(), 31));
}

TEST_F(recurrent_with_kv, a_refusal_after_both_pools_leaves_both_as_before) {
  for (const bool kv_first : {true, false}) {
    SCOPED_TRACE(kv_first ? "kv first" : "recurrent first");
    SetUp();
    auto runner = kv_first ? step_runner::make({&refuser_, kv_.get(), rec_.get()}).value()
                           : step_runner::make({&refuser_, rec_.get(), kv_.get()}).value();
    prepare(runner);
    const auto before = take();
    refuser_.refuse = true;
    step_context ctx;
    const auto out = runner.admit(bundle_of({{"a", "main", 1}, {"b", "main", 20}}), ctx);
    refuser_.refuse = false;
    check();
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.failed_resource, "refuser");
    EXPECT_EQ(take(), before);
  }
}

}  // namespace
}  // namespace mstar::resources
