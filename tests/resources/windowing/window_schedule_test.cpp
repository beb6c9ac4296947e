#include "resources/windowing/window_schedule.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>

#include "tests/support/fixtures.hpp"

namespace mstar::resources {
namespace {

using json = nlohmann::json;

// The vectors name Python exceptions; these are the codes they stand for.
errc code_for(const std::string& raises) {
  if (raises == "IndexError")
    return errc::out_of_range;
  EXPECT_EQ(raises, "ValueError") << "vector names an exception this test does not map";
  return errc::invalid_argument;
}

result<window_schedule> make_from(const json& inputs) {
  return window_schedule::make(inputs.at("total_units").get<std::int64_t>(),
                               inputs.at("window_units").get<std::int64_t>(),
                               inputs.at("context_units").get<std::int64_t>(),
                               inputs.at("overlap_units").get<std::int64_t>());
}

window_schedule make_ok(std::int64_t total, std::int64_t window, std::int64_t context = 0,
                        std::int64_t overlap = 0) {
  auto schedule = window_schedule::make(total, window, context, overlap);
  if (!schedule)
    throw std::runtime_error(schedule.error().to_string());
  return *schedule;
}

void check_windows(const window_schedule& schedule, const json& expected) {
  const auto plans = schedule.windows();
  ASSERT_EQ(plans.size(), expected.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const json& want = expected[i];
    SCOPED_TRACE("window " + std::to_string(i));
    const window_plan plan{want.at("index").get<std::int64_t>(),
                           want.at("start").get<std::int64_t>(), want.at("end").get<std::int64_t>(),
                           want.at("cond_units").get<std::int64_t>()};
    EXPECT_EQ(plans[i], plan);
    EXPECT_EQ(plans[i].commit_start(), want.at("commit_start").get<std::int64_t>());
    EXPECT_EQ(plans[i].commit_end(), want.at("commit_end").get<std::int64_t>());
    EXPECT_EQ(plans[i].units(), want.at("units").get<std::int64_t>());
    auto looked_up = schedule.window(plan.index);
    ASSERT_TRUE(looked_up) << looked_up.error().to_string();
    EXPECT_EQ(*looked_up, plan);
    auto released = schedule.released_end(plan.index);
    ASSERT_TRUE(released) << released.error().to_string();
    EXPECT_EQ(*released, want.at("released_end").get<std::int64_t>());
  }
}

void check_out_of_range(const window_schedule& schedule, const json& probes) {
  for (const json& probe : probes) {
    const auto index = probe.at("index").get<std::int64_t>();
    SCOPED_TRACE("out_of_range index " + std::to_string(index));
    auto plan = schedule.window(index);
    ASSERT_FALSE(plan);
    EXPECT_EQ(plan.error().code(), code_for(probe.at("raises")));
    auto released = schedule.released_end(index);
    if (probe.at("released_end_raises").is_null()) {
      ASSERT_TRUE(released) << released.error().to_string();
      EXPECT_EQ(*released, 0);
    } else {
      ASSERT_FALSE(released);
      EXPECT_EQ(released.error().code(), code_for(probe.at("released_end_raises")));
    }
  }
}

void check_retention(const window_schedule& schedule, const json& probes) {
  for (const json& probe : probes) {
    const auto tpu = probe.at("tokens_per_unit").get<std::int64_t>();
    const auto prefix = probe.at("prefix_tokens").get<std::int64_t>();
    SCOPED_TRACE("retention(" + std::to_string(tpu) + ", " + std::to_string(prefix) + ")");
    auto policy = schedule.retention(tpu, prefix);
    if (probe.contains("raises")) {
      ASSERT_FALSE(policy);
      EXPECT_EQ(policy.error().code(), code_for(probe.at("raises")));
      continue;
    }
    ASSERT_TRUE(policy) << policy.error().to_string();
    const json& want = probe.at("result");
    if (want.is_null()) {
      EXPECT_FALSE(policy->has_value());
      continue;
    }
    ASSERT_TRUE(policy->has_value());
    EXPECT_EQ((*policy)->context_budget, want.at("context_budget").get<std::int64_t>());
    EXPECT_EQ((*policy)->protected_prefix, want.at("protected_prefix").get<std::int64_t>());
  }
}

TEST(window_schedule, reproduces_every_published_vector) {
  const json vectors = ::mstar::test::load_fixture_json("vectors/windowing.json");
  int schedules = 0;
  int constructs = 0;
  for (const json& c : vectors.at("cases")) {
    SCOPED_TRACE(c.at("id").get<std::string>());
    const json& expected = c.at("expected");
    auto schedule = make_from(c.at("inputs"));
    if (c.at("kind") == "construct") {
      ++constructs;
      ASSERT_FALSE(schedule);
      EXPECT_EQ(schedule.error().code(), code_for(expected.at("raises")));
      if (expected.contains("message")) {
        EXPECT_EQ(schedule.error().message(), expected.at("message").get<std::string>());
      }
      continue;
    }
    ASSERT_EQ(c.at("kind"), "schedule");
    ++schedules;
    ASSERT_TRUE(schedule) << schedule.error().to_string();
    EXPECT_EQ(schedule->stride(), expected.at("stride").get<std::int64_t>());
    EXPECT_EQ(schedule->num_windows(), expected.at("num_windows").get<std::int64_t>());
    check_windows(*schedule, expected.at("windows"));
    check_out_of_range(*schedule, expected.at("out_of_range"));
    check_retention(*schedule, expected.at("retention"));
  }
  EXPECT_GE(schedules, 1);
  EXPECT_GE(constructs, 1);
}

TEST(window_schedule, covers_a_sequence_no_longer_than_the_window_with_one_window) {
  for (const std::int64_t total : {1, 5, 8}) {
    const auto schedule = make_ok(total, 8);
    ASSERT_EQ(schedule.num_windows(), 1);
    const auto plan = schedule.windows().at(0);
    EXPECT_EQ(plan, (window_plan{0, 0, total, 0}));
    EXPECT_EQ(plan.commit_start(), 0);
    EXPECT_EQ(plan.commit_end(), total);
  }
}

TEST(window_schedule, advances_by_the_whole_window_without_overlap) {
  const auto schedule = make_ok(48, 8);
  EXPECT_EQ(schedule.stride(), 8);
  const auto plans = schedule.windows();
  ASSERT_EQ(plans.size(), 6u);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    EXPECT_EQ(plans[i].start, static_cast<std::int64_t>(i) * 8);
    EXPECT_EQ(plans[i].units(), 8);
  }
}

TEST(window_schedule, overlap_shortens_the_stride_and_the_last_window) {
  const auto schedule = make_ok(48, 8, 0, 1);
  EXPECT_EQ(schedule.stride(), 7);
  ASSERT_EQ(schedule.num_windows(), 7);
  const auto last = schedule.window(6);
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, (window_plan{6, 42, 48, 1}));
  EXPECT_EQ(last->units(), 6);
}

