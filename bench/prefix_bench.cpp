// mstar-bench-prefix: prefix reuse on a hybrid model (recurrent checkpoints
// plus cached KV pages) against the same workload with the prefix cache off
// (the baseline, measured in the same run, alternating). Two workloads on
// the embedded model (CPU) or any model folder:
//   multi-turn: sessions whose every turn is the previous turn's prompt and
//     output plus a new user message; shareable = what the previous turn fed;
//   system-prompt: requests sharing one long system prompt, each with its own
//     question; shareable = the system prompt (from the second wave on).
// Each request's cached tokens come from its usage; the hit rate is cached
// over shareable tokens (goal >= 0.8 under pool pressure: the pool holds a
// few waves, not the whole run). TTFT is the mean time to first token with
// reuse against without ("ratio"). --json prints one object per workload.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/local_engine.hpp"
#include "models/nemotron_h.hpp"

namespace {

using mstar::engine::completion;
using mstar::engine::request_spec;
using mstar::engine::token_id;

struct options {
  std::string model = MSTAR_EMBEDDED_MODEL_DIR;
  int sessions = 8;
  int turns = 4;
  int user_tokens = 24;
  int output_tokens = 24;
  int system_tokens = 256;
  int requests = 32;
  int wave = 8;
  std::int64_t pages = 160;
  int rounds = 2;
  bool json = false;
  std::string device = "cpu";
};

struct tally {
  std::int64_t shareable = 0, cached = 0, requests = 0;
  double ttft_s = 0;
  double wall_s = 0;
};

std::vector<token_id> random_ids(std::mt19937& rng, int n, std::int64_t vocab) {
  std::uniform_int_distribution<std::int64_t> pick(3, vocab - 1);
  std::vector<token_id> ids(static_cast<std::size_t>(n));
  for (auto& id : ids)
    id = static_cast<token_id>(pick(rng));
  return ids;
}

mstar::result<std::unique_ptr<mstar::engine::local_engine>> make_engine(const options& opt,
                                                                        bool reuse) {
  mstar::models::run_options run;
  run.device = opt.device;
  auto model = mstar::models::nemotron_h_model::load(opt.model, run);
  if (!model)
    return model.error();
  mstar::engine::engine_config config;
  config.pools.max_num_pages = opt.pages;
  config.pools.prefix_cache = reuse;
  config.scheduler.max_running = opt.wave;
  return mstar::engine::local_engine::make(std::move(*model), config);
}

request_spec greedy(std::vector<token_id> prompt, int tokens) {
  request_spec r;
  r.prompt = std::move(prompt);
  r.stop.max_tokens = tokens;
  r.stop.ignore_eos = true;
  return r;
}

mstar::result<std::vector<completion>> run_wave(mstar::engine::local_engine& e,
                                                std::vector<request_spec> wave, tally& t) {
  const auto t0 = std::chrono::steady_clock::now();
  auto done = mstar::engine::run_to_completion(e, std::move(wave));
  t.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!done)
    return done.error();
  for (const auto& c : *done) {
    if (!c.errors[0].empty())
      return mstar::make_error(mstar::errc::internal, c.errors[0]);
    t.cached += c.counts.cached_tokens;
    t.ttft_s += c.time_to_first_token_s;
    ++t.requests;
  }
  return done;
}

mstar::result<tally> multi_turn(const options& opt, bool reuse) {
  auto e = make_engine(opt, reuse);
  if (!e)
    return e.error();
  const auto vocab = (*e)->model().vocab_size();
  std::mt19937 rng{2026};
  std::vector<std::vector<token_id>> history(static_cast<std::size_t>(opt.sessions));
  std::vector<std::int64_t> fed(history.size(), 0);  // tokens the last turn computed
  tally t;
  for (int turn = 0; turn < opt.turns; ++turn) {
    std::vector<request_spec> wave;
    for (std::size_t s = 0; s < history.size(); ++s) {
      const auto user = random_ids(rng, opt.user_tokens, vocab);
      history[s].insert(history[s].end(), user.begin(), user.end());
      t.shareable += fed[s];
      wave.push_back(greedy(history[s], opt.output_tokens));
    }
    auto done = run_wave(**e, std::move(wave), t);
    if (!done)
      return done.error();
    for (std::size_t s = 0; s < history.size(); ++s) {
      const auto& out = (*done)[s].tokens[0];
      fed[s] = static_cast<std::int64_t>(history[s].size() + out.size()) - 1;
      history[s].insert(history[s].end(), out.begin(), out.end());
    }
  }
  return t;
}

