#pragma once

// The pool actors: `kv_pool_actor` and `recurrent_pool_actor` are this one
// shell over a pool_set holding one pool. The state owns the pool; the
// handlers translate, call, reply.

#include <map>
#include <memory>

#include "actors/protocol.hpp"
#include "engine/pool_set.hpp"

namespace mstar::actors {

/// What a pool actor owns.
struct pool_state {
  /// What the pools' arenas borrow (the model's device stream): released
  /// after the pools, so device arenas free on a live stream.
  std::shared_ptr<const void> keep_alive;
  std::shared_ptr<engine::pool_set> pools;
  engine::step_record step;  ///< the step in flight
  step_ptr payload;          ///< keeps `step.request` alive until commit or rollback
  /// Requests adopted from another node, by the prompt tokens they brought
  /// (registration answers these instead of a cache lookup).
  std::map<std::string, std::int64_t> adopting, adopted;
  static inline const char* name = "mstar.pool";
};

/// Spawns a pool actor owning `pools` (made with one pool kind);
/// `keep_alive` outlives them (the backend whose memory they live in).
[[nodiscard]] pool_actor spawn_pool_actor(caf::actor_system& sys,
                                          std::shared_ptr<engine::pool_set> pools,
                                          std::shared_ptr<const void> keep_alive);

}  // namespace mstar::actors
