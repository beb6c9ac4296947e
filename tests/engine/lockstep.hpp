#pragma once

// The overlap checker's parts, shared by the CPU test
// (tests/engine/overlap_test.cpp) and the GPU one (tests/gpu/): what each
// step ran as the checker compares it, a random workload, and the lockstep
// driver that runs it through a sync and an overlap engine.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <random>
#include <sstream>

#include "engine/local_engine.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::test::lockstep {

using engine::completion_collector;
using engine::local_engine;
using engine::request_spec;
using engine::scheduled_row;
using engine::step_trace;
using engine::token_id;

// Everything a plan tells the kernels about each row but which page or
// slot, as text; `rows`: the plan rows to describe, in order (empty: all).
inline std::string describe(const models::step_plans& plans, std::span<const std::size_t> rows) {
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
    // No structured bindings: clang 14 cannot capture them in a lambda.
    for (const auto& label_plan : plans.kv->labels) {
      const auto& lp = label_plan.second;
      // Not the label-wide decode flag: a step launched ahead keeps the
      // rows of a request cancelled meanwhile (a prefill chunk, say) in
      // its plan, rolled back and left out of `rows`, and they may clear
      // it. Each described row's decode slot is its last_page_len - 1.
      out << "kv:" << label_plan.first << ' ';
      each(lp.last_page_len.size(), [&](std::size_t r) {
        out << '(' << lp.qo_indptr[r + 1] - lp.qo_indptr[r] << ' '
            << lp.kv_indptr[r + 1] - lp.kv_indptr[r] << ' ' << lp.last_page_len[r];
        if (lp.decode && lp.decode_offset[r] != lp.last_page_len[r] - 1)
          out << " decode slot " << lp.decode_offset[r];
        out << ") ";
      });
    }
    out << "kv_forks=" << plans.kv->pre_forks.size() << '/' << plans.kv->post_forks.size() << ' ';
  }
  if (plans.recurrent) {
    for (const auto& label_rows : plans.recurrent->labels) {
      const auto& a = label_rows.second;
      out << "rec:" << label_rows.first << " has_state=";
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

inline std::string rows_text(const std::vector<scheduled_row>& rows) {
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
inline std::string diverges(const ran& a, const ran& b) {
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

/// An on_step hook that appends each step to `log`.
inline std::function<void(const step_trace&)> record_into(std::vector<ran>& log) {
  return [&log](const step_trace& t) {
    log.push_back({t.serial,
                   {t.rows.begin(), t.rows.end()},
                   describe(*t.plans, t.plan_rows),
                   t.output->logits,
                   t.output->sampled,
                   t.ahead,
                   t.dropped});
  };
}

// `count` random requests: prompts of 1-30 ids, 1-24 tokens; a third
// sampled with their own seed, some with n = 2, some stopping at eos or at
// stop ids.
inline std::vector<request_spec> random_requests(std::mt19937& rng, int count) {
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

/// Runs `requests` through `sync` and `over` (engines recording into
/// `sync_log` and `overlap_log`) in lockstep: arrivals in bursts, now and
/// then a cancellation, one `step()` each per round; after every round the
/// steps each ran must agree (`diverges`) and the pools keep their books.
/// At the end every completion must match. `rng` drives the schedule.
inline void run(local_engine& sync_engine, local_engine& over_engine, std::vector<ran>& sync_log,
                std::vector<ran>& overlap_log, const std::vector<request_spec>& requests,
                std::mt19937& rng, int& steps) {
  auto* sync = &sync_engine;
  auto* over = &over_engine;
  completion_collector sync_out, over_out;
  std::size_t next = 0;
  std::vector<std::size_t> late;
  steps = 0;
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
}

}  // namespace mstar::test::lockstep
