// Prefix reuse on a hybrid model (Mamba-2 + attention): the recurrent pool
// checkpoints a stream's state at every page boundary its prefill or decode
// reaches, keyed by the page key ending there; a new request whose prompt
// matches cached pages resumes from the deepest boundary with both pages and
// a checkpoint. Reuse must never change a token or a logit (float32 CPU,
// every boundary offset of a shared prefix), a conversation's next turn
// reuses the previous turn's output too, checkpoints are evicted least
// recently used when their slots run out (the pools' books balance after
// every run), and tenants (cache salts) never share. A trusted front end's
// keys in the Python wire form serve like the engine's own.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/hex.hpp"
#include "engine/preprocess.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::engine {
namespace {

engine_config pools_of(bool prefix_cache, std::int64_t checkpoints = 64) {
  engine_config config;
  config.schedule = schedule_mode::sync;
  config.pools.page_size = 4;
  config.pools.max_num_pages = 128;
  config.pools.max_slots = 8;
  config.pools.prefix_cache = prefix_cache;
  config.pools.checkpoint_slots = checkpoints;
  config.scheduler.max_batched_tokens = 64;
  return config;
}

std::vector<token_id> iota_ids(std::size_t n, token_id from) {
  std::vector<token_id> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = from + static_cast<token_id>((i * 37) % 400);
  return ids;
}

// Runs `r` alone and returns its completion.
completion run_one(local_engine& e, request_spec r) {
  auto done = run_to_completion(e, {std::move(r)});
  EXPECT_TRUE(done.has_value()) << done.error().message();
  EXPECT_EQ(done->size(), 1U);
  EXPECT_TRUE(done->front().errors[0].empty()) << done->front().errors[0];
  return done->front();
}

float max_diff(const completion& a, const completion& b) {
  float worst = 0;
  const auto& la = a.logits[0];
  const auto& lb = b.logits[0];
  EXPECT_EQ(la.size(), lb.size());
  for (std::size_t k = 0; k < std::min(la.size(), lb.size()); ++k) {
    for (std::size_t v = 0; v < la[k].size(); ++v)
      worst = std::max(worst, std::abs(la[k][v] - lb[k][v]));
  }
  return worst;
}

TEST(hybrid_prefix_reuse, the_model_is_prefix_skip_safe_with_checkpoints_only) {
  auto with = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  auto without = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true, 0));
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  EXPECT_TRUE(with->model().prefix_skip_safe());
  EXPECT_TRUE(with->pools().kv()->prefix_cache_open());
  EXPECT_FALSE(without->model().prefix_skip_safe());
  EXPECT_FALSE(without->pools().kv()->prefix_cache_open());
}

TEST(hybrid_prefix_reuse, reuse_keeps_every_token_and_logit_at_every_boundary_offset) {
  auto cached = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  auto cold = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(false));
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(cold, nullptr);
  const auto base = iota_ids(23, 5);
  (void)run_one(*cached, test::greedy_request(base, 4, true));
  float worst = 0;
  std::int64_t hits = 0;
  for (std::size_t offset = 1; offset <= base.size(); ++offset) {
    SCOPED_TRACE(fmt::format("shared prefix of {} tokens", offset));
    std::vector<token_id> prompt(base.begin(), base.begin() + static_cast<long>(offset));
    const auto suffix = iota_ids(5, 300 + static_cast<token_id>(offset));
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    const auto got = run_one(*cached, test::greedy_request(prompt, 6, true));
    const auto want = run_one(*cold, test::greedy_request(prompt, 6, true));
    EXPECT_EQ(got.tokens[0], want.tokens[0]);
    worst = std::max(worst, max_diff(got, want));
    // Every page boundary inside the shared prefix has its checkpoint.
    EXPECT_EQ(got.counts.cached_tokens, static_cast<std::int64_t>(offset / 4 * 4));
    hits += got.counts.cached_tokens > 0 ? 1 : 0;
    test::expect_pools_whole(*cached);
  }
  EXPECT_LT(worst, 1e-4F);
  EXPECT_EQ(hits, 20);  // offsets 4..23
  // An identical replay resumes from its last whole page short of the end.
  const auto again = run_one(*cached, test::greedy_request(base, 4, true));
  EXPECT_EQ(again.counts.cached_tokens, 20);
  const auto stats = cached->pools().stats();
  EXPECT_GT(stats.checkpoint_hits, 20);
  std::printf(
      "[ measured ] 23 offsets: logits within %.2e of a cold run; %lld checkpoints held, "
      "%lld captured, %lld hits for %lld tokens\n",
      static_cast<double>(worst), static_cast<long long>(stats.checkpoints),
      static_cast<long long>(stats.checkpoints_captured),
      static_cast<long long>(stats.checkpoint_hits),
      static_cast<long long>(stats.checkpoint_hit_tokens));
  test::expect_pools_empty(*cached);
}

