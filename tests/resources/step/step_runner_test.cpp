#include "resources/step/step_runner.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tests/resources/step/counting_pool.hpp"

namespace mstar::resources {
namespace {

using test_support::counting_pool;
using test_support::pool_plan;
using opts = test_support::pool_options;
using test_support::keys_of;
using test_support::runner_of;
using test_support::step_of;
using test_support::strings;

TEST(step_runner, admits_every_resource_in_order_when_all_have_room) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.after({"a"}), &log};
  step_runner runner = runner_of({&b, &a});
  step_context ctx;
  const auto admitted = runner.admit({{"a", step_of({1, 0, 2})}, {"b", step_of({3})}}, ctx);
  EXPECT_TRUE(admitted.ok());
  EXPECT_TRUE(admitted.ready());
  EXPECT_EQ(admitted.failed_resource, "");
  EXPECT_EQ(log, (strings{"a.admit", "b.admit"}));
  EXPECT_EQ(a.free_list(), (std::vector<int>{3, 2}));
  EXPECT_EQ(b.free_list(), (std::vector<int>{3, 2, 1}));
  a.expect_conserved();
  b.expect_conserved();
}

TEST(step_runner, leaves_out_resources_the_bundle_does_not_name) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", {}, &log};
  step_runner runner = runner_of({&a, &b});
  step_context ctx;
  const step_bundle bundle{{"b", step_of({1})}};
  EXPECT_TRUE(runner.admit(bundle, ctx).ok());
  ASSERT_TRUE(runner.plan(bundle, ctx));
  ASSERT_TRUE(runner.commit(bundle, ctx));
  EXPECT_EQ(log, (strings{"b.admit", "b.plan", "b.commit"}));
  EXPECT_EQ(a.free_list().size(), 4U);
}

TEST(step_runner, rolls_back_every_admitted_resource_when_a_later_one_refuses) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.after({"a"}), &log};
  counting_pool c{"c", opts{}.with_slots(1).after({"b"}), &log};
  counting_pool d{"d", opts{}.after({"c"}), &log};
  step_runner runner = runner_of({&a, &b, &c, &d});
  step_context ctx;
  const std::vector<std::vector<int>> before{a.free_list(), b.free_list(), c.free_list(),
                                             d.free_list()};
  const auto spans = step_of({1, 2, 1});
  const auto refused = runner.admit({{"a", spans}, {"b", spans}, {"c", spans}, {"d", spans}}, ctx);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(refused.ready());
  EXPECT_EQ(refused.failed_resource, "c");
  const auto* short_of = std::get_if<allocation_failed>(&*refused.outcome.reason);
  ASSERT_NE(short_of, nullptr);
  EXPECT_EQ(short_of->pages_short, 2);
  EXPECT_EQ(short_of->rid, "r1");
  EXPECT_EQ(log,
            (strings{"a.admit", "b.admit", "c.admit", "c.rollback", "b.rollback", "a.rollback"}));
  const std::vector<std::vector<int>> after{a.free_list(), b.free_list(), c.free_list(),
                                            d.free_list()};
  EXPECT_EQ(after, before);
}

TEST(step_runner, reports_ready_only_when_every_resource_is_ready) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.waiting(), &log};
  step_runner runner = runner_of({&a, &b});
  step_context ctx;
  const auto waiting = runner.admit({{"a", step_of({1})}, {"b", step_of({1})}}, ctx);
  EXPECT_TRUE(waiting.ok());
  EXPECT_FALSE(waiting.ready());
  EXPECT_EQ(log, (strings{"a.admit", "b.admit"}));
  const auto ready = runner.admit({{"a", step_of({1})}}, ctx);
  EXPECT_TRUE(ready.ready());
}

TEST(step_runner, refuses_a_bundle_naming_a_resource_it_does_not_hold) {
  strings log;
  counting_pool a{"a", {}, &log};
  step_runner runner = runner_of({&a});
  step_context ctx;
  const step_bundle bundle{{"a", step_of({1})}, {"ghost", step_of({1})}};
  const auto refused = runner.admit(bundle, ctx);
  EXPECT_FALSE(refused.ok());
  ASSERT_TRUE(std::holds_alternative<admit_runtime_error>(*refused.outcome.reason));
  EXPECT_EQ(refusal_message(*refused.outcome.reason),
            "step bundle names resource \"ghost\", which this runner does not hold");
  const auto planned = runner.plan(bundle, ctx);
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.error().code(), errc::invalid_argument);
  EXPECT_FALSE(runner.commit({{"a", nullptr}}, ctx));
  EXPECT_TRUE(log.empty()) << "a resource was called for a malformed bundle";
}