TEST(window_schedule, released_end_trails_the_commit_frontier_by_the_context) {
  const auto schedule = make_ok(48, 8, 16);
  const std::int64_t want[] = {0, 0, 8, 16, 24, 32};
  for (const auto& plan : schedule.windows()) {
    auto released = schedule.released_end(plan.index);
    ASSERT_TRUE(released);
    EXPECT_EQ(*released, want[plan.index]);
    EXPECT_LE(plan.commit_end() - *released, 16);
  }
}

TEST(window_schedule, zero_context_releases_nothing) {
  const auto schedule = make_ok(48, 8);
  for (std::int64_t i = -1; i <= schedule.num_windows(); ++i) {
    auto released = schedule.released_end(i);
    ASSERT_TRUE(released);
    EXPECT_EQ(*released, 0);
  }
}

TEST(window_schedule, commit_spans_tile_the_sequence_for_random_schedules) {
  constexpr std::uint64_t seed = 0x5eed'0001;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng{seed};
  auto draw = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>{lo, hi}(rng);
  };
  for (int combo = 0; combo < 400; ++combo) {
    const std::int64_t total = draw(1, 79);
    const std::int64_t window = draw(1, 11);
    const std::int64_t overlap = draw(0, window - 1);
    const std::int64_t context = draw(0, 3) == 0 ? 0 : draw(1, 24);
    SCOPED_TRACE("total=" + std::to_string(total) + " window=" + std::to_string(window) +
                 " context=" + std::to_string(context) + " overlap=" + std::to_string(overlap));
    const auto schedule = make_ok(total, window, context, overlap);
    const auto plans = schedule.windows();
    ASSERT_EQ(static_cast<std::int64_t>(plans.size()), schedule.num_windows());
    std::int64_t frontier = 0;
    for (const auto& plan : plans) {
      ASSERT_EQ(plan.commit_start(), frontier) << "window " << plan.index;
      ASSERT_LT(plan.commit_start(), plan.commit_end()) << "window " << plan.index;
      if (plan.index + 1 < schedule.num_windows()) {
        EXPECT_EQ(plan.units(), window) << "window " << plan.index;
      }
      EXPECT_LE(plan.units(), window);
      auto released = schedule.released_end(plan.index);
      ASSERT_TRUE(released);
      EXPECT_GE(*released, 0);
      if (context == 0) {
        EXPECT_EQ(*released, 0);
      } else {
        EXPECT_LE(plan.commit_end() - *released, context) << "window " << plan.index;
      }
      frontier = plan.commit_end();
    }
    EXPECT_EQ(frontier, total);
  }
}

