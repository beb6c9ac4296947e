// mstar-bench-window: windowed generation with a bounded KV cache against
// the same generation unwindowed (the baseline, measured in the same run).
// One greedy request on the embedded model (CPU) generates --tokens tokens
// (ignoring eos) through the local engine, windowed; then the same request
// runs unwindowed until it finishes or the pool refuses it. Every --every
// tokens each run records the KV pages its sequence holds, the pages in use
// in the pool and the process's resident set; the windowed run should stay
// flat after its first windows while the unwindowed one grows linearly until
// the pool is full. Prints the peaks, the tokens/s of both and their ratios;
// --jsonl FILE writes the samples (bench/plot_window.py plots them).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/local_engine.hpp"
#include "models/nemotron_h.hpp"

namespace {

using mstar::engine::local_engine;

std::int64_t resident_bytes() {
  std::ifstream in{"/proc/self/statm"};
  std::int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

struct sample {
  std::int64_t generated = 0;
  std::int64_t seq_pages = 0;
  std::int64_t used_pages = 0;
  std::int64_t rss = 0;
  double seconds = 0;
};

struct outcome {
  std::vector<sample> samples;
  std::int64_t generated = 0;
  std::int64_t peak_pages = 0;  // the request's kv_pages_peak
  std::string error;
  double seconds = 0;
};

struct options {
  std::string model = MSTAR_EMBEDDED_MODEL_DIR;
  std::int32_t tokens = 200000;
  std::int64_t window_units = 64;
  std::int64_t context_units = 512;
  std::int64_t tokens_per_unit = 1;
  std::int64_t pages = 4096;
  std::int64_t every = 2000;
  std::string jsonl;
};

mstar::result<outcome> run_one(const options& opt, bool windowed) {
  auto model = mstar::models::nemotron_h_model::load(opt.model);
  if (!model)
    return model.error();
  mstar::engine::engine_config config;
  config.pools.max_num_pages = opt.pages;
  auto made = local_engine::make(std::move(*model), config);
  if (!made)
    return made.error();
  auto& e = **made;
  mstar::engine::request_spec r;
  r.text = "It was a dark and stormy night, and";
  r.stop.max_tokens = opt.tokens;
  r.stop.ignore_eos = true;
  if (windowed) {
    r.window =
        mstar::engine::window_params{opt.window_units, opt.context_units, 0, opt.tokens_per_unit};
  }
  auto id = e.submit(std::move(r));
  if (!id)
    return id.error();
  outcome out;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const auto* kv = e.pools().kv();
  const std::int64_t total_pages = kv->config().max_num_pages;
  std::int64_t next = 0;
  while (!e.idle()) {
    auto deltas = e.step();
    if (!deltas)
      return deltas.error();
    for (const auto& d : *deltas) {
      out.generated += static_cast<std::int64_t>(d.tokens.size());
      if (d.finished) {
        out.peak_pages = d.counts.kv_pages_peak;
        out.error = d.error;
      }
    }
    if (out.generated >= next || e.idle()) {
      const auto st = kv->stream(*id, "main");
      out.samples.push_back({out.generated, st ? static_cast<std::int64_t>(st->pages.size()) : 0,
                             total_pages - 1 - kv->num_free_pages(), resident_bytes(), elapsed()});
      next += opt.every;
      if (out.generated % (opt.tokens / 10 + 1) < opt.every || e.idle()) {
        std::fprintf(stderr, "  %s: %lld tokens, %lld pages, %.0f MiB resident, %.0f s\n",
                     windowed ? "windowed" : "unwindowed", static_cast<long long>(out.generated),
                     static_cast<long long>(out.samples.back().seq_pages),
                     static_cast<double>(out.samples.back().rss) / (1 << 20), elapsed());
      }
    }
  }
  out.seconds = elapsed();
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{
      "mstar-bench-window: KV pages and resident memory against generated tokens, windowed "
      "generation vs the same request unwindowed (the baseline, same run)"};
  options opt;
  bool json = false;
  app.add_option("--model", opt.model, "Model folder (default: the embedded model)");
  app.add_option("--tokens", opt.tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 24));
  app.add_option("--window-units", opt.window_units, "Window size in units");
  app.add_option("--context-units", opt.context_units, "Units kept behind each window");
  app.add_option("--tokens-per-unit", opt.tokens_per_unit, "Tokens per unit");
  app.add_option("--pages", opt.pages, "KV pool pages (16 tokens each)");
  app.add_option("--every", opt.every, "Sample every this many tokens")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--jsonl", opt.jsonl, "Write every sample to this file");
  app.add_flag("--json", json, "Print the summary as one JSON object");
  CLI11_PARSE(app, argc, argv);
  std::fprintf(stderr,
               "mstar-bench-window: %d tokens, windows of %lld units x %lld tokens, "
               "context %lld units, %lld pages\n",
               opt.tokens, static_cast<long long>(opt.window_units),
               static_cast<long long>(opt.tokens_per_unit),
               static_cast<long long>(opt.context_units), static_cast<long long>(opt.pages));
  auto w = run_one(opt, true);
  if (!w) {
    std::fprintf(stderr, "mstar-bench-window: windowed run: %s\n", w.error().message().c_str());
    return 1;
  }
  auto u = run_one(opt, false);
  if (!u) {
    std::fprintf(stderr, "mstar-bench-window: unwindowed run: %s\n", u.error().message().c_str());
    return 1;
  }
  if (!opt.jsonl.empty()) {
    std::ofstream f{opt.jsonl};
    for (const auto* o : {&*w, &*u}) {
      for (const auto& s : o->samples) {
        f << nlohmann::json{{"run", o == &*w ? "windowed" : "unwindowed"},
                            {"generated", s.generated},
                            {"seq_pages", s.seq_pages},
                            {"used_pages", s.used_pages},
                            {"rss_bytes", s.rss},
                            {"seconds", s.seconds}}
                 .dump()
          << '\n';
      }
    }
  }
  // Compared over what both runs generated: the windowed run's state at the
  // last sample the unwindowed one took while it still held its pages (a
  // run that ended holds none).
  auto last_held = [](const outcome& o) {
    std::int64_t at = 0;
    for (const auto& s : o.samples) {
      if (s.seq_pages > 0)
        at = s.generated;
    }
    return at;
  };
  const auto at = std::min(last_held(*w), last_held(*u));
  auto upto = [at](const outcome& o) {
    const sample* best = &o.samples.front();
    for (const auto& s : o.samples) {
      if (s.generated <= at && s.seq_pages > 0)
        best = &s;
    }
    return *best;
  };
  const auto ws = upto(*w), us = upto(*u);
  const double w_rate = static_cast<double>(ws.generated) / std::max(ws.seconds, 1e-9);
  const double u_rate = static_cast<double>(us.generated) / std::max(us.seconds, 1e-9);
  nlohmann::json summary{
      {"bench", "window"},
      {"tokens", opt.tokens},
      {"windowed_generated", w->generated},
      {"windowed_peak_pages", w->peak_pages},
      {"windowed_error", w->error},
      {"windowed_last_rss_bytes", w->samples.back().rss},
      {"unwindowed_generated", u->generated},
      {"unwindowed_peak_pages", u->peak_pages},
      {"unwindowed_error", u->error},
      {"unwindowed_last_rss_bytes", u->samples.back().rss},
      {"compared_at_tokens", at},
      {"ratio", us.seq_pages > 0 ? static_cast<double>(ws.seq_pages) / us.seq_pages : 0.0},
      {"tokens_per_s_ratio", u_rate > 0 ? w_rate / u_rate : 0.0}};
  if (json) {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf(
        "windowed:   %lld tokens, peak %lld pages, %s\n"
        "unwindowed: %lld tokens, peak %lld pages, %s\n"
        "at %lld tokens: windowed holds %lld pages against %lld (ratio %.3f), %.0f MiB resident "
        "against %.0f; %.1f tokens/s against %.1f (ratio %.3f)\n",
        static_cast<long long>(w->generated), static_cast<long long>(w->peak_pages),
        w->error.empty() ? "finished" : w->error.c_str(), static_cast<long long>(u->generated),
        static_cast<long long>(u->peak_pages), u->error.empty() ? "finished" : u->error.c_str(),
        static_cast<long long>(at), static_cast<long long>(ws.seq_pages),
        static_cast<long long>(us.seq_pages), summary["ratio"].get<double>(),
        static_cast<double>(ws.rss) / (1 << 20), static_cast<double>(us.rss) / (1 << 20), w_rate,
        u_rate, summary["tokens_per_s_ratio"].get<double>());
  }
  return w->error.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