TEST(step_runner, plans_in_order_and_lets_a_dependent_read_its_dependency_plan) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.after({"a"}), &log};
  step_runner runner = runner_of({&b, &a});
  step_context ctx;
  ctx.plan_results["stale"] = std::make_shared<pool_plan>();
  const step_bundle bundle{{"a", step_of({1, 1})}, {"b", step_of({1})}};
  ASSERT_TRUE(runner.admit(bundle, ctx).ok());
  ASSERT_TRUE(runner.plan(bundle, ctx));
  EXPECT_EQ(log, (strings{"a.admit", "b.admit", "a.plan", "b.plan"}));
  ASSERT_EQ(ctx.plan_results.size(), 2U);
  const auto& a_plan = dynamic_cast<const pool_plan&>(*ctx.plan_results.at("a"));
  const auto& b_plan = dynamic_cast<const pool_plan&>(*ctx.plan_results.at("b"));
  EXPECT_EQ(a_plan.slots, (std::vector<int>{0, 1}));
  EXPECT_EQ(b_plan.slots, (std::vector<int>{0}));
  EXPECT_EQ(b_plan.dependency_slots.at("a"), a_plan.slots);
}

TEST(step_runner, stops_planning_at_the_first_error_and_names_the_resource) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.failing_plan(), &log};
  counting_pool c{"c", {}, &log};
  step_runner runner = runner_of({&a, &b, &c});
  step_context ctx;
  const auto step = step_of({1});
  const auto planned = runner.plan({{"a", step}, {"b", step}, {"c", step}}, ctx);
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.error(), error(errc::out_of_range, "b: plan fails on purpose"));
  EXPECT_EQ(log, (strings{"a.plan", "b.plan"}));
  EXPECT_TRUE(ctx.plan_results.contains("a"));
  EXPECT_FALSE(ctx.plan_results.contains("b"));
}

TEST(step_runner, commits_in_order_and_stops_at_the_first_error) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.after({"a"}), &log};
  counting_pool c{"c", opts{}.after({"b"}), &log};
  step_runner runner = runner_of({&c, &b, &a});
  step_context ctx;
  const auto step = step_of({1});
  const step_bundle bundle{{"a", step}, {"b", step}, {"c", step}};
  ASSERT_TRUE(runner.commit(bundle, ctx));
  EXPECT_EQ(log, (strings{"a.commit", "b.commit", "c.commit"}));
  log.clear();
  b.options.fail_commit = true;
  const auto committed = runner.commit(bundle, ctx);
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().message(), "b: commit fails on purpose");
  EXPECT_EQ(log, (strings{"a.commit", "b.commit"}));
}

TEST(step_runner, pre_admits_and_pre_plans_only_the_preplanning_resources) {
  strings log;
  counting_pool a{"a", opts{}.preplanning(), &log};
  counting_pool b{"b", opts{}.after({"a"}).preplanning(), &log};
  counting_pool c{"c", opts{}.after({"a"}), &log};
  step_runner runner = runner_of({&c, &b, &a});
  EXPECT_EQ(keys_of(runner.preplan_order()), (strings{"a", "b"}));
  step_context ctx;
  const auto step = step_of({1, 1});
  const step_bundle bundle{{"a", step}, {"b", step}, {"c", step}};
  EXPECT_TRUE(runner.pre_admit(bundle, ctx).ok());
  EXPECT_FALSE(ctx.is_preplan);
  ASSERT_TRUE(runner.pre_plan(bundle, ctx));
  EXPECT_FALSE(ctx.is_preplan);
  EXPECT_EQ(log, (strings{"a.admit(pre)", "b.admit(pre)", "a.plan(pre)", "b.plan(pre)"}));
  EXPECT_EQ(a.free_list().size(), 2U);
  EXPECT_EQ(c.free_list().size(), 4U);
  // The full admit finds a's and b's stage and takes nothing more.
  EXPECT_TRUE(runner.admit(bundle, ctx).ok());
  EXPECT_EQ(a.free_list().size(), 2U);
  EXPECT_EQ(c.free_list().size(), 2U);
  ctx.is_preplan = true;
  ASSERT_TRUE(runner.pre_plan(bundle, ctx));
  EXPECT_TRUE(ctx.is_preplan) << "the caller's flag was not restored";
}

TEST(step_runner, clears_the_stage_of_the_preplanning_resources_only) {
  strings log;
  counting_pool a{"a", opts{}.preplanning(), &log};
  counting_pool c{"c", {}, &log};
  step_runner runner = runner_of({&a, &c});
  step_context ctx;
  const std::vector<int> before = a.free_list();
  ASSERT_TRUE(runner.pre_admit({{"a", step_of({1, 1, 1})}, {"c", step_of({1})}}, ctx).ok());
  runner.clear_preplan();
  EXPECT_EQ(log, (strings{"a.admit(pre)", "a.clear_preplan"}));
  EXPECT_EQ(a.free_list(), before);
}

