// The engine through its actors (real actor systems): the same tokens as
// each request run alone with many threads submitting at once and pools
// small enough to preempt, cancellation by handle, bad requests, a worker
// that fails (an error, an exception) failing the requests it touched
// without hanging anyone, stopping, and an application's own actor system.
#include "actors/runtime.hpp"

#include <atomic>
#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <random>
#include <thread>

#include "core/hex.hpp"
#include "engine/preprocess.hpp"
#include "tests/actors/handle_support.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/engine/failing_model.hpp"

namespace mstar::actors {
namespace {

using engine::finish_reason;
using engine::request_spec;
using engine::token_id;

constexpr const char* hybrid = "nemotron_h_tiny_hybrid";

std::unique_ptr<models::causal_lm> fixture_model(const std::string& name = hybrid) {
  auto m = models::nemotron_h_model::load(test::model_dir(name));
  EXPECT_TRUE(m.has_value()) << m.error().message();
  return m ? std::move(*m) : nullptr;
}

using mstar::test::expect_pools_empty;
using mstar::test::read_all;
using mstar::test::tokens_of;

class runtime_modes : public ::testing::TestWithParam<engine::schedule_mode> {};

// Both schedules: overlap (the default) stages each guessed next step in
// the pools behind the current step's commit and runs it on those plans.
TEST_P(runtime_modes, sixteen_threads_get_the_tokens_each_request_gets_alone) {
  std::mt19937 rng{11};
  std::vector<request_spec> specs;
  for (int i = 0; i < 128; ++i) {
    request_spec r;
    const int len = 1 + static_cast<int>(rng() % 30);
    for (int t = 0; t < len; ++t)
      r.prompt.push_back(3 + rng() % 256);
    r.stop.max_tokens = 1 + static_cast<std::int32_t>(rng() % 10);
    r.stop.ignore_eos = true;
    if (i % 2 == 1) {
      r.sampling.temperature = 0.7F;
      r.sampling.seed = rng();
    }
    specs.push_back(std::move(r));
  }
  // Alone, through the direct loop.
  auto alone = engine::local_engine::make(fixture_model(), {});
  ASSERT_TRUE(alone.has_value());
  std::vector<std::vector<token_id>> expected;
  for (const auto& s : specs) {
    auto done = engine::run_to_completion(**alone, {s});
    ASSERT_TRUE(done.has_value());
    expected.push_back(done->front().tokens[0]);
  }
  engine::engine_config config;
  config.pools.page_size = 4;
  config.pools.max_num_pages = 24;
  config.pools.max_slots = 6;
  config.scheduler.max_batched_tokens = 32;
  config.schedule = GetParam();
  auto rt = runtime::start(fixture_model(), config, 4);
  ASSERT_TRUE(rt.has_value()) << rt.error().message();
  std::vector<std::vector<token_id>> got(specs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < specs.size(); i += 16) {
        auto h = (*rt)->submit(specs[i]);
        got[i] = tokens_of(read_all(h));
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (std::size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "request " << i;
  auto s = (*rt)->stats();
  ASSERT_TRUE(s.has_value());
  std::printf(
      "[ measured ] %s: %lld steps, %lld refused, %lld preemptions, %lld launched ahead, "
      "%lld rows dropped\n",
      std::string(to_string(GetParam())).c_str(), static_cast<long long>(s->steps),
      static_cast<long long>(s->refused_steps), static_cast<long long>(s->preemptions),
      static_cast<long long>(s->ahead_steps), static_cast<long long>(s->dropped_rows));
  EXPECT_GT(s->preemptions, 0) << "pools never short: preemption untested";
  // Sixteen threads keep requests arriving, so overlap rarely launches a
  // step ahead here (none while sequences wait to join): this test checks
  // its tokens; a_steady_decode_loop_launches_its_steps_ahead checks that
  // it does.
  if (GetParam() == engine::schedule_mode::sync) {
    EXPECT_EQ(s->ahead_steps + s->dropped_rows, 0);
  }
  expect_pools_empty(**rt);
}

// A steady decode loop under overlap: after the prompts, each step was
// launched while the one before ran (admitted and planned behind its
// commit, its ids looped back from that one's draws); one request stops at
// an id nobody could foresee, so the step launched ahead over-ran for it and
// its row was rolled back. The tokens are those of sync mode.
TEST(runtime, a_steady_decode_loop_launches_its_steps_ahead) {
  std::vector<request_spec> specs;
  for (token_id i = 0; i < 4; ++i)
    specs.push_back(test::greedy_request({5, 6, static_cast<token_id>(7 + i)}, 40));
  {
    // Request 0 stops at the id it draws 11th (the first time it does).
    auto rt = runtime::start(fixture_model(), {}, 2);
    ASSERT_TRUE(rt.has_value()) << rt.error().message();
    auto h = (*rt)->submit(specs[0]);
    const auto alone = tokens_of(read_all(h));
    ASSERT_GT(alone.size(), 11U);
    specs[0].stop.stop_token_ids.assign(1, alone[10]);
  }
  std::vector<std::vector<token_id>> tokens[2];
  runtime_stats stats[2];
  for (const auto mode : {engine::schedule_mode::sync, engine::schedule_mode::overlap}) {
    engine::engine_config config;
    config.schedule = mode;
    auto rt = runtime::start(fixture_model(), config, 2);
    ASSERT_TRUE(rt.has_value()) << rt.error().message();
    // Submitted together, read after: the four run as one batch.
    std::vector<request_handle> handles;
    for (const auto& s : specs)
      handles.push_back((*rt)->submit(s));
    const auto m = static_cast<std::size_t>(mode);
    for (auto& h : handles)
      tokens[m].push_back(tokens_of(read_all(h)));
    auto s = (*rt)->stats();
    ASSERT_TRUE(s.has_value());
    stats[m] = *s;
    expect_pools_empty(**rt);
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_LE(tokens[0][0].size(), 11U);
  const auto& o = stats[static_cast<std::size_t>(engine::schedule_mode::overlap)];
  std::printf("[ measured ] overlap: %lld steps, %lld launched ahead, %lld rows dropped\n",
              static_cast<long long>(o.steps), static_cast<long long>(o.ahead_steps),
              static_cast<long long>(o.dropped_rows));
  // All but the first steps (while the prompts arrive one by one through the
  // preprocess stage: a few here, more on a loaded machine) and the last.
  EXPECT_GE(o.ahead_steps, o.steps / 2);
  EXPECT_EQ(o.dropped_rows, 1);
}

INSTANTIATE_TEST_SUITE_P(schedules, runtime_modes,
                         ::testing::Values(engine::schedule_mode::sync,
                                           engine::schedule_mode::overlap),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST(runtime, dropping_a_handle_cancels_its_request_and_frees_its_state) {
  auto rt = runtime::start(fixture_model(), {}, 2);
  ASSERT_TRUE(rt.has_value());
  {
    auto h = (*rt)->submit(test::greedy_request({5, 6, 7}, 100000));
    auto first = h.next_for(std::chrono::seconds(60));
    ASSERT_TRUE(first.has_value());
    EXPECT_FALSE(first->finished);
  }  // cancelled here, mid-decode
  auto h = (*rt)->submit(test::greedy_request({5, 6, 7}, 100000));
  ASSERT_TRUE(h.next_for(std::chrono::seconds(60)).has_value());
  h.cancel();
  const auto rest = read_all(h);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().finished, finish_reason::cancelled);
  (*rt)->stop();  // drains: the dropped request has ended too
  auto again = (*rt)->submit(test::greedy_request({5}, 2));
  const auto refused = read_all(again);
  ASSERT_EQ(refused.size(), 1U);
  EXPECT_EQ(refused[0].finished, finish_reason::error);
  EXPECT_NE(refused[0].error.find("stopped"), std::string::npos);
}

TEST(runtime, a_bad_request_ends_with_an_error_naming_the_field) {
  auto rt = runtime::start(fixture_model(), {}, 2);
  ASSERT_TRUE(rt.has_value());
  auto bad = test::greedy_request({5, 100000}, 2);
  auto h = (*rt)->submit(bad);
  const auto ds = read_all(h);
  ASSERT_EQ(ds.size(), 1U);
  EXPECT_EQ(ds[0].finished, finish_reason::error);
  EXPECT_NE(ds[0].error.find("100000"), std::string::npos) << ds[0].error;
  request_spec text;
  text.text = "";
  auto h2 = (*rt)->submit(text);
  const auto ds2 = read_all(h2);
  ASSERT_EQ(ds2.size(), 1U);
  EXPECT_EQ(ds2[0].finished, finish_reason::error);
  expect_pools_empty(**rt);
}

TEST(runtime, a_front_ends_prefix_keys_are_used_and_bad_ones_fail_the_request) {
  engine::engine_config config;
  config.pools.page_size = 4;
  auto rt = runtime::start(fixture_model(), config, 2);
  ASSERT_TRUE(rt.has_value());
  const std::vector<engine::token_id> prompt{5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const auto seed = engine::page_keys(prompt, 4).value();
  engine::prefix_wire w;
  for (const auto& k : seed.keys)
    w.keys.push_back(to_hex(k));
  w.tail = seed.tail;
  auto r = test::greedy_request(prompt, 3);
  r.prefix = w;
  auto cached = [&] {
    auto h = (*rt)->submit(r);
    return read_all(h).back().counts.cached_tokens;
  };
  EXPECT_EQ(cached(), 0);
  EXPECT_EQ(cached(), 8);
  r.prefix->keys[0] = "zz";
  auto bad = (*rt)->submit(r);
  const auto ds = read_all(bad);
  ASSERT_EQ(ds.size(), 1U);
  EXPECT_EQ(ds[0].finished, finish_reason::error);
  EXPECT_NE(ds[0].error.find("prefix_keys[0]"), std::string::npos) << ds[0].error;
  expect_pools_empty(**rt);
}

TEST(runtime, a_failing_forward_fails_the_requests_in_its_step_and_the_engine_goes_on) {
  auto rt = runtime::start(
      std::make_unique<test::failing_model>(fixture_model(), 3, "injected device fault"), {}, 2);
  ASSERT_TRUE(rt.has_value());
  auto a = (*rt)->submit(test::greedy_request({5, 6}, 50));
  auto b = (*rt)->submit(test::greedy_request({7, 8}, 50));
  for (auto* h : {&a, &b}) {
    const auto ds = read_all(*h);
    ASSERT_FALSE(ds.empty());
    EXPECT_EQ(ds.back().finished, finish_reason::error);
    EXPECT_NE(ds.back().error.find("injected device fault"), std::string::npos) << ds.back().error;
  }
  expect_pools_empty(**rt);  // the failed step was rolled back in every pool
}

TEST(runtime, a_worker_that_throws_fails_every_request_and_never_hangs_a_caller) {
  auto rt = runtime::start(
      std::make_unique<test::failing_model>(fixture_model(), 2, "injected device fault", true), {},
      2);
  ASSERT_TRUE(rt.has_value());
  auto a = (*rt)->submit(test::greedy_request({5, 6}, 50));
  const auto ds = read_all(a);
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds.back().finished, finish_reason::error);
  auto later = (*rt)->submit(test::greedy_request({5}, 2));
  const auto ds2 = read_all(later);
  ASSERT_FALSE(ds2.empty());
  EXPECT_EQ(ds2.back().finished, finish_reason::error);
  EXPECT_FALSE(ds2.back().error.empty());
}

TEST(runtime, a_cancel_that_overtakes_tokenization_still_cancels) {
  // The cancel reaches the conductor while the request is still in the
  // preprocess stage: it must not be lost (the request would run its
  // 100,000 tokens).
  auto rt = runtime::start(fixture_model(), {});
  ASSERT_TRUE(rt.has_value());
  for (int i = 0; i < 20; ++i) {
    auto h = (*rt)->submit(test::greedy_request({9, 10, 11, 12}, 100000));
    h.cancel();
    // Bounded: a lost cancel shows as a request still running after 10 s.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::optional<finish_reason> end;
    while (!h.done() && std::chrono::steady_clock::now() < until) {
      if (auto d = h.next_for(std::chrono::milliseconds(100)); d && d->finished)
        end = d->finished;
    }
    ASSERT_TRUE(h.done()) << "round " << i << ": the cancel was lost";
    EXPECT_EQ(end, finish_reason::cancelled) << "round " << i;
  }
  expect_pools_empty(**rt);
}

TEST(runtime, runs_inside_an_applications_actor_system) {
  caf::actor_system_config cfg;
  runtime::add_message_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto rt = runtime::start_in(sys, fixture_model(), {});
  ASSERT_TRUE(rt.has_value());
  std::atomic<int> tokens{0};
  std::atomic<bool> finished{false};
  (*rt)->submit(test::greedy_request({9, 10, 11}, 6), [&](const engine::delta& d) {
    tokens += static_cast<int>(d.tokens.size());
    if (d.finished)
      finished = true;
  });
  (*rt)->stop();
  EXPECT_TRUE(finished);
  EXPECT_EQ(tokens, 6);
}

}  // namespace
}  // namespace mstar::actors
