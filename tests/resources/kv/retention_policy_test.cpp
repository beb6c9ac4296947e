#include "resources/kv/retention_policy.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>

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

TEST(retention_policy, make_rebuilds_every_published_retention_result) {
  const auto vectors = test::load_fixture_json("vectors/windowing.json");
  int checked = 0;
  for (const auto& c : vectors.at("cases")) {
    if (c.at("kind") != "schedule")
      continue;
    for (const auto& probe : c.at("expected").at("retention")) {
      if (!probe.contains("result") || probe.at("result").is_null())
        continue;
      const auto& want = probe.at("result");
      const auto budget = want.at("context_budget").get<std::int64_t>();
      const auto prefix = want.at("protected_prefix").get<std::int64_t>();
      auto policy = retention_policy::make(budget, prefix);
      ASSERT_TRUE(policy) << policy.error().to_string();
      EXPECT_EQ(*policy, (retention_policy{budget, prefix}));
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace mstar::resources