TEST(hybrid_prefix_reuse, the_next_turn_of_a_conversation_reuses_the_last_output) {
  auto cached = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  auto cold = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(false));
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(cold, nullptr);
  auto history = iota_ids(10, 7);
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE(fmt::format("turn {}", turn));
    const auto got = run_one(*cached, test::greedy_request(history, 12, true));
    const auto want = run_one(*cold, test::greedy_request(history, 12, true));
    EXPECT_EQ(got.tokens[0], want.tokens[0]);
    EXPECT_LT(max_diff(got, want), 1e-4F);
    if (turn > 0) {
      // The previous turn fed all but its last output token: every whole
      // page of that is reused (its decode steps left checkpoints).
      EXPECT_EQ(got.counts.cached_tokens,
                static_cast<std::int64_t>((history.size() - 6 - 1) / 4 * 4));
    }
    history.insert(history.end(), got.tokens[0].begin(), got.tokens[0].end());
    const auto user = iota_ids(6, 200 + static_cast<token_id>(turn));
    history.insert(history.end(), user.begin(), user.end());
  }
  test::expect_pools_empty(*cached);
}

TEST(hybrid_prefix_reuse, checkpoints_go_least_recently_used_and_tenants_never_share) {
  auto e = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true, 3));
  ASSERT_NE(e, nullptr);
  const auto base = iota_ids(40, 11);
  (void)run_one(*e, test::greedy_request(base, 1));
  // 10 boundaries (4..40), 3 slots: the last three stay.
  auto stats = e->pools().stats();
  EXPECT_EQ(stats.checkpoints, 3);
  EXPECT_EQ(stats.checkpoints_captured, 10);
  EXPECT_EQ(stats.checkpoints_evicted, 7);
  test::expect_pools_whole(*e);
  auto prefix_of = [&](std::size_t n) {
    std::vector<token_id> p(base.begin(), base.begin() + static_cast<long>(n));
    p.push_back(450);
    p.push_back(451);
    return p;
  };
  EXPECT_EQ(run_one(*e, test::greedy_request(prefix_of(39), 1)).counts.cached_tokens, 36);
  EXPECT_EQ(run_one(*e, test::greedy_request(prefix_of(13), 1)).counts.cached_tokens, 0)
      << "the boundary at 12 was evicted";
  test::expect_pools_empty(*e);
  // Salted: another tenant's identical prompt finds nothing, its own twin does.
  auto tenants = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  ASSERT_NE(tenants, nullptr);
  auto salted = [&](const std::string& salt) {
    auto r = test::greedy_request(prefix_of(30), 1);
    r.cache_salt = salt;
    return run_one(*tenants, r).counts.cached_tokens;
  };
  EXPECT_EQ(salted("tenant-a"), 0);
  EXPECT_EQ(salted("tenant-b"), 0);
  EXPECT_EQ(salted("tenant-a"), 28);
  test::expect_pools_empty(*tenants);
}

TEST(hybrid_prefix_reuse, batched_and_overlapped_requests_reuse_and_agree_with_cold_runs) {
  // Several sessions at once, some sharing a system prompt, with preemption
  // pressure; overlap scheduling; tokens must equal the cold engine's.
  std::vector<request_spec> first, second;
  const auto system = iota_ids(18, 21);
  for (int i = 0; i < 6; ++i) {
    auto p = system;
    const auto user = iota_ids(3 + static_cast<std::size_t>(i), 100 + static_cast<token_id>(i));
    p.insert(p.end(), user.begin(), user.end());
    first.push_back(test::greedy_request(p, 9));
    p.push_back(77);
    second.push_back(test::greedy_request(p, 9));
  }
  for (const auto mode : {schedule_mode::sync, schedule_mode::overlap}) {
    auto config = pools_of(true);
    config.schedule = mode;
    config.pools.max_num_pages = 40;
    auto e = test::fixture_engine("nemotron_h_tiny_hybrid", config);
    auto cold = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(false));
    ASSERT_NE(e, nullptr);
    ASSERT_NE(cold, nullptr);
    std::int64_t cached_tokens = 0;
    for (const auto* wave : {&first, &second}) {
      auto got = run_to_completion(*e, *wave);
      auto want = run_to_completion(*cold, *wave);
      ASSERT_TRUE(got.has_value() && want.has_value());
      for (std::size_t i = 0; i < got->size(); ++i) {
        EXPECT_EQ((*got)[i].tokens[0], (*want)[i].tokens[0]) << i;
        cached_tokens += (*got)[i].counts.cached_tokens;
      }
      test::expect_pools_empty(*e);
    }
    EXPECT_GT(cached_tokens, 0) << "the second wave should resume inside its first turn";
    std::printf(
        "[ measured ] %s: %lld prompt tokens of the second wave resumed, %lld "
        "preemptions\n",
        mode == schedule_mode::sync ? "sync" : "overlap", static_cast<long long>(cached_tokens),
        static_cast<long long>(e->sched().preemptions()));
  }
}

