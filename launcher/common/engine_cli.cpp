#include "launcher/common/engine_cli.hpp"

#include <charconv>
#include <fmt/format.h>

#include "core/untrusted_json.hpp"
#include "models/tensor_parallel_lm.hpp"
#ifdef MSTAR_HAVE_NCCL
#include "parallel/nccl_group.hpp"
#endif

namespace mstar::launcher {

CLI::Validator whole_number_at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        long long value = 0;
        const auto* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc{} || stop != end || value < lo) {
          return fmt::format("must be a whole number >= {}, got '{}'", lo, text_excerpt(text));
        }
        return {};
      },
      fmt::format("INT >= {}", lo));
}

CLI::Validator fraction_in_unit_interval() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const auto* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc{} || stop != end || !(value > 0.0 && value <= 1.0))
          return fmt::format("must be a number in (0, 1], got '{}'", text_excerpt(text));
        return {};
      },
      "FLOAT in (0, 1]");
}

void add_engine_options(CLI::App& app, engine_cli& opt) {
  app.add_option("--page-size", opt.engine.pools.page_size, "KV page size in tokens")
      ->check(CLI::Range(1, 4096));
  opt.pages_option =
      app.add_option("--max-pages", opt.engine.pools.max_num_pages,
                     "KV pages in the pool (default: on a GPU from --gpu-memory-fraction, on "
                     "the CPU 4096)")
          ->check(CLI::Range(2, 1 << 24));
  opt.slots_option = app.add_option("--max-slots", opt.engine.pools.max_slots,
                                    "Recurrent state slots, sink included (default: on a GPU from "
                                    "--gpu-memory-fraction, on the CPU 64)")
                         ->check(CLI::Range(2, 1 << 20));
  opt.fraction_option =
      app.add_option("--gpu-memory-fraction", opt.gpu_memory_fraction,
                     "On a GPU: the share of the device's memory this process takes; the KV "
                     "pages and recurrent slots --max-pages / --max-slots do not fix get what "
                     "the memory in use, the weights and the work buffers of a "
                     "--max-batched-tokens step leave of it, split for the most requests of "
                     "--context tokens at once (reported at start). Ignored on the CPU")
          ->check(fraction_in_unit_interval())
          ->capture_default_str();
  app.add_option("--context", opt.context,
                 "Tokens each request is planned to hold when --gpu-memory-fraction sizes the "
                 "pools (default: the model's max_position_embeddings, else 8192)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_flag("!--no-prefix-cache", opt.engine.pools.prefix_cache,
               "Never reuse cached prompt pages (or recurrent checkpoints) across requests");
  app.add_option("--checkpoint-slots", opt.engine.pools.checkpoint_slots,
                 "Hybrid models: recurrent-state checkpoints kept for prefix reuse (their own "
                 "slots, least recently used evicted; 0: hybrid models never reuse a prefix)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--checkpoint-stride", opt.engine.pools.checkpoint_stride,
                 "Tokens between recurrent checkpoints, a whole number of pages (0: every page)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-memory", opt.engine.pools.max_memory,
                 "The most memory the KV and recurrent pools may take, e.g. 8G or 512M (refused "
                 "at start when the pool sizes need more; default: what the host has free)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--max-batched-tokens", opt.engine.scheduler.max_batched_tokens,
                 "Tokens one step may feed (prefill chunks and decode rows)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-running", opt.engine.scheduler.max_running,
                 "Sequences running at once (the rest wait)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--schedule",
         [&opt](const std::string& name) {
           if (auto mode = engine::parse_schedule_mode(name))
             opt.engine.schedule = *mode;
         },
         "overlap: launch each next step while the current one runs (its ids fed from the "
         "current step's draws on the device), so the GPU never waits for the host; sync: "
         "one step after another. The same tokens either way (engine/README.md). Default: "
         "overlap on a GPU, sync on the CPU (nothing to hide there)")
      ->check(CLI::IsMember({"sync", "overlap"}));
  app.add_option("--device", opt.device, "Where the model runs: cpu, cuda or cuda:N")
      ->capture_default_str();
  app.add_option("--dtype", opt.dtype,
                 "Weights and GEMM inputs on CUDA: bfloat16 or float32 (the CPU runs float32)")
      ->capture_default_str();
  app.add_flag("--no-cuda-graphs", opt.no_graphs,
               "On CUDA, launch every kernel of a decode step instead of replaying a graph");
  app.add_option("--tensor-parallel", opt.tensor_parallel,
                 "Split the model across N ranks in this process (Nemotron-H; threads, one "
                 "scheduler and one set of pools for all). --device cuda with N GPUs puts rank "
                 "r on cuda:r, collectives over NCCL where built with it; otherwise the ranks "
                 "share the device, collectives through host memory")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

memory_fit memory_fit_of(const engine_cli& opt) {
  memory_fit fit;
  fit.fraction = opt.gpu_memory_fraction;
  fit.context = opt.context;
  fit.fraction_given = opt.fraction_option != nullptr && opt.fraction_option->count() > 0;
  fit.pages_given = opt.pages_option != nullptr && opt.pages_option->count() > 0;
  fit.slots_given = opt.slots_option != nullptr && opt.slots_option->count() > 0;
  if (opt.tensor_parallel > 1) {
    const auto devices = models::rank_devices(opt.device, opt.tensor_parallel);
    if (devices.front() == devices.back())  // the ranks share one device
      fit.fraction /= opt.tensor_parallel;
  }
  return fit;
}

parallel::group_maker tensor_parallel_group_maker() {
#ifdef MSTAR_HAVE_NCCL
  return parallel::nccl_group_maker();
#else
  return {};
#endif
}

result<models::run_options> run_options_of(const engine_cli& opt) {
  models::run_options run;
  run.device = opt.device;
  run.cuda_graphs = !opt.no_graphs;
  run.tensor_parallel_ranks = opt.tensor_parallel;
  run.tensor_parallel_groups = tensor_parallel_group_maker();
  if (opt.dtype == "bfloat16" || opt.dtype == "bf16") {
    run.dtype = mstar::dtype::bfloat16;
  } else if (opt.dtype == "float32" || opt.dtype == "f32") {
    run.dtype = mstar::dtype::float32;
  } else {
    return make_error(errc::invalid_argument,
                      "--dtype '" + opt.dtype + "' is not one of bfloat16, float32");
  }
  return run;
}

}  // namespace mstar::launcher
