#include "launcher/common/memory_fit.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "engine/memory_plan.hpp"
#include "kernels/device_memory.hpp"
#include "models/memory_facts.hpp"

namespace mstar::launcher {

std::int64_t planned_context(const memory_fit& fit, const models::causal_lm& model) {
  if (fit.context > 0)
    return fit.context;
  return model.max_context() > 0 ? model.max_context() : 8192;
}

result<std::string> fit_pools_to_device(const std::filesystem::path& model_dir,
                                        const models::causal_lm& model, const std::string& device,
                                        const memory_fit& fit, engine::engine_config& config) {
  auto& pools = config.pools;
  if (!model.on_gpu()) {
    if (!fit.fraction_given)
      return std::string{};
    return fmt::format(
        "--gpu-memory-fraction is ignored on the CPU: the pools keep {} KV pages "
        "and {} recurrent slots (--max-pages, --max-slots)",
        pools.max_num_pages, pools.max_slots);
  }
  if (fit.pages_given && fit.slots_given)
    return std::string{};  // both sizes given: nothing left to plan
  auto index = models::parse_device(device);
  if (!index)
    return index.error();
  auto memory = kernels::query_device_memory(std::max(*index, 0));
  if (!memory)
    return memory.error().with_context("--gpu-memory-fraction");
  const auto& s = config.scheduler;
  const std::int64_t rows = std::min<std::int64_t>(s.max_running, s.max_batched_tokens);
  auto facts =
      models::memory_facts_of(model_dir, model.compute_dtype(), pools, s.max_batched_tokens, rows);
  if (!facts)
    return facts.error().with_context("--gpu-memory-fraction");
  auto r = engine::plan_request_of(*facts);
  r.device_total_bytes = memory->total_bytes;
  r.in_use_bytes = memory->total_bytes - std::min(memory->free_bytes, memory->total_bytes);
  r.fraction = fit.fraction;
  r.context_tokens = planned_context(fit, model);
  if (fit.pages_given)
    r.pages = pools.max_num_pages;
  if (fit.slots_given)
    r.slots = pools.max_slots;
  auto plan = engine::plan_pool_memory(r);
  if (!plan)
    return plan.error();
  if (plan->pages > 0)
    pools.max_num_pages = plan->pages;
  if (plan->slots > 0)
    pools.max_slots = plan->slots;
  return fmt::format("pools on {} ({}): {}", device, model.device_name(),
                     engine::describe(r, *plan));
}

}  // namespace mstar::launcher
