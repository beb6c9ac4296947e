#pragma once

// A node of a deployment: the face its local engine (an actors::runtime in
// the node's actor system) shows the router. Prefill runs a prompt and
// hands back its first token; decode runs a request (resumed after the
// tokens it already has) and streams its deltas to the router as messages.
// Every message serializes, so the router may sit in another process. The
// node watches the routers it streams to: one that goes away has its
// requests cancelled, so nothing runs for nobody.

#include <caf/fwd.hpp>
#include <string>

#include "actors/protocol.hpp"

namespace mstar::actors {

class runtime;

/// What a node actor is built from.
struct node_parts {
  std::string name;
  std::string role;  ///< "prefill", "decode" or "both"
  caf::actor conductor;
  std::vector<caf::actor> pools;
  std::int64_t max_context = 0;
  std::int64_t vocab_size = 0;
};

/// The parts of a node running `rt` (which must outlive the actor).
[[nodiscard]] node_parts node_parts_of(const runtime& rt, std::string name, std::string role);

/// Spawns a node actor in `sys` (the runtime's system).
[[nodiscard]] node_actor spawn_node_actor(caf::actor_system& sys, node_parts parts);

}  // namespace mstar::actors
