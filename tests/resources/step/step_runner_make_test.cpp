#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "resources/step/step_runner.hpp"
#include "tests/resources/step/counting_pool.hpp"

namespace mstar::resources {
namespace {

using test_support::counting_pool;
using test_support::keys_of;
using test_support::runner_of;
using test_support::strings;
using opts = test_support::pool_options;

std::string make_failure(std::vector<resource*> resources) {
  auto runner = step_runner::make(std::move(resources));
  EXPECT_FALSE(runner) << "make() accepted what it should refuse";
  if (runner)
    return {};
  EXPECT_EQ(runner.error().code(), errc::invalid_argument);
  return runner.error().message();
}

TEST(step_runner, orders_each_resource_after_its_dependencies) {
  strings log;
  counting_pool attn{"attn", opts{}.after({"kv", "pos"}), &log};
  counting_pool kv{"kv", {}, &log};
  counting_pool pos{"pos", opts{}.after({"kv"}), &log};
  const step_runner runner = runner_of({&attn, &kv, &pos});
  EXPECT_EQ(keys_of(runner.order()), (strings{"kv", "pos", "attn"}));
}

TEST(step_runner, keeps_the_given_order_wherever_dependencies_allow) {
  strings log;
  counting_pool c{"c", {}, &log};
  counting_pool a{"a", {}, &log};
  counting_pool b{"b", opts{}.after({"a"}), &log};
  EXPECT_EQ(keys_of(runner_of({&c, &a, &b}).order()), (strings{"c", "a", "b"}));
  EXPECT_EQ(keys_of(runner_of({&a, &b, &c}).order()), (strings{"a", "b", "c"}));
  // b waits for a; c, ready first, is not pushed behind b.
  EXPECT_EQ(keys_of(runner_of({&b, &c, &a}).order()), (strings{"c", "a", "b"}));
}

TEST(step_runner, refuses_a_null_resource) {
  strings log;
  counting_pool a{"a", {}, &log};
  EXPECT_EQ(make_failure({&a, nullptr}), "resources[1] is null");
}

TEST(step_runner, refuses_a_duplicate_key_naming_both_positions) {
  strings log;
  counting_pool a{"kv", {}, &log};
  counting_pool b{"pos", {}, &log};
  counting_pool c{"kv", {}, &log};
  EXPECT_EQ(make_failure({&a, &b, &c}),
            "duplicate resource key \"kv\" (resources[0] and resources[2])");
}

TEST(step_runner, refuses_a_resource_that_depends_on_itself) {
  strings log;
  counting_pool a{"kv", opts{}.after({"kv"}), &log};
  EXPECT_EQ(make_failure({&a}), "resource \"kv\" depends on itself");
}

TEST(step_runner, refuses_an_unknown_dependency_naming_both_resources) {
  strings log;
  counting_pool a{"attn", opts{}.after({"kv"}), &log};
  EXPECT_EQ(make_failure({&a}),
            "resource \"attn\" depends on \"kv\", which is not among the resources");
}

TEST(step_runner, refuses_a_cycle_naming_only_its_members) {
  strings log;
  counting_pool x{"x", opts{}.after({"a"}), &log};
  counting_pool a{"a", opts{}.after({"b"}), &log};
  counting_pool b{"b", opts{}.after({"c"}), &log};
  counting_pool c{"c", opts{}.after({"a"}), &log};
  counting_pool free_standing{"y", {}, &log};
  EXPECT_EQ(make_failure({&free_standing, &x, &a, &b, &c}),
            "resources \"a\", \"b\", \"c\" form a dependency cycle: a -> b -> c -> a");
}

TEST(step_runner, refuses_a_preplanning_resource_whose_dependency_does_not_preplan) {
  strings log;
  counting_pool kv{"kv", {}, &log};
  counting_pool attn{"attn", opts{}.after({"kv"}).preplanning(), &log};
  EXPECT_EQ(make_failure({&kv, &attn}),
            "resource \"attn\" supports pre-planning but its dependency \"kv\" does not; every "
            "pre-planning resource's dependencies must also pre-plan");
}

}  // namespace
}  // namespace mstar::resources
