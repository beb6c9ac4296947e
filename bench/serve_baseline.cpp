// The in-process baseline of the HTTP benchmark (bench/serve_bench.py): the
// engine's actors (actors::runtime, what mstar-serve embeds) driven at
// concurrency C by closed-loop clients, with no HTTP in between. Each client
// submits a request of ISL random token ids (seeded) with max_tokens OSL and
// ignore_eos, waits until it finishes, and submits the next, until `requests`
// requests have finished. Reported per concurrency as one JSON line: output
// tokens/s over the wall time (first submit to last finish), and TTFT, ITL
// and end-to-end latency p50/p99 computed as AIPerf computes them (per
// request ITL = (E2E - TTFT) / (tokens - 1); percentiles interpolate
// linearly), so the two sides read the same way.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fmt/format.h>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/runtime.hpp"
#include "models/nemotron_h.hpp"

namespace {

using mstar::engine::request_spec;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string model = MSTAR_EMBEDDED_MODEL_DIR;
  std::string device = "cpu";
  std::vector<int> concurrency{1, 4, 16, 64};
  int requests = 0;  // 0: 4 per client, at least 16
  int warmup = -1;   // -1: one per client
  int isl = 128, osl = 64;
  std::uint64_t seed = 1;
  mstar::engine::engine_config engine;
  int max_slots = 0;  // 0: max_running + 1
};

/// What one request measured, in seconds from its submit.
struct request_timing {
  double ttft_s = 0, e2e_s = 0;
  std::int64_t tokens = 0;
  std::string error;  ///< empty: it finished with its OSL tokens
};

std::vector<mstar::engine::token_id> random_prompt(std::uint64_t seed, int index, int isl,
                                                   std::int64_t vocab) {
  std::mt19937_64 rng{seed * 1000003ULL + static_cast<std::uint64_t>(index)};
  std::vector<mstar::engine::token_id> ids(static_cast<std::size_t>(isl));
  for (auto& id : ids)
    id = static_cast<mstar::engine::token_id>(3 + rng() % static_cast<std::uint64_t>(vocab - 3));
  return ids;
}

/// Closed-loop clients over the runtime's callback API: a request's last
/// delta submits the client's next one, so exactly `clients` requests are in
/// flight until `total` have been started. Deltas arrive on engine threads.
class closed_loop {
 public:
  closed_loop(mstar::actors::runtime& rt, const options& opt, int total, int first_index)
      : rt_(rt), opt_(opt), total_(total), first_index_(first_index) {}

  /// Runs with `clients` clients; returns the wall seconds, first submit to last finish.
  double run(int clients) {
    const auto t0 = clock_type::now();
    for (int c = 0; c < clients && c < total_; ++c)
      start_next();
    std::unique_lock lock{mutex_};
    done_cv_.wait(lock, [&] { return finished_ == total_; });
    return std::chrono::duration<double>(last_finish_ - t0).count();
  }
  [[nodiscard]] const std::vector<request_timing>& timings() const { return timings_; }

 private:
  /// Claims the next request index; false once `total_` have been started.
  bool claim_locked(int& index) {
    if (started_ == total_)
      return false;
    index = started_++;
    return true;
  }

  void start_next() {
    int index = 0;
    {
      std::lock_guard lock{mutex_};
      if (!claim_locked(index))
        return;
    }
    submit(index);
  }

  void submit(int index) {
    request_spec spec;
    spec.prompt =
        random_prompt(opt_.seed, first_index_ + index, opt_.isl, rt_.model().vocab_size());
    spec.stop.max_tokens = opt_.osl;
    spec.stop.ignore_eos = true;
    const auto submitted = clock_type::now();
    auto timing = std::make_shared<request_timing>();
    rt_.submit(std::move(spec), [this, submitted, timing](const mstar::engine::delta& d) {
      on_delta(submitted, *timing, d);
    });
  }

  void on_delta(clock_type::time_point submitted, request_timing& t,
                const mstar::engine::delta& d) {
    const double since = std::chrono::duration<double>(clock_type::now() - submitted).count();
    if (!d.tokens.empty() && t.tokens == 0)
      t.ttft_s = since;
    t.tokens += static_cast<std::int64_t>(d.tokens.size());
    if (!d.finished)
      return;
    t.e2e_s = since;
    if (*d.finished == mstar::engine::finish_reason::error)
      t.error = d.error.empty() ? "failed" : d.error;
    else if (t.tokens != opt_.osl)
      t.error = fmt::format("{} tokens, not {}", t.tokens, opt_.osl);
    // The next request is claimed under the same lock that counts this one
    // finished: once the last one is counted, run() may return and destroy
    // this object, so nothing here touches `this` after that unlock.
    int next = 0;
    bool more = false;
    {
      std::lock_guard lock{mutex_};
      timings_.push_back(t);
      last_finish_ = clock_type::now();
      more = claim_locked(next);
      if (++finished_ == total_)
        done_cv_.notify_all();
    }
    if (more)
      submit(next);
  }

