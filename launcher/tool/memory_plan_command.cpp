// `mstar-tool memory-plan`: the pools --gpu-memory-fraction would make for a
// checkpoint on a device of a given size, without the device (weights from
// the safetensors headers, engine/memory_plan.hpp's arithmetic).
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/memory_plan.hpp"
#include "launcher/common/engine_cli.hpp"
#include "launcher/tool/commands.hpp"
#include "models/memory_facts.hpp"

namespace mstar::tool {
namespace {

struct memory_plan_args {
  std::string model;
  double device_gib = 0;
  double in_use_gib = 0;
  double fraction = 0.9;
  std::int64_t context = 0;
  std::string dtype = "bfloat16";
  models::pool_options pools;
  std::int64_t max_batched_tokens = 512;
  std::int64_t max_running = 64;
  std::optional<std::int64_t> pages, slots;
};

std::uint64_t gib_bytes(double gib) {
  return static_cast<std::uint64_t>(std::llround(gib * 1024.0 * 1024.0 * 1024.0));
}

int run_plan(const memory_plan_args& a) {
  const auto fail = [](const error& e) {
    std::cerr << "mstar-tool memory-plan: " << e.message() << '\n';
    return 1;
  };
  const mstar::dtype dtype =
      (a.dtype == "float32" || a.dtype == "f32") ? mstar::dtype::float32 : mstar::dtype::bfloat16;
  const std::int64_t rows = std::min(a.max_running, a.max_batched_tokens);
  auto facts = models::memory_facts_of(a.model, dtype, a.pools, a.max_batched_tokens, rows);
  if (!facts)
    return fail(facts.error());
  auto r = engine::plan_request_of(*facts);
  r.device_total_bytes = gib_bytes(a.device_gib);
  r.in_use_bytes = gib_bytes(a.in_use_gib);
  r.fraction = a.fraction;
  r.context_tokens =
      a.context > 0 ? a.context : (facts->max_context > 0 ? facts->max_context : 8192);
  r.pages = a.pages;
  r.slots = a.slots;
  auto plan = engine::plan_pool_memory(r);
  if (!plan)
    return fail(plan.error());
  nlohmann::json out{{"family", facts->family},
                     {"parameters", facts->parameters},
                     {"weight_bytes", r.weight_bytes},
                     {"workspace_bytes", r.workspace_bytes},
                     {"device_bytes", r.device_total_bytes},
                     {"in_use_bytes", r.in_use_bytes},
                     {"fraction", r.fraction},
                     {"budget_bytes", plan->budget_bytes},
                     {"page_bytes", r.page_bytes},
                     {"slot_bytes", r.slot_bytes},
                     {"checkpoint_slots", r.checkpoint_slots},
                     {"pages", plan->pages},
                     {"slots", plan->slots},
                     {"pool_bytes", plan->pool_bytes},
                     {"context", r.context_tokens},
                     {"pages_per_request", plan->pages_per_request},
                     {"max_requests", plan->max_requests},
                     {"summary", engine::describe(r, *plan)}};
  std::cout << out.dump(2) << '\n';
  return 0;
}

}  // namespace

void add_memory_plan_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<memory_plan_args>();
  auto* cmd = app.add_subcommand(
      "memory-plan",
      "The KV pages, recurrent slots and concurrent requests --gpu-memory-fraction would give a "
      "checkpoint on a device of --gpu-memory GiB (JSON), without a GPU");
  cmd->add_option("--model", a->model, "Checkpoint folder (config.json, *.safetensors)")
      ->required();
  cmd->add_option("--gpu-memory", a->device_gib, "The device's memory in GiB (an H200: 139.8)")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--in-use", a->in_use_gib,
                  "GiB already taken before the weights (CUDA context, other processes)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--fraction", a->fraction, "--gpu-memory-fraction")
      ->check(launcher::fraction_in_unit_interval())
      ->capture_default_str();
  cmd->add_option("--context", a->context,
                  "Tokens per request (default: the model's max_position_embeddings, else 8192)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--dtype", a->dtype, "bfloat16 or float32 (weights and KV on the device)")
      ->check(CLI::IsMember({"bfloat16", "bf16", "float32", "f32"}))
      ->capture_default_str();
  cmd->add_option("--page-size", a->pools.page_size, "KV page size in tokens")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--checkpoint-slots", a->pools.checkpoint_slots,
                  "Recurrent checkpoint slots (hybrid models)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-batched-tokens", a->max_batched_tokens, "Tokens of the largest step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-running", a->max_running, "Rows of the largest step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--max-pages", a->pages, "KV pages given explicitly (kept)")
      ->check(CLI::Range(2, 1 << 24));
  cmd->add_option("--max-slots", a->slots, "Recurrent slots given explicitly (kept)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->callback([a, &exit_code] { exit_code = run_plan(*a); });
}

}  // namespace mstar::tool
