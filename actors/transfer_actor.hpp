#pragma once

// A node's transfer agent as an actor (ARCHITECTURE.md, Threads and
// ownership): it owns the node's transport::agent (UCX context, worker,
// registrations), registers the pools' arenas once at start, describes them
// for offers, and pulls another node's published pages and slots into the
// pages and slots this node's pools adopted, verifying each unit's checksum.
// Pools in device memory are registered as device arenas: a same-host peer
// opens them over CUDA IPC and copies device to device, and checksums are
// read through pinned staging (actors/pool_regions.hpp).
// It runs on a thread of its own (detached): waiting on the network blocks
// no other actor. A progress thread serves other nodes' reads of ours.

#include <caf/fwd.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/pool_regions.hpp"
#include "actors/protocol.hpp"
#include "transport/agent.hpp"

namespace mstar::actors {

/// One pull: the peer's arenas and what to read from them into ours.
struct pull_order {
  std::vector<std::string> arenas;                  ///< the peer's descriptors (JSON)
  std::vector<transport::unit_pair> pages;          ///< peer page -> our page
  std::vector<transport::unit_pair> slots;          ///< peer slot -> our slot
  std::vector<transport::unit_checksum> kv_sums;    ///< by peer page
  std::vector<transport::unit_checksum> slot_sums;  ///< by peer slot
  std::chrono::milliseconds timeout{30000};
};

/// What one pull moved.
struct pull_result {
  std::int64_t bytes = 0;
  std::chrono::microseconds took{0};    ///< start to verified
  std::chrono::microseconds copy{0};    ///< of which moving the bytes
  std::chrono::microseconds verify{0};  ///< of which checking their checksums
  bool mapped = false;                  ///< through a mapped segment (same host)
  bool device = false;                  ///< device to device over CUDA IPC (same host)
};

using transfer_actor =
    caf::typed_actor<caf::replies_to<describe_atom>::with<std::vector<std::string>>,
                     caf::replies_to<pull_atom, pull_order>::with<pull_result>>;

/// What the transfer actor is made of.
struct transfer_setup {
  transport::agent_options agent;
  pool_regions regions;                    ///< this node's arenas
  std::shared_ptr<const void> keep_alive;  ///< what owns them (outlives the agent)
};

/// Makes the agent, registers `setup.regions` and starts its progress
/// thread; then spawns the actor owning it. The agent's error when UCX
/// cannot start or register.
[[nodiscard]] caf::expected<transfer_actor> spawn_transfer_actor(caf::actor_system& sys,
                                                                 transfer_setup setup);

}  // namespace mstar::actors

// In-process only (the node actor and its transfer actor share a process).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::pull_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::pull_result)