  mstar::actors::runtime& rt_;
  const options& opt_;
  const int total_, first_index_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  int started_ = 0, finished_ = 0;
  clock_type::time_point last_finish_;
  std::vector<request_timing> timings_;
};

/// numpy's default (linear) percentile, as AIPerf reports them.
double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const double at = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(at);
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

nlohmann::json summarize(const options& opt, int clients, double wall_s,
                         const std::vector<request_timing>& timings) {
  std::vector<double> ttft, itl, e2e;
  std::int64_t tokens = 0, failed = 0;
  for (const auto& t : timings) {
    tokens += t.tokens;
    if (!t.error.empty()) {
      ++failed;
      continue;
    }
    ttft.push_back(1e3 * t.ttft_s);
    e2e.push_back(1e3 * t.e2e_s);
    if (t.tokens > 1)
      itl.push_back(1e3 * (t.e2e_s - t.ttft_s) / static_cast<double>(t.tokens - 1));
  }
  nlohmann::json line{{"bench", "serve_baseline"},
                      {"through", "in_process"},
                      {"concurrency", clients},
                      {"requests", timings.size()},
                      {"failed", failed},
                      {"isl", opt.isl},
                      {"osl", opt.osl},
                      {"duration_s", wall_s},
                      {"output_tokens", tokens},
                      {"output_tokens_per_s", static_cast<double>(tokens) / wall_s},
                      {"requests_per_s", static_cast<double>(timings.size()) / wall_s}};
  for (const auto& [name, v] : {std::pair{"ttft_ms", &ttft}, {"itl_ms", &itl}, {"e2e_ms", &e2e}}) {
    line[fmt::format("{}_p50", name)] = percentile(*v, 50);
    line[fmt::format("{}_p99", name)] = percentile(*v, 99);
  }
  for (const auto& t : timings) {
    if (!t.error.empty()) {
      line["first_error"] = t.error;
      break;
    }
  }
  return line;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "mstar-bench-serve-baseline: %s\n", message.c_str());
  return 1;
}

void add_options(CLI::App& app, options& opt) {
  app.add_option("--model", opt.model, "Model folder")->capture_default_str();
  app.add_option("--device", opt.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--concurrency", opt.concurrency, "Clients in flight (one run per value)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--requests", opt.requests, "Requests per run (0: four per client, at least 16)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", opt.warmup, "Warm-up requests before each run (-1: one per client)")
      ->check(CLI::Range(-1, 1 << 20));
  app.add_option("--isl", opt.isl, "Prompt tokens per request")->check(CLI::Range(1, 1 << 20));
  app.add_option("--osl", opt.osl, "Generated tokens per request (max_tokens, ignore_eos)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", opt.seed, "Seed of the random prompts");
  app.add_option("--max-running", opt.engine.scheduler.max_running, "Sequences running at once")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--max-batched-tokens", opt.engine.scheduler.max_batched_tokens,
                 "Tokens one step may feed")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-pages", opt.engine.pools.max_num_pages, "KV pages in the pool")
      ->check(CLI::Range(2, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-slots", opt.max_slots, "Recurrent slots, sink included (0: running + 1)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mstar-bench-serve-baseline: the in-process engine (actors::runtime) under closed-loop "
      "clients, the baseline of bench/serve_bench.py's HTTP runs. One JSON line per "
      "concurrency: output tokens/s, TTFT / ITL / E2E p50 and p99 in ms, failed requests."};
  options opt;
  add_options(app, opt);
  CLI11_PARSE(app, argc, argv);
  opt.engine.pools.max_slots =
      opt.max_slots > 0 ? opt.max_slots : opt.engine.scheduler.max_running + 1;
  mstar::models::run_options run;
  run.device = opt.device;
  auto model = mstar::models::nemotron_h_model::load(opt.model, run);
  if (!model)
    return fail(model.error().message());
  auto rt = mstar::actors::runtime::start(std::move(*model), opt.engine);
  if (!rt)
    return fail(rt.error().message());
  if (auto warmed = (*rt)->warm_up(); !warmed)
    return fail(warmed.error().message());
  int index = 0, failed = 0;
  for (const int c : opt.concurrency) {
    const int warmup = opt.warmup < 0 ? c : opt.warmup;
    if (warmup > 0) {
      closed_loop w{**rt, opt, warmup, index};
      (void)w.run(c);
      index += warmup;
    }
    const int total = opt.requests > 0 ? opt.requests : std::max(16, 4 * c);
    closed_loop loop{**rt, opt, total, index};
    const double wall = loop.run(c);
    index += total;
    auto line = summarize(opt, c, wall, loop.timings());
    failed += line["failed"].get<int>();
    std::puts(line.dump().c_str());
    std::fflush(stdout);
  }
  (*rt)->stop();
  return failed == 0 ? 0 : 1;
}