// A trusted front end's keys in the Python engine's wire form
// (`request_spec::prefix`): what a Python preprocess stage sends for an ids
// prompt, here made from our own keys (byte-compatible with Python's: the
// published vectors pass).
prefix_wire wire_of(const std::vector<token_id>& prompt, bool decode = true) {
  const auto seed = page_keys(prompt, 4).value();
  prefix_wire w;
  for (const auto& k : seed.keys)
    w.keys.push_back(to_hex(k));
  w.tail = seed.tail;
  if (decode)
    w.decode = "text_outputs";
  return w;
}

TEST(front_end_keys, a_front_ends_keys_reuse_like_the_engines_own) {
  auto e = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  ASSERT_NE(e, nullptr);
  const auto prompt = iota_ids(18, 9);
  auto keyed = [&](bool decode) {
    auto r = test::greedy_request(prompt, 8);
    r.prefix = wire_of(prompt, decode);
    return r;
  };
  const auto first = run_one(*e, keyed(true));
  EXPECT_EQ(first.counts.cached_tokens, 0);
  EXPECT_EQ(run_one(*e, keyed(true)).counts.cached_tokens, 16);
  // The engine's own keys for the same ids are the same keys.
  EXPECT_EQ(run_one(*e, test::greedy_request(prompt, 8)).counts.cached_tokens, 16);
  // The next turn reuses the output's pages only when the front end asked
  // for generated ids to be keyed (prefix_decode).
  auto next = prompt;
  next.insert(next.end(), first.tokens[0].begin(), first.tokens[0].end());
  next.push_back(300);
  EXPECT_EQ(run_one(*e, test::greedy_request(next, 2)).counts.cached_tokens, 24);
  test::expect_pools_empty(*e);

  auto plain = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  ASSERT_NE(plain, nullptr);
  const auto out = run_one(*plain, keyed(false)).tokens[0];
  auto turn = prompt;
  turn.insert(turn.end(), out.begin(), out.end());
  turn.push_back(300);
  EXPECT_EQ(run_one(*plain, test::greedy_request(turn, 2)).counts.cached_tokens, 16)
      << "without prefix_decode no generated page is keyed";
  test::expect_pools_empty(*plain);
}

TEST(front_end_keys, bad_keys_are_refused_at_submit_naming_the_field) {
  auto e = test::fixture_engine("nemotron_h_tiny_hybrid", pools_of(true));
  ASSERT_NE(e, nullptr);
  const auto prompt = iota_ids(10, 9);
  auto refused = [&](prefix_wire w, std::string salt, const std::string& says) {
    auto r = test::greedy_request(prompt, 2);
    r.prefix = std::move(w);
    r.cache_salt = std::move(salt);
    auto id = e->submit(r);
    ASSERT_FALSE(id.has_value()) << says;
    EXPECT_NE(id.error().message().find(says), std::string::npos) << id.error().message();
  };
  auto w = wire_of(prompt);
  w.keys[1] = "not hex";
  refused(w, "", "prefix_keys[1]");
  w = wire_of(prompt);
  w.tail = {1, 2};
  refused(w, "", "prefix_tail");
  w = wire_of(prompt);
  w.layout.push_back({7, 7, "prefill", "", ""});
  refused(w, "", "prefix_layout");
  w = wire_of(prompt);
  w.keys.resize(1);  // a whole page unnamed (only the partial page's key may be left out)
  refused(w, "", "prefix_keys");
  refused(wire_of(prompt), "tenant", "cache_salt");
  EXPECT_TRUE(e->idle());
}

}  // namespace
}  // namespace mstar::engine
