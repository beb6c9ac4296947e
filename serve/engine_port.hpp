#pragma once

// What the HTTP front end needs of an engine: submit a request with a delta
// callback, cancel it, read its gauges. `runtime_port` (runtime_port.hpp)
// is the actors' runtime behind it; tests and the fuzz target use their own
// or none, so nothing here needs CAF.

#include <cstdint>
#include <functional>
#include <optional>

#include "engine/request.hpp"

namespace mstar::serve {

/// The engine's state at one moment, for /metrics.
struct engine_gauges {
  std::int64_t running = 0, waiting = 0;
  std::int64_t kv_pages = 0, kv_free_pages = 0, kv_evictable_pages = 0;
  std::int64_t slots = 0, free_slots = 0;
  std::int64_t steps = 0, preemptions = 0;
  std::int64_t checkpoints = 0, checkpoint_hit_tokens = 0;
  /// Nodes whose gauges these sum (each reserves a sink page and slot).
  std::int64_t nodes = 1;
  /// A deployment's router counters; absent for one engine.
  struct router_counters {
    std::int64_t nodes_alive = 0, handoffs = 0, adopted = 0, reroutes = 0;
    /// The decode nodes' pulls of published prompts (actors::transfer_counters).
    std::int64_t pulls = 0, mapped_pulls = 0, failed_adoptions = 0;
    std::int64_t pages_fetched = 0, pages_local = 0, slots_fetched = 0, bytes = 0;
    double transfer_seconds = 0, copy_seconds = 0, verify_seconds = 0;
  };
  std::optional<router_counters> router;
};

/// The gauges of any engine counters with these fields (the runtime's, a
/// deployment's summed node counters).
template <class Counters>
[[nodiscard]] engine_gauges gauges_of(const Counters& s) {
  engine_gauges g;
  g.running = s.running;
  g.waiting = s.waiting;
  g.kv_pages = s.kv_pages;
  g.kv_free_pages = s.kv_free_pages;
  g.kv_evictable_pages = s.kv_evictable_pages;
  g.slots = s.slots;
  g.free_slots = s.free_slots;
  g.steps = s.steps;
  g.preemptions = s.preemptions;
  if constexpr (requires { s.checkpoints; }) {
    g.checkpoints = s.checkpoints;
    g.checkpoint_hit_tokens = s.checkpoint_hit_tokens;
  }
  return g;
}

class engine_port {
 public:
  virtual ~engine_port() = default;
  /// Queues `spec`; `on_delta` runs on an engine thread for each delta
  /// (the last one says why the request ended; a refusal is one such delta).
  virtual void submit(engine::request_spec spec,
                      std::function<void(const engine::delta&)> on_delta) = 0;
  /// Cancels request `id` at the next step (no effect once it ended).
  virtual void cancel(const engine::request_id& id) = 0;
  /// The gauges, or nullopt when the engine does not answer.
  [[nodiscard]] virtual std::optional<engine_gauges> gauges() = 0;
};

}  // namespace mstar::serve