mstar::result<tally> system_prompt(const options& opt, bool reuse) {
  auto e = make_engine(opt, reuse);
  if (!e)
    return e.error();
  const auto vocab = (*e)->model().vocab_size();
  std::mt19937 rng{77};
  const auto system = random_ids(rng, opt.system_tokens, vocab);
  tally t;
  for (int sent = 0; sent < opt.requests; sent += opt.wave) {
    std::vector<request_spec> wave;
    for (int i = sent; i < std::min(opt.requests, sent + opt.wave); ++i) {
      auto prompt = system;
      const auto q = random_ids(rng, opt.user_tokens, vocab);
      prompt.insert(prompt.end(), q.begin(), q.end());
      // The first wave computes the system prompt; later ones may share it.
      if (sent > 0)
        t.shareable += opt.system_tokens;
      wave.push_back(greedy(std::move(prompt), opt.output_tokens));
    }
    if (auto done = run_wave(**e, std::move(wave), t); !done)
      return done.error();
  }
  return t;
}

int run(int argc, char** argv) {
  CLI::App app{
      "mstar-bench-prefix: prefix reuse on a hybrid model (recurrent checkpoints and cached "
      "pages) against the prefix cache off, same run: hit rate of shareable tokens and mean "
      "TTFT"};
  options opt;
  app.add_option("--model", opt.model, "Model folder (default: the embedded model)");
  app.add_option("--sessions", opt.sessions, "multi-turn: sessions")->check(CLI::Range(1, 1024));
  app.add_option("--turns", opt.turns, "multi-turn: turns per session")->check(CLI::Range(1, 64));
  app.add_option("--user-tokens", opt.user_tokens, "Tokens of each new user message")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--output-tokens", opt.output_tokens, "Tokens generated per request")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--system-tokens", opt.system_tokens, "system-prompt: its length")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--requests", opt.requests, "system-prompt: requests")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--wave", opt.wave, "Requests submitted together (and the running cap)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--pages", opt.pages,
                 "KV pages of 16 tokens: small enough that the pool evicts (pressure)")
      ->check(CLI::Range(8, 1 << 24));
  app.add_option("--rounds", opt.rounds, "Alternating rounds of each side")
      ->check(CLI::Range(1, 20));
  app.add_flag("--json", opt.json, "One JSON object per workload");
  app.add_option("--device", opt.device, "cpu, or cuda / cuda:N (bfloat16 there)");
  CLI11_PARSE(app, argc, argv);
  struct workload {
    const char* name;
    mstar::result<tally> (*fn)(const options&, bool);
  };
  for (const workload w :
       {workload{"multi_turn", multi_turn}, workload{"system_prompt", system_prompt}}) {
    tally with, without;
    for (int r = 0; r < opt.rounds; ++r) {
      for (const bool reuse : {true, false}) {
        auto t = w.fn(opt, reuse);
        if (!t) {
          std::fprintf(stderr, "mstar-bench-prefix: %s: %s\n", w.name, t.error().message().c_str());
          return 1;
        }
        auto& into = reuse ? with : without;
        into.shareable += t->shareable;
        into.cached += t->cached;
        into.requests += t->requests;
        into.ttft_s += t->ttft_s;
        into.wall_s += t->wall_s;
      }
    }
    const double hit = with.shareable > 0
                           ? static_cast<double>(with.cached) / static_cast<double>(with.shareable)
                           : 0.0;
    const double ttft_with =
        with.ttft_s / static_cast<double>(std::max<std::int64_t>(with.requests, 1));
    const double ttft_without =
        without.ttft_s / static_cast<double>(std::max<std::int64_t>(without.requests, 1));
    if (opt.json) {
      std::printf("%s\n", nlohmann::json{{"bench", "prefix"},
                                         {"workload", w.name},
                                         {"requests", with.requests},
                                         {"shareable_tokens", with.shareable},
                                         {"cached_tokens", with.cached},
                                         {"hit_rate", hit},
                                         {"cached_tokens_without_reuse", without.cached},
                                         {"ttft_ms_reuse", 1e3 * ttft_with},
                                         {"ttft_ms_no_reuse", 1e3 * ttft_without},
                                         {"ratio", ttft_without > 0 ? ttft_with / ttft_without : 0},
                                         {"hit_rate_goal_met", hit >= 0.8},
                                         {"wall_s_reuse", with.wall_s},
                                         {"wall_s_no_reuse", without.wall_s},
                                         {"pages", opt.pages},
                                         {"device", opt.device}}
                              .dump()
                              .c_str());
    } else {
      std::printf(
          "%-14s %lld requests: %lld of %lld shareable prompt tokens reused (hit rate "
          "%.3f; %lld without reuse); mean TTFT %.2f ms against %.2f ms (ratio %.3f); "
          "wall %.2f s against %.2f s\n",
          w.name, static_cast<long long>(with.requests), static_cast<long long>(with.cached),
          static_cast<long long>(with.shareable), hit, static_cast<long long>(without.cached),
          1e3 * ttft_with, 1e3 * ttft_without, ttft_without > 0 ? ttft_with / ttft_without : 0.0,
          with.wall_s, without.wall_s);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
