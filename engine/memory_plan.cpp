#include "engine/memory_plan.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/host_memory.hpp"

namespace mstar::engine {
namespace {

using u64 = std::uint64_t;

u64 u(std::int64_t n) {
  return static_cast<u64>(std::max<std::int64_t>(n, 0));
}

error too_small(const memory_plan_request& r, const std::string& why) {
  return make_error(errc::out_of_range,
                    fmt::format("--gpu-memory-fraction {}: {} ({} of the device's {}: {} in use, "
                                "{} of weights, {} of work buffers)",
                                r.fraction, why,
                                format_bytes(static_cast<u64>(std::floor(
                                    r.fraction * static_cast<double>(r.device_total_bytes)))),
                                format_bytes(r.device_total_bytes), format_bytes(r.in_use_bytes),
                                format_bytes(r.weight_bytes), format_bytes(r.workspace_bytes)));
}

}  // namespace

result<memory_plan> plan_pool_memory(const memory_plan_request& r) {
  if (!(r.fraction > 0.0 && r.fraction <= 1.0)) {
    return make_error(errc::invalid_argument,
                      fmt::format("--gpu-memory-fraction: must be in (0, 1], got {}", r.fraction));
  }
  if (r.context_tokens < 1 || r.page_size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("the planned context ({}) and page size ({}) must be >= 1",
                                  r.context_tokens, r.page_size));
  }
  const bool kv = r.page_bytes > 0, rec = r.slot_bytes > 0;
  const u64 share =
      static_cast<u64>(std::floor(r.fraction * static_cast<double>(r.device_total_bytes)));
  const u64 taken = r.in_use_bytes + r.weight_bytes + r.workspace_bytes;
  if (share <= taken)
    return too_small(r, "nothing is left for the KV and recurrent pools");
  memory_plan p;
  p.budget_bytes = share - taken;
  p.pages_per_request = kv ? (r.context_tokens + r.page_size - 1) / r.page_size : 0;
  // The sink page and slot, the checkpoints, and whatever was given.
  u64 fixed = 0, per_request = 0;
  std::int64_t cap = std::max(plan_max_pages, plan_max_slots);
  if (kv) {
    const std::int64_t pages = r.pages.value_or(1);
    fixed += u(pages) * r.page_bytes;
    if (r.pages)
      cap = std::min(cap, (pages - 1) / p.pages_per_request);
    else
      per_request += u(p.pages_per_request) * r.page_bytes;
  }
  if (rec) {
    const std::int64_t slots = r.slots.value_or(1);
    fixed += (u(slots) + u(r.checkpoint_slots)) * r.slot_bytes;
    if (r.slots)
      cap = std::min(cap, slots - 1);
    else
      per_request += r.slot_bytes;
  }
  if (fixed > p.budget_bytes) {
    return too_small(
        r, fmt::format("the budget of {} cannot hold the pools' fixed part of {} "
                       "(sink page and slot, {} checkpoint slots, explicit sizes)",
                       format_bytes(p.budget_bytes), format_bytes(fixed), r.checkpoint_slots));
  }
  u64 left = p.budget_bytes - fixed;
  std::int64_t n = cap;
  if (per_request > 0)
    n = static_cast<std::int64_t>(std::min<u64>(u(cap), left / per_request));
  if (kv && !r.pages)
    n = std::min(n, (plan_max_pages - 1) / p.pages_per_request);
  if (rec && !r.slots)
    n = std::min(n, plan_max_slots - 1);
  if (n < 1) {
    return too_small(
        r, fmt::format("one request of {} tokens needs {} ({} KV pages of {} and a recurrent "
                       "slot of {}) beside the pools' fixed {}, more than the budget of {}",
                       r.context_tokens, format_bytes(per_request), p.pages_per_request,
                       format_bytes(r.page_bytes), format_bytes(r.slot_bytes), format_bytes(fixed),
                       format_bytes(p.budget_bytes)));
  }
  left -= u(n) * per_request;
  p.max_requests = n;
  if (kv) {
    p.pages = r.pages.value_or(1 + n * p.pages_per_request);
    if (!r.pages) {
      const u64 extra = std::min<u64>(left / r.page_bytes, u(plan_max_pages - p.pages));
      p.pages += static_cast<std::int64_t>(extra);
    }
  }
  if (rec)
    p.slots = r.slots.value_or(1 + n);
  p.pool_bytes =
      u(p.pages) * r.page_bytes + (u(p.slots) + (rec ? u(r.checkpoint_slots) : 0)) * r.slot_bytes;
  return p;
}

memory_plan_request plan_request_of(const models::memory_facts& facts) {
  memory_plan_request r;
  r.weight_bytes = facts.weight_bytes;
  r.workspace_bytes = facts.workspace_bytes;
  if (facts.pools.kv) {
    r.page_bytes = facts.pools.kv->geometry.page_bytes();
    r.page_size = facts.pools.kv->geometry.page_size;
  }
  if (facts.pools.recurrent) {
    r.slot_bytes = facts.pools.recurrent->slot_bytes();
    r.checkpoint_slots = facts.pools.recurrent->checkpoint_slots;
  }
  return r;
}

std::string describe(const memory_plan_request& r, const memory_plan& p) {
  std::string pools;
  if (p.pages > 0)
    pools = fmt::format("{} KV pages of {}", p.pages, format_bytes(r.page_bytes));
  if (p.slots > 0) {
    pools += fmt::format("{}{} recurrent slots of {} (sink included; {} checkpoint slots beside)",
                         pools.empty() ? "" : ", ", p.slots, format_bytes(r.slot_bytes),
                         r.checkpoint_slots);
  }
  return fmt::format(
      "weights {}, workspace {}, budget {} ({} of {}, {} in use before the "
      "weights): {}, {} in all: {} requests at {} tokens at once",
      format_bytes(r.weight_bytes), format_bytes(r.workspace_bytes), format_bytes(p.budget_bytes),
      r.fraction, format_bytes(r.device_total_bytes), format_bytes(r.in_use_bytes), pools,
      format_bytes(p.pool_bytes), p.max_requests, r.context_tokens);
}

}  // namespace mstar::engine
