// The engine's control plane and end-to-end decode, each against the same
// work without the actors, in the same run:
// - control: decode steps of 256 running requests on a null model (the
//   embedded model's pools and step declarations, no math in the forward),
//   through the actors (conductor, pool actors, worker) vs the same
//   scheduler and pools called directly (engine::local_engine). Reported as
//   steps/s and µs per step (goal: under 100 µs per step through the actors).
// - e2e: decode tokens/s of the embedded model through the actors vs the
//   direct loop (goal: ratio >= 0.95).
// - overlap: the control-plane case through the actors with
//   schedule_mode::overlap vs sync (the guess of each next step admitted
//   and planned behind the current step's commit; goal: never slower),
//   and the same for the embedded model's decode.
#include <CLI/CLI.hpp>
#include <condition_variable>
#include <mutex>

#include "actors/runtime.hpp"
#include "bench/harness.hpp"
#include "engine/local_engine.hpp"
#include "models/nemotron_h.hpp"

namespace {

using mstar::engine::request_spec;
using clock_type = std::chrono::steady_clock;

// The embedded model's pools and declarations; a forward that does no math.
class null_model final : public mstar::models::causal_lm {
 public:
  explicit null_model(std::unique_ptr<mstar::models::causal_lm> shape) : shape_(std::move(shape)) {}
  const mstar::models::tokenizer* tok() const noexcept override { return shape_->tok(); }
  std::int64_t vocab_size() const noexcept override { return shape_->vocab_size(); }
  std::span<const std::int64_t> eos_token_ids() const noexcept override { return {}; }
  bool prefix_skip_safe() const noexcept override { return false; }
  mstar::result<mstar::models::pool_spec> pools(
      const mstar::models::pool_options& o) const override {
    return shape_->pools(o);
  }
  mstar::result<void> bind(mstar::resources::kv_pool*,
                           mstar::resources::recurrent_state_pool*) override {
    return {};
  }
  mstar::models::step_request declare(
      std::span<const mstar::models::step_row> rows) const override {
    return shape_->declare(rows);
  }
  mstar::result<mstar::models::forward_output> forward(
      std::span<const mstar::models::step_row> rows, const mstar::models::step_plans&,
      std::span<const mstar::models::row_sampling> draws) override {
    mstar::models::forward_output out;
    if (draws.empty()) {
      out.logits.assign(rows.size() * static_cast<std::size_t>(vocab_size()), 0.0F);
    } else {
      out.sampled.assign(rows.size(), 5);
    }
    return out;
  }
  std::string device_name() const override { return "null"; }
  mstar::dtype compute_dtype() const noexcept override { return mstar::dtype::float32; }
  std::int64_t num_parameters() const noexcept override { return 0; }
  bool on_gpu() const noexcept override { return false; }

