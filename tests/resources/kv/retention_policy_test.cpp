#include "resources/kv/retention_policy.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/fixtures.hpp"

namespace mstar::resources {
namespace {

TEST(retention_policy, make_keeps_a_valid_budget_and_prefix) {
  auto policy = retention_policy::make(960, 300);
  ASSERT_TRUE(policy) << policy.error().to_string();
  EXPECT_EQ(policy->context_budget, 960);
  EXPECT_EQ(policy->protected_prefix, 300);
}

TEST(retention_policy, make_accepts_an_empty_prefix_and_the_largest_budget) {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  auto policy = retention_policy::make(max, 0);
  ASSERT_TRUE(policy) << policy.error().to_string();
  EXPECT_EQ(*policy, (retention_policy{max, 0}));
}

TEST(retention_policy, make_rejects_a_budget_that_is_not_positive_naming_the_field) {
  for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{-1}}) {
    auto policy = retention_policy::make(budget, 0);
    ASSERT_FALSE(policy);
    EXPECT_EQ(policy.error().code(), errc::invalid_argument);
    EXPECT_EQ(policy.error().message(),
              "context_budget must be > 0, got " + std::to_string(budget));
  }
}

TEST(retention_policy, make_rejects_a_negative_prefix_naming_the_field) {
  auto policy = retention_policy::make(16, -1);
  ASSERT_FALSE(policy);
  EXPECT_EQ(policy.error().code(), errc::invalid_argument);
  EXPECT_EQ(policy.error().message(), "protected_prefix must be >= 0, got -1");
}

TEST(retention_policy, make_checks_the_budget_before_the_prefix) {
  auto policy = retention_policy::make(0, -1);
  ASSERT_FALSE(policy);
  EXPECT_NE(policy.error().message().find("context_budget"), std::string::npos);
}

TEST(retention_policy, equality_compares_both_fields) {
  EXPECT_EQ((retention_policy{16, 4}), (retention_policy{16, 4}));
  EXPECT_NE((retention_policy{16, 4}), (retention_policy{16, 5}));
  EXPECT_NE((retention_policy{16, 4}), (retention_policy{17, 4}));
}

// The published probes give each schedule's inputs (context units, tokens
// per unit, prefix tokens) and the policy a window commit declares, or that
// it raises. The policy make() builds from the inputs (the budget is the
// context in tokens) must be the published one, and a raising probe with a
// positive budget must be refused, naming the field.
TEST(retention_policy, make_agrees_with_every_published_retention_probe) {
  const auto vectors = ::mstar::test::load_fixture_json("vectors/windowing.json");
  int accepted = 0, refused = 0;
  for (const auto& c : vectors.at("cases")) {
    if (c.at("kind") != "schedule")
      continue;
    const auto context_units = c.at("inputs").at("context_units").get<std::int64_t>();
    if (context_units == 0)
      continue;  // the schedule keeps everything: no policy to build
    for (const auto& probe : c.at("expected").at("retention")) {
      const auto tokens_per_unit = probe.at("tokens_per_unit").get<std::int64_t>();
      const auto prefix = probe.at("prefix_tokens").get<std::int64_t>();
      SCOPED_TRACE(c.at("id").get<std::string>() + ": tokens_per_unit " +
                   std::to_string(tokens_per_unit) + ", prefix_tokens " + std::to_string(prefix));
      if (tokens_per_unit <= 0)
        continue;  // refused by the schedule before any policy is made
      auto policy = retention_policy::make(context_units * tokens_per_unit, prefix);
      if (probe.contains("raises")) {
        ASSERT_FALSE(policy);
        EXPECT_EQ(policy.error().code(), errc::invalid_argument);
        EXPECT_NE(policy.error().message().find("protected_prefix"), std::string::npos);
        ++refused;
        continue;
      }
      ASSERT_TRUE(policy) << policy.error().to_string();
      const auto& want = probe.at("result");
      EXPECT_EQ(policy->context_budget, want.at("context_budget").get<std::int64_t>());
      EXPECT_EQ(policy->protected_prefix, want.at("protected_prefix").get<std::int64_t>());
      ++accepted;
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace mstar::resources
