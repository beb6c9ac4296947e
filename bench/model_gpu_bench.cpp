// End-to-end decode throughput of a checkpoint (Nemotron-H or Qwen3.5, picked
// from its config.json by models::load_causal_lm) on the GPU through
// the engine (mstar-run --device cuda's path), measured the way
// bench/transformers_decode.py measures transformers on the same checkpoint:
// per batch size, greedy generation of N tokens and of 1 token from the same
// random prompts; decode tokens/s = B * (N - 1) / (t_N - t_1). The baseline is
// that script's run on the same GPU (bench/h200_e2e.sh runs both and writes
// the ratio); this program only measures our side.
//
// For Nemotron-H it also reads the device's own clock: a CUDA event before each forward's
// upload and after its download gives how long the device sat idle between
// consecutive decode steps (the host's step: scheduling, the pools, sampling
// bookkeeping) and how long it was busy. `--schedule sync|overlap` overrides the
// engine's own schedule for the model (overlap on a GPU; issue 14's comparison,
// bench/h200_engine.sh runs both).
//
// On CUDA it also sets each batch's steps against the roofline measured in
// the same process (bench/model_gpu_roofline.hpp, issue 17): the mean decode
// step (step_ms) and the prefill of the batch's prompts (the device's busy
// time of that forward for Nemotron-H, else the one-token generate's wall
// time) against the device-to-device copy bandwidth and cuBLAS bf16 GEMMs of
// the model's widest projection; `--roofline-rounds 0` leaves it out.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <utility>

#include "actors/runtime.hpp"
#include "bench/model_gpu_roofline.hpp"
#include "engine/local_engine.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/device.hpp"
#include "models/load.hpp"
#include "models/nemotron_h.hpp"
#include "models/step_cost.hpp"
#ifdef MSTAR_HAVE_NCCL
#include "parallel/nccl_group.hpp"
#endif

namespace {

using namespace mstar::models;
using mstar::engine::local_engine;
using mstar::engine::request_spec;
using clock_type = std::chrono::steady_clock;

std::vector<request_spec> prompts(int batch, int length, int new_tokens, std::int64_t vocab,
                                  std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<request_spec> out(static_cast<std::size_t>(batch));
  for (auto& r : out) {
    for (int i = 0; i < length; ++i)
      r.prompt.push_back(static_cast<mstar::resources::token_id>(3 + rng() % (vocab - 3)));
    r.stop.max_tokens = new_tokens;
    r.stop.ignore_eos = true;
  }
  return out;
}

// Seconds for one generate() call over `reqs`; `inner` gets the longest
// first-to-last-token time of its requests (the decode steps alone).
// Either engine: the direct loop, or the actors (conductor, pool actors,
// worker) when `rt` is set.
struct engines {
  local_engine* direct = nullptr;
  mstar::actors::runtime* rt = nullptr;
};

// A run's tokens: one list a request, in the order of its specs.
using run_tokens = std::vector<std::vector<mstar::resources::token_id>>;

// FNV-1a over every request's tokens: equal digests, equal outputs.
std::uint64_t digest_of(const run_tokens& tokens) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const auto& r : tokens) {
    for (const auto t : r)
      h = (h ^ static_cast<std::uint64_t>(t)) * 1099511628211ULL;
  }
  return h;
}

