#pragma once

// A node of a deployment: the face its local engine (an actors::runtime in
// the node's actor system) shows the router. Prefill runs a prompt and
// hands back its first token; decode runs a request (resumed after the
// tokens it already has) and streams its deltas to the router as messages.
// Every message serializes, so the router may sit in another process. The
// node watches the routers it streams to: one that goes away has its
// requests cancelled, so nothing runs for nobody.
//
// With a transfer agent, a prefill node publishes the prompt's pool state
// (pages and slot held under a lease, with checksums) in its handoff, and a
// decode node adopts it: its pools take pages they already hold under the
// same keys, the transfer agent reads the rest and the slot from the
// prefill node's arenas and verifies them, and the request resumes there
// with the prompt already computed. Any failure on that path (no room, a
// dead peer, a checksum mismatch) gives back what the adoption took and the
// decode node recomputes the prompt instead: never decodes corrupted state.

#include <caf/fwd.hpp>
#include <string>

#include "actors/protocol.hpp"
#include "actors/transfer_actor.hpp"

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
  /// The node's transfer agent; null: it neither publishes nor adopts (a
  /// handoff's decode node then recomputes the prompt).
  transfer_actor transfer;
  std::vector<std::string> arenas;  ///< its arenas' descriptors (JSON), for offers
  /// How long published state is held for a decode node that never says it
  /// is done with it.
  std::chrono::milliseconds lease{30000};
  std::chrono::milliseconds transfer_timeout{30000};
};

/// The parts of a node running `rt` (which must outlive the actor).
[[nodiscard]] node_parts node_parts_of(const runtime& rt, std::string name, std::string role);

/// Spawns a node actor in `sys` (the runtime's system).
[[nodiscard]] node_actor spawn_node_actor(caf::actor_system& sys, node_parts parts);

}  // namespace mstar::actors