TEST(window_schedule, rejects_bad_arguments_in_the_reference_order) {
  struct bad {
    std::int64_t total, window, context, overlap;
    const char* message;
  };
  const bad cases[] = {
      {0, 0, -1, 9, "total_units must be >= 1, got 0"},
      {8, 0, -1, 9, "window_units must be >= 1, got 0"},
      {8, 4, -1, 4, "overlap_units must be in [0, window_units), got 4 with window_units=4"},
      {8, 4, -1, -1, "overlap_units must be in [0, window_units), got -1 with window_units=4"},
      {8, 4, -1, 0, "context_units must be >= 0, got -1"},
  };
  for (const auto& c : cases) {
    auto schedule = window_schedule::make(c.total, c.window, c.context, c.overlap);
    ASSERT_FALSE(schedule) << c.message;
    EXPECT_EQ(schedule.error().code(), errc::invalid_argument);
    EXPECT_EQ(schedule.error().message(), c.message);
  }
}

TEST(window_schedule, window_rejects_indices_outside_the_schedule) {
  const auto schedule = make_ok(8, 4);
  for (const std::int64_t index : {std::int64_t{2}, std::int64_t{-1}}) {
    auto plan = schedule.window(index);
    ASSERT_FALSE(plan);
    EXPECT_EQ(plan.error().code(), errc::out_of_range);
    EXPECT_NE(plan.error().message().find(std::to_string(index)), std::string::npos);
    EXPECT_NE(plan.error().message().find("num_windows=2"), std::string::npos);
  }
}

TEST(window_schedule, retention_scales_the_context_to_cache_tokens) {
  auto policy = make_ok(48, 8, 16).retention(60, 300);
  ASSERT_TRUE(policy);
  ASSERT_TRUE(policy->has_value());
  EXPECT_EQ(**policy, (retention_policy{960, 300}));
}

TEST(window_schedule, retention_is_absent_when_the_schedule_keeps_everything) {
  auto policy = make_ok(48, 8).retention(60, 300);
  ASSERT_TRUE(policy);
  EXPECT_FALSE(policy->has_value());
}

TEST(window_schedule, retention_rejects_zero_tokens_per_unit_even_without_context) {
  for (const std::int64_t context : {0, 16}) {
    auto policy = make_ok(48, 8, context).retention(0, 300);
    ASSERT_FALSE(policy);
    EXPECT_EQ(policy.error().code(), errc::invalid_argument);
    EXPECT_EQ(policy.error().message(), "tokens_per_unit must be >= 1, got 0");
  }
}

TEST(window_schedule, retention_rejects_a_budget_that_overflows_int64) {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  const auto schedule = make_ok(48, 8, 16);
  auto overflow = schedule.retention(max / 16 + 1, 0);
  ASSERT_FALSE(overflow);
  EXPECT_EQ(overflow.error().code(), errc::invalid_argument);
  EXPECT_NE(overflow.error().message().find("overflows"), std::string::npos);
  auto fits = schedule.retention(max / 16, 0);
  ASSERT_TRUE(fits) << fits.error().to_string();
  EXPECT_EQ((*fits)->context_budget, (max / 16) * 16);
}

TEST(window_schedule, ends_stay_exact_near_the_int64_limit) {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  const auto schedule = make_ok(max, max - 1);
  ASSERT_EQ(schedule.num_windows(), 2);
  const auto plans = schedule.windows();
  EXPECT_EQ(plans[1], (window_plan{1, max - 1, max, 0}));
  EXPECT_EQ(plans[1].units(), 1);
}

}  // namespace
}  // namespace mstar::resources
