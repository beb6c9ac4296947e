#pragma once

// Pool sizes from the memory a device has (`--gpu-memory-fraction`): what is
// left of the fraction after the memory already in use, the weights and the
// work buffers of the largest step is split between KV pages and recurrent
// slots so that as many requests of a given context as possible run at once.
// Pure arithmetic: the launchers feed it the device's numbers, mstar-tool
// made-up ones.

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "models/memory_facts.hpp"

namespace mstar::engine {

/// The most KV pages and recurrent slots a plan makes (the front ends'
/// `--max-pages` and `--max-slots` ranges).
inline constexpr std::int64_t plan_max_pages = std::int64_t{1} << 24;
inline constexpr std::int64_t plan_max_slots = std::int64_t{1} << 20;

/// What the plan is made from.
struct memory_plan_request {
  std::uint64_t device_total_bytes = 0;  ///< the device's memory
  double fraction = 0.9;                 ///< of it the process may take, in (0, 1]
  /// Taken before the weights are uploaded: the CUDA context, other
  /// processes, anything this process already allocated.
  std::uint64_t in_use_bytes = 0;
  std::uint64_t weight_bytes = 0;      ///< the weights, still to be uploaded
  std::uint64_t workspace_bytes = 0;   ///< work buffers of the largest step
  std::uint64_t page_bytes = 0;        ///< one KV page, every layer (0: no KV pool)
  std::uint64_t slot_bytes = 0;        ///< one recurrent slot, every layer (0: no recurrent pool)
  std::int64_t page_size = 16;         ///< tokens per KV page
  std::int64_t context_tokens = 8192;  ///< tokens each request is planned to hold
  std::int64_t checkpoint_slots = 0;   ///< recurrent slots beside `max_slots` (prefix checkpoints)
  std::optional<std::int64_t> pages;   ///< KV pages given explicitly (sink included): kept
  std::optional<std::int64_t> slots;   ///< recurrent slots given explicitly (sink included): kept
};

/// The pools' sizes a budget gives.
struct memory_plan {
  std::uint64_t budget_bytes = 0;      ///< fraction x total - in use - weights - workspace
  std::uint64_t pool_bytes = 0;        ///< what the planned pools take of it
  std::int64_t pages = 0;              ///< `max_num_pages`, the sink page included (0: no KV pool)
  std::int64_t slots = 0;              ///< `max_slots`, the sink included (0: no recurrent pool)
  std::int64_t pages_per_request = 0;  ///< ceil(context / page size)
  std::int64_t max_requests = 0;       ///< requests of the context that fit at once
};

/// The plan for `r`: n requests of `context_tokens` each need
/// `pages_per_request` KV pages and one recurrent slot; the sink page, the
/// sink slot and the checkpoint slots come first; n is the largest that
/// fits (and that the explicit sizes allow), and bytes left below one more
/// request become KV pages (the prefix cache's, and shorter requests').
/// out_of_range when the budget is not positive or cannot hold one request,
/// naming the numbers; invalid_argument for a fraction outside (0, 1] or a
/// context or page size below 1.
[[nodiscard]] result<memory_plan> plan_pool_memory(const memory_plan_request& r);

/// `r` with the pools' bytes from a checkpoint's facts (page and slot bytes,
/// page size, checkpoint slots), its weights and workspace.
[[nodiscard]] memory_plan_request plan_request_of(const models::memory_facts& facts);

/// One line for the start-up log: "weights 15.6 GiB, workspace 1.1 GiB,
/// budget 104.2 GiB (0.90 of 139.8 GiB, 0.6 GiB in use): 418 KV pages of ...,
/// 400 requests at 8192 tokens".
[[nodiscard]] std::string describe(const memory_plan_request& r, const memory_plan& p);

}  // namespace mstar::engine