mstar::result<double> timed(engines e, const std::vector<request_spec>& reqs,
                            double* inner = nullptr, run_tokens* tokens = nullptr) {
  const auto t0 = clock_type::now();
  auto got = e.rt != nullptr
                 ? mstar::result<std::vector<mstar::engine::completion>>{mstar::actors::complete(
                       *e.rt, reqs)}
                 : mstar::engine::run_to_completion(*e.direct, reqs);
  if (!got)
    return got.error();
  double longest = 0;
  for (const auto& r : *got) {
    if (r.tokens[0].size() != static_cast<std::size_t>(reqs.front().stop.max_tokens)) {
      return mstar::make_error(mstar::errc::io_error, "a request stopped early: " + r.errors[0]);
    }
    longest = std::max(longest, r.duration_s - r.time_to_first_token_s);
  }
  if (inner != nullptr)
    *inner = longest;
  if (tokens != nullptr) {
    tokens->clear();
    for (const auto& r : *got)
      tokens->push_back(r.tokens[0]);
  }
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Median and 90th percentile of `v` (sorted in place); zeros when empty.
std::pair<double, double> median_p90(std::vector<double>& v) {
  if (v.empty())
    return {0.0, 0.0};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

// The CUDA device index of "cuda" (0) or "cuda:N"; -1 for anything else.
int cuda_index(const std::string& device) {
  if (device == "cuda")
    return 0;
  if (device.rfind("cuda:", 0) != 0)
    return -1;
  return static_cast<int>(std::strtol(device.c_str() + 5, nullptr, 10));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mstar-bench-model-gpu: decode tokens/s of a Nemotron-H or Qwen3.5 checkpoint on a CUDA "
      "device "
      "through mstar's pools, at several batch sizes (compare with "
      "bench/transformers_decode.py on the same checkpoint; bench/h200_e2e.sh runs both)."};
  std::string model_dir, device = "cuda", dtype = "bfloat16";
  std::vector<int> batches{1, 16, 64};
  int prompt_len = 32, new_tokens = 128, repeats = 3;
  std::uint64_t seed = 7;
  bool json = false, no_graphs = false;
  std::string through = "direct";
  std::string schedule = "default";
  int roofline_rounds = 5;
  int tensor_parallel = 1;
  std::string tokens_out;
  app.add_option("--model", model_dir, "Checkpoint folder")->required();
  app.add_option("--device", device, "cuda, cuda:N or cpu")->capture_default_str();
  app.add_option("--dtype", dtype, "bfloat16 or float32")->capture_default_str();
  app.add_option("--batch", batches, "Batch sizes")->capture_default_str();
  app.add_option("--prompt-len", prompt_len, "Prompt tokens per request")->capture_default_str();
  app.add_option("--new-tokens", new_tokens, "Generated tokens per request (>= 2)")
      ->capture_default_str();
  app.add_option("--repeats", repeats, "Timed runs per batch size (median reported)")
      ->capture_default_str();
  app.add_option("--seed", seed, "Prompt seed")->capture_default_str();
  app.add_flag("--json", json, "One JSON object per batch size");
  app.add_flag("--no-cuda-graphs", no_graphs, "Launch every kernel of a decode step (no graphs)");
  app.add_option("--through", through, "direct (engine::local_engine) or actors (the runtime)")
      ->check(CLI::IsMember({"direct", "actors"}))
      ->capture_default_str();
  app.add_option("--schedule", schedule,
                 "sync (step N+1 built after N), overlap (while N runs) or default (the engine's "
                 "own choice for the model: overlap on a GPU, sync on the CPU)")
      ->check(CLI::IsMember({"sync", "overlap", "default"}))
      ->capture_default_str();
  app.add_option("--roofline-rounds", roofline_rounds,
                 "Rounds of the copy and GEMM ceilings timed per batch size (CUDA; 0: no "
                 "roofline)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--tensor-parallel", tensor_parallel,
                 "Ranks of the model (Nemotron-H): threads of this process, rank r on cuda:r "
                 "with that many GPUs (NCCL between them where built with it), else sharing "
                 "the device; the roofline is left out above 1 (a rank reads its part)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--tokens-out", tokens_out,
                 "Also write every full-length run's tokens (the warm-up's, then each timed "
                 "run's) to this file, one JSON line a run: batch, run, digest, tokens (a list "
                 "a request); bench/token_runs.py compares such files");
  CLI11_PARSE(app, argc, argv);
  if (new_tokens < 2 || repeats < 1 || prompt_len < 1) {
    std::fprintf(stderr,
                 "mstar-bench-model-gpu: need --new-tokens >= 2, --repeats >= 1, "
                 "--prompt-len >= 1\n");
    return 2;
  }
  if (device != "cpu") {
    const auto report = mstar::kernels::query_cuda_devices();
    if (report.devices.empty()) {
      // MSTAR_REQUIRE_GPU (the device scripts set it): a missing GPU is a failure.
      const bool fail = mstar::kernels::gpu_required();
      std::printf("mstar-bench-model-gpu: no CUDA device (%s); nothing measured%s\n",
                  report.reason.c_str(), fail ? " (MSTAR_REQUIRE_GPU is set: failing)" : "");
      return fail ? 1 : 0;
    }
  }
  run_options run;
  run.device = device;
  run.cuda_graphs = !no_graphs;
  run.tensor_parallel_ranks = tensor_parallel;
#ifdef MSTAR_HAVE_NCCL
  run.tensor_parallel_groups = mstar::parallel::nccl_group_maker();
#endif
  if (tensor_parallel > 1)
    roofline_rounds = 0;
  run.dtype = dtype == "float32" ? mstar::dtype::float32 : mstar::dtype::bfloat16;
  if (dtype != "float32" && dtype != "bfloat16") {
    std::fprintf(stderr, "mstar-bench-model-gpu: --dtype '%s' is not bfloat16 or float32\n",
                 dtype.c_str());
    return 2;
  }
  const int most = *std::max_element(batches.begin(), batches.end());
  mstar::engine::engine_config config;
  config.pools.max_slots = most + 1;
  config.pools.max_num_pages = most * ((prompt_len + new_tokens) / 16 + 2) + 64;
  config.pools.prefix_cache = false;
  // Every prompt of a batch in one prefill step, every row in each decode step.
  config.scheduler.max_batched_tokens = std::max(most * prompt_len, most);
  config.scheduler.max_running = most;
  if (schedule != "default")
    config.schedule = *mstar::engine::parse_schedule_mode(schedule);
  auto model = load_causal_lm(model_dir, run);
  if (!model) {
    std::fprintf(stderr, "mstar-bench-model-gpu: %s\n", model.error().message().c_str());
    return 1;
  }
  causal_lm& m = **model;
  if (schedule == "default")  // what the JSON and the table report: the schedule that ran
    schedule = std::string{mstar::engine::to_string(mstar::engine::default_schedule(m))};
  std::optional<mstar::bench::gpu::roofline_meter> meter;
  if (cuda_index(device) >= 0 && roofline_rounds > 0) {
    auto costs = cost_model_of(model_dir, run.dtype);
    if (!costs) {
      std::fprintf(stderr, "mstar-bench-model-gpu: %s\n", costs.error().message().c_str());
      return 1;
    }
    meter.emplace(std::move(*costs), cuda_index(device), roofline_rounds);
  }
  // The device timeline (idle gaps between steps) is Nemotron-H's backend's.
  auto* timeline = dynamic_cast<nemotron_h_model*>(&m);
  std::unique_ptr<local_engine> direct;
  std::unique_ptr<mstar::actors::runtime> rt;
  if (through == "actors") {
    auto made = mstar::actors::runtime::start(std::move(*model), config);
    if (!made) {
      std::fprintf(stderr, "mstar-bench-model-gpu: %s\n", made.error().message().c_str());
      return 1;
    }
    rt = std::move(*made);
  } else {
    auto made = local_engine::make(std::move(*model), config);
    if (!made) {
      std::fprintf(stderr, "mstar-bench-model-gpu: %s\n", made.error().message().c_str());
      return 1;
    }
    direct = std::move(*made);
  }
  const engines engine{direct.get(), rt.get()};
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> tokens_file{nullptr, &std::fclose};
  if (!tokens_out.empty()) {
    tokens_file.reset(std::fopen(tokens_out.c_str(), "w"));
    if (tokens_file == nullptr) {
      std::fprintf(stderr, "mstar-bench-model-gpu: --tokens-out %s: cannot open for writing\n",
                   tokens_out.c_str());
      return 1;
    }
  }
  // Each full-length run's tokens as one line of --tokens-out; returns the run's digest.
  const auto keep = [&](int b, const char* label, const run_tokens& tokens) {
    auto digest = fmt::format("{:016x}", digest_of(tokens));
    if (tokens_file != nullptr) {
      const nlohmann::json line{
          {"batch", b}, {"run", label}, {"digest", digest}, {"tokens", tokens}};
      std::fprintf(tokens_file.get(), "%s\n", line.dump().c_str());
      std::fflush(tokens_file.get());
    }
    return digest;
  };
  std::fprintf(stderr, "model %s: %lld parameters on %s (%s)\n", model_dir.c_str(),
               static_cast<long long>(m.num_parameters()), m.device_name().c_str(),
               std::string{mstar::to_string(m.compute_dtype())}.c_str());
  for (const int b : batches) {
    auto full = prompts(b, prompt_len, new_tokens, m.vocab_size(), seed);
    auto first = full;
    for (auto& r : first)
      r.stop.max_tokens = 1;
    // Warm-up of both lengths (cuBLAS heuristics, work buffers).
    run_tokens tokens;
    std::vector<std::string> digests;  // the warm-up's, then each timed run's
    for (const std::vector<request_spec>* reqs : {&full, &first}) {
      if (auto t = timed(engine, *reqs, nullptr, reqs == &full ? &tokens : nullptr); !t) {
        std::fprintf(stderr, "mstar-bench-model-gpu: batch %d: %s\n", b,
                     t.error().message().c_str());
        return 1;
      }
    }
    digests.push_back(keep(b, "warmup", tokens));
    std::vector<double> rates, inner_rates, t1s, tns, idle_us, busy_us, prefill_us;
    for (int rep = 0; rep < repeats; ++rep) {
      double inner = 0;
      if (timeline != nullptr)
        timeline->record_device_timeline(true);
      auto tn = timed(engine, full, &inner, &tokens);
      const auto steps =
          timeline != nullptr ? timeline->take_device_timeline() : std::vector<device_step_time>{};
      if (timeline != nullptr)
        timeline->record_device_timeline(false);
      if (!steps.empty())
        prefill_us.push_back(steps[0].busy_us);  // every prompt in the first forward
      // The decode steps after the first: the prefill's gap spans the host
      // work between runs, the first decode's the prefill's bookkeeping.
      for (std::size_t i = 2; i < steps.size(); ++i) {
        idle_us.push_back(steps[i].idle_before_us);
        busy_us.push_back(steps[i].busy_us);
      }
      auto t1 = timed(engine, first);
      if (!tn || !t1) {
        std::fprintf(stderr, "mstar-bench-model-gpu: batch %d failed\n", b);
        return 1;
      }
      digests.push_back(keep(b, std::to_string(rep).c_str(), tokens));
      tns.push_back(*tn);
      t1s.push_back(*t1);
      rates.push_back(b * (new_tokens - 1) / std::max(*tn - *t1, 1e-9));
      inner_rates.push_back(b * (new_tokens - 1) / std::max(inner, 1e-9));
    }
    // The same requests every run: the same tokens, or something raced
    // (session 45's chained SSD update read stale inputs and did so).
    const bool same_tokens = std::all_of(
        digests.begin(), digests.end(), [&](const std::string& d) { return d == digests.front(); });
    if (!same_tokens) {
      std::string listed;
      for (const auto& d : digests)
        listed += (listed.empty() ? "" : " ") + d;
      std::fprintf(stderr,
                   "mstar-bench-model-gpu: batch %d: the runs drew different tokens (digests %s): "
                   "the same requests must draw the same tokens; --tokens-out and "
                   "bench/token_runs.py show where they part\n",
                   b, listed.c_str());
    }
    std::sort(rates.begin(), rates.end());
    std::sort(inner_rates.begin(), inner_rates.end());
    const double rate = rates[rates.size() / 2];
    const double inner_rate = inner_rates[inner_rates.size() / 2];
    const double step_ms = 1e3 * b / rate;
    const auto [idle_median, idle_p90] = median_p90(idle_us);
    const auto [busy_median, busy_p90] = median_p90(busy_us);
    // The decode figures time the run of new_tokens against the one of a
    // single token; with fewer than 3 new tokens that difference is one
    // decode step inside the prefill's spread (a prefill-only run), and the
    // figures are left out (null) rather than reported from noise.
    const bool decode_timed = new_tokens >= 3;
    nlohmann::json decode_roof, prefill_roof;
    if (meter && decode_timed) {
      const auto decode = mean_decode_cost(meter->model(), b, prompt_len, new_tokens);
      decode_roof = meter->figures("decode", decode, b, step_ms * 1e-3);
      if (busy_median > 0) {
        // The same step on the device's clock: the host's gaps left out.
        const auto busy =
            place(decode, busy_median * 1e-6, decode_roof["copy_GB_per_s"].get<double>() * 1e9,
                  decode_roof["peak_TFLOP_per_s"].get<double>() * 1e12);
        decode_roof["device_busy_ms"] = busy_median * 1e-3;
        decode_roof["bandwidth_fraction_device_busy"] = busy.bandwidth_fraction;
      }
    }
    if (meter) {
      std::vector<double> t1_sorted = t1s;
      const double prefill_s =
          prefill_us.empty() ? median_p90(t1_sorted).first : median_p90(prefill_us).first * 1e-6;
      prefill_roof = meter->figures("prefill", cost_of(meter->model(), {b, prompt_len, 0}),
                                    std::int64_t{b} * prompt_len, prefill_s);
      prefill_roof["time_source"] = prefill_us.empty() ? "generate_1_token_wall" : "device_busy";
    }
    if (json) {
      nlohmann::json line{
          {"name", "mstar_decode"},
          {"batch", b},
          {"prompt_len", prompt_len},
          {"new_tokens", new_tokens},
          {"decode_tokens_per_s", decode_timed ? nlohmann::json(rate) : nullptr},
          {"step_ms", decode_timed ? nlohmann::json(step_ms) : nullptr},
          {"decode_tokens_per_s_steps_only", decode_timed ? nlohmann::json(inner_rate) : nullptr},
          {"stat", "median"},
          {"repeats", repeats},
          {"t1_s", t1s},
          {"tN_s", tns},
          {"dtype", dtype},
          {"cuda_graphs", !no_graphs},
          {"chained_launches", mstar::kernels::cuda::chained_launches()},
          {"tensor_parallel", tensor_parallel},
          {"through", through},
          {"schedule", schedule},
          {"tokens_digest", digests.back()},
          {"tokens_digests", digests},
          {"tokens_same_every_run", same_tokens},
          {"device_steps", idle_us.size()},
          {"idle_gap_us_median", idle_median},
          {"idle_gap_us_p90", idle_p90},
          {"device_busy_us_median", busy_median},
          {"device_busy_us_p90", busy_p90},
          {"device", m.device_name()},
          {"params", m.num_parameters()}};
      if (meter) {
        if (decode_timed)
          line["roofline_decode"] = decode_roof;
        line["roofline_prefill"] = prefill_roof;
      }
      std::cout << line.dump() << std::endl;
    } else {
      if (decode_timed) {
        std::printf(
            "batch %3d: %10.1f decode tokens/s (%.1f over the decode steps alone), %.3f ms "
            "per step; device idle between steps %.1f us (median, p90 %.1f), busy %.1f us "
            "(%s)\n",
            b, rate, inner_rate, step_ms, idle_median, idle_p90, busy_median, schedule.c_str());
      } else {
        std::printf("batch %3d: decode not timed (--new-tokens %d: fewer than 3)\n", b, new_tokens);
      }
      if (meter) {
        if (decode_timed)
          std::printf("%s\n", meter->line(decode_roof).c_str());
        std::printf("%s (%s)\n", meter->line(prefill_roof).c_str(),
                    prefill_roof["time_source"].get<std::string>().c_str());
      }
    }
  }
  return 0;
}