TEST(step_runner, agrees_the_smallest_cached_prefix_and_tells_only_those_that_answered) {
  strings log;
  counting_pool a{"a", opts{}.caching(7), &log};
  counting_pool b{"b", {}, &log};
  counting_pool c{"c", opts{}.caching(3), &log};
  step_runner runner = runner_of({&a, &b, &c});
  EXPECT_EQ(runner.resolve_cached_prefix("r0"), 3);
  EXPECT_EQ(a.applied, 3);
  EXPECT_EQ(b.applied, std::nullopt);
  EXPECT_EQ(c.applied, 3);
}

TEST(step_runner, agrees_no_cached_prefix_when_no_resource_has_an_opinion) {
  strings log;
  counting_pool a{"a", {}, &log};
  step_runner runner = runner_of({&a});
  EXPECT_EQ(runner.resolve_cached_prefix("r0"), std::nullopt);
  EXPECT_EQ(a.applied, std::nullopt);
}

TEST(step_runner, fans_request_lifecycle_out_to_every_resource_dependents_released_first) {
  strings log;
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.after({"a"}), &log};
  step_runner runner = runner_of({&b, &a});
  step_context ctx;
  const auto step = step_of({1});
  ASSERT_TRUE(runner.admit({{"a", step}, {"b", step}}, ctx).ok());
  ASSERT_TRUE(runner.commit({{"a", step}, {"b", step}}, ctx));
  log.clear();
  runner.ingest_request("r0");
  runner.reset_request("r0", false);
  runner.reset_request("r0", true);
  runner.remove_request("r0");
  EXPECT_EQ(log, (strings{"a.ingest r0", "b.ingest r0", "b.reset r0", "a.reset r0",
                          "b.reset r0 free", "a.reset r0 free", "b.remove r0", "a.remove r0"}));
  EXPECT_EQ(a.free_list().size(), 4U);
  a.expect_conserved();
  b.expect_conserved();
}

// A step for a random subset of `pools` (closed over dependencies, which
// come earlier in `pools`): 1-3 segments of span 0-2 over requests q0-q5.
step_bundle random_bundle(std::mt19937& rng, const std::vector<counting_pool*>& pools) {
  std::set<std::string> chosen;
  for (auto pool = pools.rbegin(); pool != pools.rend(); ++pool) {
    if (rng() % 5 == 0 && !chosen.contains((*pool)->key()))
      continue;
    chosen.insert((*pool)->key());
    for (const std::string& dep : (*pool)->depends_on())
      chosen.insert(dep);
  }
  step_bundle bundle;
  for (const std::string& key : chosen) {
    auto step = std::make_shared<resource_step>();
    for (auto s = 1 + rng() % 3; s > 0; --s)
      step->segments.push_back(
          {'q' + std::to_string(rng() % 6), "main", static_cast<std::int64_t>(rng() % 3)});
    bundle[key] = std::move(step);
  }
  return bundle;
}

TEST(step_runner, conserves_every_free_list_over_random_admits_and_refusals) {
  constexpr std::uint32_t seed = 20240611;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng{seed};
  const auto roll = [&rng](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  strings log;
  counting_pool p0{"p0", opts{}.with_slots(6), &log};
  counting_pool p1{"p1", opts{}.with_slots(4).after({"p0"}), &log};
  counting_pool p2{"p2", opts{}.with_slots(8), &log};
  counting_pool p3{"p3", opts{}.with_slots(5).after({"p1", "p2"}), &log};
  const std::vector<counting_pool*> pools{&p0, &p1, &p2, &p3};
  step_runner runner = runner_of({&p3, &p2, &p1, &p0});
  int short_refusals = 0;
  int forced_refusals = 0;
  int commits = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    std::vector<std::vector<int>> before;
    for (counting_pool* pool : pools) {
      pool->options.refuse = roll(10) == 0;
      before.push_back(pool->free_list());
    }
    const step_bundle bundle = random_bundle(rng, pools);
    step_context ctx;
    const auto outcome = runner.admit(bundle, ctx);
    if (!outcome.ok()) {
      const bool short_of = std::holds_alternative<allocation_failed>(*outcome.outcome.reason);
      (short_of ? short_refusals : forced_refusals) += 1;
      std::vector<std::vector<int>> after;
      for (const counting_pool* pool : pools)
        after.push_back(pool->free_list());
      ASSERT_EQ(after, before) << "refused by " << outcome.failed_resource;
    } else {
      const auto planned = runner.plan(bundle, ctx);
      ASSERT_TRUE(planned) << planned.error().to_string();
      const auto committed = runner.commit(bundle, ctx);
      ASSERT_TRUE(committed) << committed.error().to_string();
      ++commits;
    }
    for (int r = roll(3); r > 0; --r)
      runner.remove_request('q' + std::to_string(roll(6)));
    for (const counting_pool* pool : pools)
      pool->expect_conserved();
  }
  EXPECT_GT(short_refusals, 50);
  EXPECT_GT(forced_refusals, 50);
  EXPECT_GT(commits, 50);
}
}  // namespace
}  // namespace mstar::resources
