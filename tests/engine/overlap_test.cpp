// Overlap scheduling against sync (engine/local_engine.hpp, schedule_mode):
// two engines over the same fixture run the same randomized workload in
// lockstep (arrivals, cancellations, n > 1, seeded sampling, eos, pools
// small enough to preempt), and after every step the checker compares what
// each ran: the batch (ids and tokens per row; an overlap step launched
// ahead counts without the rows it dropped), the plans' shapes (rows,
// lengths, offsets, has_state, forks: the page and slot ids themselves may
// differ, since a step launched ahead is admitted before the previous
// step's releases) and the forward's output, bit for bit, failing at the
// first divergence with the step and what differed. The pools keep their
// books after every step, and the overlap engine must actually have
// launched steps ahead and dropped rows that over-ran.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <random>

#include "tests/engine/engine_support.hpp"
#include "tests/engine/lockstep.hpp"

namespace mstar::engine {
namespace {

using test::lockstep::ran;
using test::lockstep::random_requests;

// Pools of `pages` pages of 4 tokens: 24 preempt often (a step launched
// ahead then rarely finds the room it needs), 96 seldom.
std::unique_ptr<local_engine> engine_for(const std::string& model, schedule_mode mode,
                                         std::vector<ran>& log, std::int64_t pages = 24) {
  engine_config config;
  config.schedule = mode;
  config.pools.page_size = 4;
  config.pools.max_num_pages = pages;
  config.pools.max_slots = 7;
  config.scheduler.max_batched_tokens = 24;
  config.scheduler.max_running = 6;
  config.on_step = test::lockstep::record_into(log);
  return test::fixture_engine(model, config);
}

class overlap : public ::testing::TestWithParam<std::string> {};

TEST_P(overlap, runs_the_batches_plans_and_outputs_of_sync_step_by_step) {
  std::int64_t ahead = 0, dropped = 0;
  for (const auto& [seed, pages] :
       {std::pair{7U, 24}, std::pair{20261202U, 24}, std::pair{99U, 96}, std::pair{5U, 96}}) {
    SCOPED_TRACE(fmt::format("seed {}, {} pages", seed, pages));
    std::mt19937 rng{seed};
    auto requests = random_requests(rng, 60);
    std::vector<ran> sync_log, overlap_log;
    auto sync = engine_for(GetParam(), schedule_mode::sync, sync_log, pages);
    auto over = engine_for(GetParam(), schedule_mode::overlap, overlap_log, pages);
    ASSERT_NE(sync, nullptr);
    ASSERT_NE(over, nullptr);
    int steps = 0;
    test::lockstep::run(*sync, *over, sync_log, overlap_log, requests, rng, steps);
    if (HasFatalFailure())
      return;
    const auto& c = over->counters();
    EXPECT_EQ(sync->counters().ahead_steps, 0);
    ahead += c.ahead_steps;
    dropped += c.dropped_rows;
    std::printf(
        "[ measured ] %s seed %u, %d pages: %d steps, %lld launched ahead, %lld rows dropped, %lld "
        "preemptions\n",
        GetParam().c_str(), seed, pages, steps, static_cast<long long>(c.ahead_steps),
        static_cast<long long>(c.dropped_rows),
        static_cast<long long>(over->sched().preemptions()));
    test::expect_pools_empty(*sync);
    test::expect_pools_empty(*over);
  }
  EXPECT_GT(ahead, 0) << "no step was launched ahead";
  EXPECT_GT(dropped, 0) << "no row over-ran: the rollback path went untested";
}

TEST(overlap, a_steady_decode_loop_launches_every_step_ahead) {
  std::vector<ran> log;
  auto e = engine_for("nemotron_h_tiny_hybrid", schedule_mode::overlap, log);
  ASSERT_NE(e, nullptr);
  std::vector<request_spec> reqs;
  for (int i = 0; i < 3; ++i)
    reqs.push_back(test::greedy_request({5, 6, static_cast<token_id>(7 + i)}, 12));
  auto done = run_to_completion(*e, reqs);
  ASSERT_TRUE(done.has_value()) << done.error().message();
  // One prefill step, then decode steps, each launched while the one before
  // ran (its ids looped back from that one's draws); none over-ran, since
  // max_tokens is known ahead.
  std::int64_t ahead = 0;
  for (const auto& r : log) {
    ahead += r.ahead ? 1 : 0;
    EXPECT_EQ(r.dropped, 0U);
  }
  EXPECT_EQ(ahead, static_cast<std::int64_t>(log.size()) - 1);
  EXPECT_EQ(e->counters().ahead_steps, ahead);
  test::expect_pools_empty(*e);
}

// A cancellation holds launching ahead back (the step in flight may still
// hold the cancelled rows) only until the cancelled request has ended;
// cancelling it twice counts once. The remaining requests' decode steps
// are launched ahead again.
TEST(overlap, launches_ahead_again_once_a_cancelled_request_has_ended) {
  std::vector<ran> log;
  auto e = engine_for("nemotron_h_tiny_hybrid", schedule_mode::overlap, log, 96);
  ASSERT_NE(e, nullptr);
  std::vector<request_id> ids;
  for (int i = 0; i < 3; ++i) {
    auto id = e->submit(test::greedy_request({5, 6, static_cast<token_id>(7 + i)}, 24));
    ASSERT_TRUE(id.has_value()) << id.error().message();
    ids.push_back(*id);
  }
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(e->step().has_value());
  EXPECT_TRUE(e->cancel(ids[0]));
  EXPECT_TRUE(e->cancel(ids[0]));
  std::optional<std::size_t> ended_at;
  for (int guard = 0; !e->idle() && guard < 200; ++guard) {
    auto deltas = e->step();
    ASSERT_TRUE(deltas.has_value()) << deltas.error().message();
    for (const auto& d : *deltas) {
      if (d.id == ids[0] && d.finished) {
        EXPECT_EQ(*d.finished, finish_reason::cancelled);
        ended_at = log.size();
      }
    }
  }
  ASSERT_TRUE(e->idle());
  ASSERT_TRUE(ended_at.has_value()) << "the cancelled request never ended";
  const auto after = log.size() - *ended_at;
  std::size_t ahead_after = 0;
  for (std::size_t i = *ended_at; i < log.size(); ++i)
    ahead_after += log[i].ahead ? 1 : 0;
  EXPECT_GT(after, 10U);
  EXPECT_GE(ahead_after + 2, after) << ahead_after << " of the " << after
                                    << " steps after the cancelled request ended went ahead";
  test::expect_pools_empty(*e);
}

TEST(overlap, schedule_modes_parse_and_print) {
  EXPECT_EQ(*parse_schedule_mode("sync"), schedule_mode::sync);
  EXPECT_EQ(*parse_schedule_mode("overlap"), schedule_mode::overlap);
  EXPECT_EQ(to_string(schedule_mode::overlap), "overlap");
  auto bad = parse_schedule_mode("async");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("'async' is not one of sync, overlap"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(fixtures, overlap,
                         ::testing::Values("nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn"));

}  // namespace
}  // namespace mstar::engine