 private:
  std::unique_ptr<mstar::models::causal_lm> shape_;
};

std::unique_ptr<mstar::models::causal_lm> load(const std::string& dir) {
  auto m = mstar::models::nemotron_h_model::load(dir);
  if (!m) {
    std::fprintf(stderr, "engine bench: %s\n", m.error().message().c_str());
    std::exit(1);
  }
  return std::move(*m);
}

std::vector<request_spec> requests(int count, int prompt, int tokens) {
  std::vector<request_spec> out(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    for (int t = 0; t < prompt; ++t)
      out[i].prompt.push_back(static_cast<std::uint32_t>(3 + (i * 31 + t * 7) % 250));
    out[i].stop.max_tokens = tokens;
    out[i].stop.ignore_eos = true;
  }
  return out;
}

// t1 - t0 in seconds; a clear exit where the run never passed both marks
// (a refused, preempted or failed request changes the token count).
double timed_s(clock_type::time_point t0, clock_type::time_point t1, std::int64_t until,
               const char* path) {
  if (t0 == clock_type::time_point{} || t1 <= t0) {
    std::fprintf(stderr,
                 "engine bench: the decode %s never had every request at 1 and then at %lld "
                 "tokens (a request was refused, preempted or failed)\n",
                 path, static_cast<long long>(until));
    std::exit(1);
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

// Seconds of the decode steps, direct: from every request's first token
// to every request's `until`-th (requests make one more, so the steps timed
// end before any request ends and releases its state).
double direct_decode_s(mstar::engine::local_engine& e, const std::vector<request_spec>& reqs,
                       std::int64_t until) {
  for (const auto& r : reqs)
    (void)e.submit(r);
  const auto want = static_cast<std::int64_t>(reqs.size());
  std::int64_t tokens = 0;
  clock_type::time_point t0, t1;
  while (!e.idle()) {
    auto d = e.step();
    if (!d) {
      std::fprintf(stderr, "engine bench: %s\n", d.error().message().c_str());
      std::exit(1);
    }
    for (const auto& x : *d)
      tokens += static_cast<std::int64_t>(x.tokens.size());
    if (tokens == want)
      t0 = clock_type::now();
    if (tokens == want * until)
      t1 = clock_type::now();
  }
  return timed_s(t0, t1, until, "direct");
}

// The same through the actors, timed where the callbacks see the tokens.
double actor_decode_s(mstar::actors::runtime& rt, const std::vector<request_spec>& reqs,
                      std::int64_t until) {
  std::mutex m;
  std::condition_variable cv;
  const auto want = static_cast<std::int64_t>(reqs.size());
  std::int64_t tokens = 0, done = 0;
  clock_type::time_point t0, t1;
  for (const auto& r : reqs) {
    rt.submit(r, [&](const mstar::engine::delta& d) {
      std::lock_guard lock{m};
      tokens += static_cast<std::int64_t>(d.tokens.size());
      if (!d.tokens.empty() && tokens == want)
        t0 = clock_type::now();
      if (!d.tokens.empty() && tokens == want * until)
        t1 = clock_type::now();
      if (d.finished && ++done == want)
        cv.notify_all();
    });
  }
  std::unique_lock lock{m};
  cv.wait(lock, [&] { return done == want; });
  return timed_s(t0, t1, until, "through the actors");
}

// Whether both engines of a case started; where one did not, says why.
template <class A, class B>
bool started(const A& a, const B& b, const char* case_name) {
  if (a && b)
    return true;
  std::fprintf(stderr, "engine bench: case %s: could not start the engines: %s\n", case_name,
               (!a ? a.error() : b.error()).message().c_str());
  return false;
}

// Room for `rows` requests of `tokens` tokens each (prompt and output) at
// once, so no step is refused and nothing is preempted: at least 8,192
// pages, more where the rows need them (the control case at 1,600 steps of
// 256 rows needs ~26,000; with 8,192 it preempted, and the timing read
// garbage).
mstar::engine::engine_config roomy(int rows, int tokens) {
  mstar::engine::engine_config c;
  c.pools.max_slots = rows + 1;
  const std::int64_t per_row = (tokens + c.pools.page_size - 1) / c.pools.page_size;
  c.pools.max_num_pages = std::max<std::int64_t>(8192, rows * per_row + 1);
  c.pools.prefix_cache = false;
  c.scheduler.max_running = rows;
  c.scheduler.max_batched_tokens = 1 << 16;
  // The control and e2e cases time one step after another; the overlap
  // case sets its modes itself.
  c.schedule = mstar::engine::schedule_mode::sync;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "engine benchmark: control-plane cost per step and end-to-end decode through the "
      "actors, each against the direct loop in the same run"};
  bool as_json = false;
  int rounds = 3, rows = 256, steps = 200;
  // The runtime's own default (one thread). Until session 54 this was 0,
  // CAF's default of at least four threads, while the runtime had moved to
  // one: the control case measured ~190 us a step of actor overhead on the
  // 2-core machine where one thread gives ~40.
  std::size_t threads = mstar::actors::runtime_options{}.threads;
  std::string model = MSTAR_EMBEDDED_MODEL_DIR;
  std::vector<std::string> cases{"control", "e2e", "overlap"};
  app.add_option("--cases", cases, "Which cases: control, e2e, overlap")->capture_default_str();
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--rounds", rounds, "Rounds per case (median)")->check(CLI::PositiveNumber);
  app.add_option("--rows", rows, "Running requests in the control-plane case")
      ->check(CLI::Range(1, 4096));
  app.add_option("--steps", steps, "Decode steps per round")->check(CLI::Range(2, 100000));
  app.add_option("--model", model, "Model folder (its pools shape the null model)");
  app.add_option("--threads", threads,
                 "Scheduler threads of the actor system (0: CAF's default, at least 4)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::vector<mstar::bench::comparison> results;

  auto wanted = [&](const char* c) {
    return std::find(cases.begin(), cases.end(), c) != cases.end();
  };
  // Control plane: null model, `rows` requests decoding `steps` steps.
  if (wanted("control")) {
    const auto reqs = requests(rows, 16, steps + 2);
    auto direct = mstar::engine::local_engine::make(std::make_unique<null_model>(load(model)),
                                                    roomy(rows, 16 + steps + 2));
    auto actors = mstar::actors::runtime::start(std::make_unique<null_model>(load(model)),
                                                roomy(rows, 16 + steps + 2), threads);
    if (!started(direct, actors, "control"))
      return 1;
    const auto [through, called] = mstar::bench::interleaved_rates(
        [&] { (void)actor_decode_s(**actors, reqs, steps + 1); },
        [&] { (void)direct_decode_s(**direct, reqs, steps + 1); }, 1.0, 1);
    (void)through;
    (void)called;
    std::vector<double> a, d;
    for (int r = 0; r < rounds; ++r) {
      a.push_back(actor_decode_s(**actors, reqs, steps + 1) / steps);
      d.push_back(direct_decode_s(**direct, reqs, steps + 1) / steps);
    }
    std::sort(a.begin(), a.end());
    std::sort(d.begin(), d.end());
    const double a_s = a[a.size() / 2], d_s = d[d.size() / 2];
    results.push_back({"engine",
                       fmt::format("control_b{}_null_model", rows),
                       "steps_per_s",
                       "1/s",
                       "direct_scheduler_and_pools",
                       1.0 / a_s,
                       1.0 / d_s,
                       {{"us_per_step_actors", 1e6 * a_s},
                        {"us_per_step_direct", 1e6 * d_s},
                        {"actor_overhead_us_per_step", 1e6 * (a_s - d_s)}}});
  }
  // End to end on the real model: decode tokens/s, actors vs direct loop.
  if (wanted("e2e")) {
    const int batch = 4, tokens = 64;
    const auto reqs = requests(batch, 8, tokens + 1);
    auto direct = mstar::engine::local_engine::make(load(model), roomy(batch, 8 + tokens + 1));
    auto actors = mstar::actors::runtime::start(load(model), roomy(batch, 8 + tokens + 1), threads);
    if (!started(direct, actors, "e2e"))
      return 1;
    const double items = static_cast<double>(batch) * (tokens - 1);
    std::vector<double> a, d;
    (void)actor_decode_s(**actors, reqs, tokens);
    (void)direct_decode_s(**direct, reqs, tokens);
    for (int r = 0; r < rounds; ++r) {
      a.push_back(items / actor_decode_s(**actors, reqs, tokens));
      d.push_back(items / direct_decode_s(**direct, reqs, tokens));
    }
    std::sort(a.begin(), a.end());
    std::sort(d.begin(), d.end());
    results.push_back({"engine",
                       fmt::format("e2e_embedded_decode_b{}", batch),
                       "tokens_per_s",
                       "1/s",
                       "direct_loop",
                       a[a.size() / 2],
                       d[d.size() / 2],
                       {}});
  }
  // Overlap against sync, through the actors: control plane and embedded decode.
  if (wanted("overlap")) {
    auto with = [](mstar::engine::engine_config c, mstar::engine::schedule_mode m) {
      c.schedule = m;
      return c;
    };
    using mstar::engine::schedule_mode;
    struct shape {
      const char* name;
      bool null;
      int batch, tokens;
    };
    for (const auto& sh : {shape{"control", true, rows, steps + 1}, shape{"e2e", false, 4, 64}}) {
      const auto reqs = requests(sh.batch, sh.null ? 16 : 8, sh.tokens + 1);
      auto model_of = [&]() -> std::unique_ptr<mstar::models::causal_lm> {
        if (sh.null)
          return std::make_unique<null_model>(load(model));
        return load(model);
      };
      const int room = (sh.null ? 16 : 8) + sh.tokens + 1;
      auto over = mstar::actors::runtime::start(
          model_of(), with(roomy(sh.batch, room), schedule_mode::overlap), threads);
      auto sync = mstar::actors::runtime::start(
          model_of(), with(roomy(sh.batch, room), schedule_mode::sync), threads);
      if (!started(over, sync, "overlap"))
        return 1;
      const double items = static_cast<double>(sh.batch) * (sh.tokens - 1);
      std::vector<double> o, y;
      (void)actor_decode_s(**over, reqs, sh.tokens);
      (void)actor_decode_s(**sync, reqs, sh.tokens);
      for (int r = 0; r < rounds; ++r) {
        o.push_back(items / actor_decode_s(**over, reqs, sh.tokens));
        y.push_back(items / actor_decode_s(**sync, reqs, sh.tokens));
      }
      std::sort(o.begin(), o.end());
      std::sort(y.begin(), y.end());
      auto st = (*over)->stats();
      results.push_back({"engine",
                         fmt::format("overlap_{}_b{}", sh.name, sh.batch),
                         "tokens_per_s",
                         "1/s",
                         "sync_schedule",
                         o[o.size() / 2],
                         y[y.size() / 2],
                         {{"steps_launched_ahead", st ? static_cast<double>(st->ahead_steps) : 0},
                          {"rows_dropped", st ? static_cast<double>(st->dropped_rows) : 0}}});
    }
  }
  mstar::bench::report(results, as_json);
  return 0;
}
