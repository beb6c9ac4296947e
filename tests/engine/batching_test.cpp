// Continuous batching against running alone: on the CPU in float32, every
// request's tokens equal those of the same request run by itself, whatever
// the arrival times, the batch mix, the chunk sizes and the preemptions
// (randomized schedules over both fixture models, pools small enough to
// force preemption). The pools keep their books after every step.
#include <gtest/gtest.h>
#include <random>

#include "tests/engine/engine_support.hpp"

namespace mstar::engine {
namespace {

struct trial {
  request_spec spec;
  std::vector<token_id> alone;  // tokens when run by itself
};

// `count` random requests: prompts of 1-40 byte ids, 1-12 tokens, half of
// them sampled with their own seed.
std::vector<trial> random_trials(std::mt19937& rng, int count) {
  std::vector<trial> out;
  for (int i = 0; i < count; ++i) {
    request_spec r;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int t = 0; t < len; ++t)
      r.prompt.push_back(3 + rng() % 256);
    r.stop.max_tokens = 1 + static_cast<std::int32_t>(rng() % 12);
    r.stop.ignore_eos = true;
    if (rng() % 2 == 0) {
      r.sampling.temperature = 0.9F;
      r.sampling.top_k = static_cast<std::int32_t>(rng() % 3 == 0 ? 0 : 40);
      r.sampling.seed = rng();
    }
    out.push_back({std::move(r), {}});
  }
  return out;
}

class batching : public ::testing::TestWithParam<std::string> {};

TEST_P(batching, every_request_gets_the_tokens_it_gets_alone_under_random_schedules) {
  const std::uint32_t seed = 20261201;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng{seed};
  auto trials = random_trials(rng, 110);
  // Alone: one request at a time, roomy pools.
  auto alone = test::fixture_engine(GetParam());
  ASSERT_NE(alone, nullptr);
  for (auto& t : trials) {
    auto done = run_to_completion(*alone, {t.spec});
    ASSERT_TRUE(done.has_value()) << done.error().message();
    t.alone = done->front().tokens[0];
  }
  // Together: small pools, a small random token budget, random arrivals.
  engine_config config;
  config.pools.page_size = 4;
  config.pools.max_num_pages = 20;  // one 52-token request fits alone; several do not
  config.pools.max_slots = 6;
  config.scheduler.max_batched_tokens = 24;
  config.scheduler.max_running = 8;
  auto together = test::fixture_engine(GetParam(), config);
  ASSERT_NE(together, nullptr);
  completion_collector collector;
  std::size_t next = 0;
  int steps = 0;
  while (next < trials.size() || !together->idle()) {
    ASSERT_LT(++steps, 20000) << "the engine does not finish";
    for (auto arrive = rng() % 4; arrive > 0 && next < trials.size(); --arrive, ++next) {
      auto id = together->submit(trials[next].spec);
      ASSERT_TRUE(id.has_value()) << id.error().message();
      trials[next].spec.id = *id;
      collector.expect(trials[next].spec);
    }
    auto deltas = together->step();
    ASSERT_TRUE(deltas.has_value()) << deltas.error().message();
    for (const auto& d : *deltas)
      collector.add(d);
    test::expect_pools_whole(*together);
  }
  const auto got = collector.take();
  ASSERT_EQ(got.size(), trials.size());
  for (std::size_t i = 0; i < trials.size(); ++i) {
    EXPECT_EQ(got[i].finished[0], finish_reason::length)
        << "request " << i << ": " << got[i].errors[0];
    EXPECT_EQ(got[i].tokens[0], trials[i].alone) << "request " << i;
  }
  EXPECT_GT(together->sched().preemptions(), 0)
      << "the pools were never short: no preemption tested";
  EXPECT_GT(together->counters().refused_steps, 0);
  std::printf("[ measured ] %s: %zu requests in %d steps, %lld preemptions, %lld refused steps\n",
              GetParam().c_str(), trials.size(), steps,
              static_cast<long long>(together->sched().preemptions()),
              static_cast<long long>(together->counters().refused_steps));
  test::expect_pools_empty(*together);
}

INSTANTIATE_TEST_SUITE_P(fixtures, batching,
                         ::testing::Values("nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn"));

}  // namespace
}  // namespace mstar::engine
