// Overlap scheduling against sync (engine/local_engine.hpp, schedule_mode):
// two engines over the same fixture run the same randomized workload in
// lockstep (arrivals, cancellations, n > 1, seeded sampling, eos, pools
// small enough to preempt), and after every step the checker compares what
// each ran: the batch (ids and tokens per row), the plans the pools gave
// (page and slot addressing, forks) and the forward's output, bit for bit,
// failing at the first divergence with the step and what differed. The
// pools keep their books after every step, and the overlap engine must
// actually have staged and promoted steps.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <random>
#include <sstream>

#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::engine {
namespace {

template <class T>
void put(std::ostringstream& out, const char* name, const std::vector<T>& v) {
  out << name << "=[";
  for (const auto& x : v)
    out << +x << ',';
  out << "] ";
}

// Everything a plan tells the kernels, as text (equal text: equal plans).
std::string describe(const models::step_plans& plans) {
  std::ostringstream out;
  if (plans.kv) {
    for (const auto& [label, lp] : plans.kv->labels) {
      out << "kv:" << label << ' ';
      put(out, "rows", lp.rows);
      put(out, "qo", lp.qo_indptr);
      put(out, "kv_indptr", lp.kv_indptr);
      put(out, "kv_indices", lp.kv_indices);
      put(out, "last", lp.last_page_len);
      out << "decode=" << lp.decode << ' ';
      put(out, "decode_page", lp.decode_page);
      put(out, "decode_offset", lp.decode_offset);
    }
    out << "kv_forks=" << plans.kv->pre_forks.size() << '/' << plans.kv->post_forks.size() << ' ';
  }
  if (plans.recurrent) {
    for (const auto& [label, a] : plans.recurrent->labels) {
      const auto n = static_cast<std::size_t>(a.num_rows);
      out << "rec:" << label << ' ';
      put(out, "slots",
          std::vector<std::int32_t>(a.slot_indices.begin(), a.slot_indices.begin() + n));
      put(out, "has_state",
          std::vector<std::uint8_t>(a.has_state.begin(), a.has_state.begin() + n));
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
  bool staged = false, promoted = false;
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

std::unique_ptr<local_engine> engine_for(const std::string& model, schedule_mode mode,
                                         std::vector<ran>& log) {
  engine_config config;
  config.schedule = mode;
  config.pools.page_size = 4;
  config.pools.max_num_pages = 24;
  config.pools.max_slots = 7;
  config.scheduler.max_batched_tokens = 24;
  config.scheduler.max_running = 6;
  config.on_step = [&log](const step_trace& t) {
    ran r{t.serial,           {t.rows.begin(), t.rows.end()},
          describe(*t.plans), t.output->logits,
          t.output->sampled,  t.staged,
          t.promoted};
    log.push_back(std::move(r));
  };
  return test::fixture_engine(model, config);
}

// `count` random requests: prompts of 1-30 ids, 1-24 tokens; a third
// sampled with their own seed, some with n = 2, some stopping at eos.
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
  for (const std::uint32_t seed : {7U, 20261202U, 99U}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng{seed};
    auto requests = random_requests(rng, 60);
    std::vector<ran> sync_log, overlap_log;
    auto sync = engine_for(GetParam(), schedule_mode::sync, sync_log);
    auto over = engine_for(GetParam(), schedule_mode::overlap, overlap_log);
    ASSERT_NE(sync, nullptr);
    ASSERT_NE(over, nullptr);
    completion_collector sync_out, over_out;
    std::size_t next = 0;
    int steps = 0;
    while (next < requests.size() || !sync->idle() || !over->idle()) {
      ASSERT_LT(++steps, 20000) << "the engines do not finish";
      // Arrivals in bursts with quiet stretches, so decode loops run long
      // enough to be guessed; now and then a cancellation.
      const auto arrive = rng() % 8 < 2 ? 1 + rng() % 3 : 0;
      for (std::size_t a = 0; a < arrive && next < requests.size(); ++a, ++next) {
        for (auto* e : {sync.get(), over.get()}) {
          auto id = e->submit(requests[next]);
          ASSERT_TRUE(id.has_value()) << id.error().message();
        }
        sync_out.expect(requests[next]);
        over_out.expect(requests[next]);
      }
      if (next > 0 && rng() % 23 == 0) {
        const auto& victim = requests[rng() % next].id;
        EXPECT_EQ(sync->cancel(victim), over->cancel(victim)) << victim;
      }
      const auto before = sync_log.size();
      auto a = sync->step();
      auto b = over->step();
      ASSERT_TRUE(a.has_value()) << a.error().message();
      ASSERT_TRUE(b.has_value()) << b.error().message();
      ASSERT_EQ(sync_log.size(), overlap_log.size()) << "step " << steps << ": steps run differ";
      for (auto i = before; i < sync_log.size(); ++i) {
        const auto why = diverges(sync_log[i], overlap_log[i]);
        ASSERT_TRUE(why.empty()) << "step " << steps << " (serial " << sync_log[i].serial
                                 << ", overlap staged " << overlap_log[i].staged << ", promoted "
                                 << overlap_log[i].promoted << ") diverges in " << why;
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
    EXPECT_GT(c.staged_steps, 0);
    EXPECT_GT(c.promoted_steps, 0);
    EXPECT_EQ(sync->counters().staged_steps, 0);
    std::printf("[ measured ] %s seed %u: %d steps, %lld staged, %lld promoted, %lld preemptions\n",
                GetParam().c_str(), seed, steps, static_cast<long long>(c.staged_steps),
                static_cast<long long>(c.promoted_steps),
                static_cast<long long>(over->sched().preemptions()));
    test::expect_pools_empty(*sync);
    test::expect_pools_empty(*over);
  }
}

TEST(overlap, a_steady_decode_loop_promotes_every_guess) {
  std::vector<ran> log;
  auto e = engine_for("nemotron_h_tiny_hybrid", schedule_mode::overlap, log);
  ASSERT_NE(e, nullptr);
  std::vector<request_spec> reqs;
  for (int i = 0; i < 3; ++i)
    reqs.push_back(test::greedy_request({5, 6, static_cast<token_id>(7 + i)}, 12));
  auto done = run_to_completion(*e, reqs);
  ASSERT_TRUE(done.has_value()) << done.error().message();
  // One prefill step, then decode steps: each guessed while the one before
  // ran, and right but for the one after the last tokens (nothing runs).
  std::int64_t promoted = 0;
  for (const auto& r : log)
    promoted += r.promoted ? 1 : 0;
  EXPECT_EQ(promoted, static_cast<std::int64_t>(log.size()) - 1);
  EXPECT_EQ(e->counters().promoted_steps, promoted);
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
