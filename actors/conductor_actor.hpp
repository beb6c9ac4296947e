#pragma once

// The conductor actor: owns the scheduler and drives each step through the
// pool actors and the worker (ARCHITECTURE.md, Threads and ownership):
// registrations, then admit pool by pool in dependency order (a refusal
// rolls back the pools admitted before it, newest first, and the scheduler
// shrinks the step), plans from every pool, the worker's forward, commit
// everywhere, then the scheduler turns the output into deltas for each
// request's sink. The decisions are engine::scheduler's; this file only
// moves messages. An actor that fails or exits fails every request in
// flight with an error the caller sees.

#include <memory>
#include <vector>

#include "actors/protocol.hpp"
#include "engine/scheduler.hpp"
#include "models/causal_lm.hpp"

namespace mstar::actors {

/// What the conductor is built from.
struct conductor_parts {
  engine::scheduler_config limits;
  std::shared_ptr<const models::causal_lm> model;  ///< declares steps (const, thread-safe)
  std::vector<pool_actor> pools;                   ///< in dependency order
  worker_actor worker;
  preprocess_actor preprocess;
  spec_row_builder_actor spec_rows;
  bool extend_chains = false;  ///< the KV pool keeps a prefix cache: feed it generated ids
  /// overlap: once step N is queued on the worker, the scheduler foresees
  /// N+1, the spec-row builder makes its payload, each pool commits N and
  /// admits and plans N+1 in one round trip, and N+1 is launched before N
  /// is waited for (engine/README.md, "Overlap scheduling").
  engine::schedule_mode schedule = engine::schedule_mode::sync;
  /// The recurrent pool's checkpoint stride (0: none), for the scheduler.
  std::int64_t checkpoint_stride = 0;
  /// The page size the pools key prompts at (0: none keys them), for a
  /// front end's keys (`request_spec::prefix`).
  std::int64_t key_page_size = 0;
};

/// Spawns the conductor; it monitors every part.
[[nodiscard]] caf::actor spawn_conductor(caf::actor_system& sys, conductor_parts parts);

/// A delta that fails request `id` with `why` (a sink's last delta).
[[nodiscard]] engine::delta error_delta(const engine::request_id& id, std::string why);

}  // namespace mstar::actors
