// The KV pool under the step runner beside another resource: a refusal
// anywhere leaves the KV free list exactly as before, and the smallest
// cached-prefix answer trims the KV lease (to a page's head when it
// matched that page whole).
#include <gtest/gtest.h>

#include "resources/step/step_runner.hpp"
#include "tests/resources/kv/kv_pool_fixture.hpp"
#include "tests/resources/step/counting_pool.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;
using test_support::counting_pool;
using test_support::pool_options;

class kv_with_runner : public kv_pool_test {
 protected:
  void SetUp() override { make(small_config(16, 32)); }
};

TEST_F(kv_with_runner, a_refusal_after_the_kv_pool_rolls_it_back_exactly) {
  std::vector<std::string> log;
  counting_pool slots{"slots", pool_options{}.with_slots(1).after({"kv"}), &log};
  auto runner = step_runner::make({&slots, pool_.get()}).value();
  ASSERT_EQ(runner.order().front()->key(), "kv");
  ASSERT_TRUE(run(step_of({{"a", "main", 20}})).ok);
  const auto before = pool_->pages().free_list();
  auto kv = std::make_shared<kv_step>(step_of({{"a", "main", 40}, {"b", "main", 30}}));
  auto other = std::make_shared<resource_step>();
  other->segments = kv->segments;  // two slots wanted, one free
  const step_bundle bundle{{"kv", kv}, {"slots", other}};
  step_context ctx;
  const auto out = runner.admit(bundle, ctx);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.failed_resource, "slots");
  check();
  EXPECT_EQ(pool_->pages().free_list(), before);
  EXPECT_EQ(info("a").pages.size(), 2u);
  EXPECT_FALSE(pool_->stream("b", "main").has_value());
}

TEST_F(kv_with_runner, the_smallest_cached_prefix_answer_cuts_the_kv_lease) {
  std::vector<std::string> log;
  counting_pool other{"other", pool_options{}.caching(40), &log};
  auto runner = step_runner::make({pool_.get(), &other}).value();
  pool_->ingest_request("a", {{"main", seed_for(prompt(100), 16)}});
  ASSERT_TRUE(run(step_of({{"a", "main", 100}})).ok);
  pool_->ingest_request("b", {{"main", seed_for(prompt(100), 16)}});
  // 40 tokens end inside page 2, which the KV pool matched whole: it keeps
  // pages 0-1 and the head of page 2 (slots 32-39), copied into a page of
  // b's own when the lease converts; pages 3-5 go back.
  EXPECT_EQ(runner.resolve_cached_prefix("b"), 40);
  EXPECT_EQ(info("b").leased_pages, 2);
  const auto a = info("a");
  EXPECT_EQ(pool_->pages().owners(a.pages[2]), 3);  // index, a and b's head
  EXPECT_EQ(pool_->pages().owners(a.pages[3]), 2);  // back to index + a
  check();
  ASSERT_TRUE(run(step_of({{"b", "main", 60}})).ok);
  EXPECT_EQ(info("b").stored_len, 100);
  EXPECT_NE(info("b").pages.at(2), a.pages[2]);
  EXPECT_EQ(pool_->pages().owners(a.pages[2]), 2);
  // A prompt that differs from slot 36: page 2 does not match, the KV pool
  // answers its two whole pages and the runner agrees on those.
  pool_->ingest_request("c", {{"main", seed_for(prompt(100, 36), 16)}});
  EXPECT_EQ(runner.resolve_cached_prefix("c"), 32);
  EXPECT_EQ(info("c").leased_pages, 2);
  check();
}

}  // namespace
}  // namespace mstar::resources
