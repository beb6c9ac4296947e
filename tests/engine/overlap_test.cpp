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
#include <sstream>

#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::engine {
namespace {

// Everything a plan tells the kernels about each row but which page or
// slot, as text; `rows`: the plan rows to describe, in order (empty: all).
std::string describe(const models::step_plans& plans, std::span<const std::size_t> rows) {
  std::ostringstream out;
  auto each = [&](std::size_t n, auto&& f) {
    if (rows.empty()) {
      for (std::size_t r = 0; r < n; ++r)
        f(r);
    } else {
      for (const auto r : rows)
        f(r);
    }
  };
  if (plans.kv) {
    for (const auto& [label, lp] : plans.kv->labels) {
      out << "kv:" << label << " decode=" << lp.decode << ' ';
      each(lp.last_page_len.size(), [&](std::size_t r) {
        out << '(' << lp.qo_indptr[r + 1] - lp.qo_indptr[r] << ' '
            << lp.kv_indptr[r + 1] - lp.kv_indptr[r] << ' ' << lp.last_page_len[r];
        if (lp.decode)
          out << ' ' << lp.decode_offset[r];
        out << ") ";
      });
    }
    out << "kv_forks=" << plans.kv->pre_forks.size() << '/' << plans.kv->post_forks.size() << ' ';
  }
  if (plans.recurrent) {
    for (const auto& [label, a] : plans.recurrent->labels) {
      out << "rec:" << label << " has_state=";
      each(static_cast<std::size_t>(a.num_rows),
           [&](std::size_t r) { out << +a.has_state[r] << ','; });
    }
  }
  return out.str();
}

/// What one step ran, as the checker compares it.
struct ran {
  std::uint64_t serial = 0;
  std::vector<scheduled_row> rows;
  std::string plans;
  std::vector<float> logits;
  std::vector<std::int32_t> sampled;
  bool ahead = false;
  std::size_t dropped = 0;
};

std::string rows_text(const std::vector<scheduled_row>& rows) {
  std::ostringstream out;
  for (const auto& r : rows) {
    out << r.rid << (r.samples ? "*" : "") << ":";
    for (auto t : r.tokens)
      out << t << ',';
    out << ' ';
  }
  return out.str();
}

// The first difference between two steps, or empty.
std::string diverges(const ran& a, const ran& b) {
  if (rows_text(a.rows) != rows_text(b.rows))
    return "batch:\n  sync:    " + rows_text(a.rows) + "\n  overlap: " + rows_text(b.rows);
  if (a.plans != b.plans)
    return "plans:\n  sync:    " + a.plans + "\n  overlap: " + b.plans;
  if (a.sampled != b.sampled)
    return "sampled ids";
  if (a.logits != b.logits)
    return "logits";
  return {};
}

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
  config.on_step = [&log](const step_trace& t) {
    ran r{t.serial,
          {t.rows.begin(), t.rows.end()},
          describe(*t.plans, t.plan_rows),
          t.output->logits,
          t.output->sampled,
          t.ahead,
          t.dropped};
    log.push_back(std::move(r));
  };
  return test::fixture_engine(model, config);
}

// `count` random requests: prompts of 1-30 ids, 1-24 tokens; a third
// sampled with their own seed, some with n = 2, some stopping at eos or at
// stop ids.
std::vector<request_spec> random_requests(std::mt19937& rng, int count) {
  std::vector<request_spec> out;
  for (int i = 0; i < count; ++i) {
    request_spec r;
    r.id = fmt::format("r{}", i);
    const int len = 1 + static_cast<int>(rng() % 30);
    for (int t = 0; t < len; ++t)
      r.prompt.push_back(3 + rng() % 256);
    r.stop.max_tokens = 1 + static_cast<std::int32_t>(rng() % 24);
    r.stop.ignore_eos = rng() % 4 != 0;
    // Some stop on any of 40 ids, so rows end where no one could tell
    // ahead (a step launched ahead then drops them).
    if (rng() % 3 == 0) {
      for (int k = 0; k < 40; ++k)
        r.stop.stop_token_ids.push_back(static_cast<token_id>(3 + rng() % 500));
    }
    if (rng() % 3 == 0) {
      r.sampling.temperature = 0.8F;
      r.sampling.seed = rng();
      if (rng() % 2 == 0)
        r.sampling.n = 2;
    }
    out.push_back(std::move(r));
  }
  return out;
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
    completion_collector sync_out, over_out;
    std::size_t next = 0;
    std::vector<std::size_t> late;
    int steps = 0;
    while (next < requests.size() || !late.empty() || !sync->idle() || !over->idle()) {
      ASSERT_LT(++steps, 20000) << "the engines do not finish";
      // Arrivals in bursts with quiet stretches, so decode loops run long
      // enough to be launched ahead; now and then a cancellation. While
      // the overlap engine has a step in flight (launched ahead), a
      // newcomer joins it the step after: sync gets it one call later.
      for (const auto i : late) {
        auto id = sync->submit(requests[i]);
        ASSERT_TRUE(id.has_value()) << id.error().message();
      }
      late.clear();
      const auto arrive = rng() % 8 < 2 ? 1 + rng() % 3 : 0;
      for (std::size_t a = 0; a < arrive && next < requests.size(); ++a, ++next) {
        auto id = over->submit(requests[next]);
        ASSERT_TRUE(id.has_value()) << id.error().message();
        if (over->step_in_flight()) {
          late.push_back(next);
        } else {
          auto sid = sync->submit(requests[next]);
          ASSERT_TRUE(sid.has_value()) << sid.error().message();
        }
        sync_out.expect(requests[next]);
        over_out.expect(requests[next]);
      }
      if (next > 0 && rng() % 23 == 0) {
        const auto i = rng() % next;
        const auto& victim = requests[i].id;
        if (std::find(late.begin(), late.end(), i) == late.end()) {
          EXPECT_EQ(sync->cancel(victim), over->cancel(victim)) << victim;
        }
      }
      const auto before = sync_log.size();
      auto a = sync->step();
      auto b = over->step();
      ASSERT_TRUE(a.has_value()) << a.error().message();
      ASSERT_TRUE(b.has_value()) << b.error().message();
      ASSERT_EQ(sync_log.size(), overlap_log.size()) << "step " << steps << ": steps run differ";
      for (auto i = before; i < sync_log.size(); ++i) {
        const auto why = diverges(sync_log[i], overlap_log[i]);
        if (!why.empty() && std::getenv("MSTAR_OVERLAP_DEBUG") != nullptr) {
          for (auto k = i > 6 ? i - 6 : 0; k < i; ++k)
            std::printf("%zu sync %s\n     over %s ahead=%d\n", k,
                        rows_text(sync_log[k].rows).c_str(), rows_text(overlap_log[k].rows).c_str(),
                        overlap_log[k].ahead);
        }
        ASSERT_TRUE(why.empty()) << "step " << steps << " (serial " << sync_log[i].serial
                                 << ", overlap ahead " << overlap_log[i].ahead << ", dropped "
                                 << overlap_log[i].dropped << ") diverges in " << why;
      }
      for (const auto& d : *a)
        sync_out.add(d);
      for (const auto& d : *b)
        over_out.add(d);
      test::expect_pools_whole(*sync);
      test::expect_pools_whole(*over);
    }
    const auto x = sync_out.take();
    const auto y = over_out.take();
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].tokens, y[i].tokens) << x[i].id;
      EXPECT_EQ(x[i].finished, y[i].finished) << x[i].id;
    }
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
