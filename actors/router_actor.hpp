#pragma once

// A deployment's router (ARCHITECTURE.md, Disaggregated prefill and
// decode): it owns no engine, only where each request is. With a node that
// only prefills, a request's prompt runs there (capped at one token) and
// the rest on the least loaded node that decodes, resumed after the tokens
// it already has; with `both` nodes only, the whole request goes to one.
// Every node is monitored: a request on a node that goes away is re-routed
// (resumed after the tokens its client already has) to another node that
// can take it, or waits up to `wait_for_node` for one to join (a restarted
// node), then fails naming the node that left. Deltas from a
// node a request has left are dropped, so a client never sees a token
// twice. Each dispatch runs under its own wire id ("<id>#<attempt>"): a
// node the router took for dead (a dropped link) may still run an earlier
// dispatch, and the new one never collides with it; when that node joins
// again, the dispatches moved off it are cancelled there.
//
// Messages: (join_atom, the node actor as caf::actor, node_info), (submit_atom, spec, sink),
// (cancel_atom, id), (delta_atom, ticket, delta) from the nodes, (stats_atom) ->
// router_stats.

#include <caf/fwd.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/protocol.hpp"

namespace mstar::actors {

/// How the router behaves.
struct router_options {
  /// How long a prefill may take before its request is re-routed.
  std::chrono::milliseconds prefill_timeout{std::chrono::seconds(600)};
  /// Re-routes of one request before it fails.
  std::int32_t max_reroutes = 3;
  /// How long a request waits for a node that can take it (one restarting
  /// after a crash) before it fails; 0: it fails at once.
  std::chrono::milliseconds wait_for_node{0};
};

/// Spawns a router with no nodes yet (join them with join_atom).
[[nodiscard]] caf::actor spawn_router(caf::actor_system& sys, router_options options);

}  // namespace mstar::actors
