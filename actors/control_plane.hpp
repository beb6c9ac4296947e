#pragma once

// The control plane between the nodes of a deployment: CAF's middleman
// (BASP) over mutual TLS. A node's actor system loads CAF's OpenSSL module
// with the node's credential (deployment_certs.hpp); every connection, in
// either direction, then needs a certificate signed by the deployment's CA
// before BASP reads a byte, so a process without the credential cannot
// reach any actor (not the published one, not CAF's spawn server, not an
// actor id). Refused handshakes are logged through spdlog by the refusing
// node with the peer's address. README.md says why TLS, and how a shared
// secret becomes the same TLS (derive_node_credentials).

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/expected.hpp>
#include <chrono>
#include <cstdint>
#include <string>

#include "actors/deployment_certs.hpp"

namespace mstar::actors {

/// Prepares `cfg` for a node of a deployment: loads the middleman and the
/// OpenSSL module, points it at `creds` and turns off BASP's automatic
/// connections (they open a plain-TCP port). Also starts the refusal log.
/// Call before constructing the actor system; `creds` should come from
/// `load_node_credentials`, which checks the files CAF will read.
[[nodiscard]] caf::error configure_node(caf::actor_system_config& cfg,
                                        const node_credentials& creds);

/// Publishes `whom` on `host`:`port` over mutual TLS only (port 0 picks a
/// free one) and returns the bound port. `host` is required (an empty host
/// would bind every interface); the system must be configured by
/// `configure_node`, or this refuses to publish.
[[nodiscard]] caf::expected<std::uint16_t> publish_node(caf::actor_system& sys,
                                                        const caf::actor& whom,
                                                        const std::string& host,
                                                        std::uint16_t port);

/// Connects to the actor a node published at `host`:`port` over mutual TLS.
/// Fails with `timed_out` when no authenticated node answered within
/// `timeout` (a silent or stalled peer), `peer_failed` when the peer closed
/// or refused the handshake. Blocks the calling thread: not for handlers.
[[nodiscard]] caf::expected<caf::actor> connect_node(caf::actor_system& sys,
                                                     const std::string& host, std::uint16_t port,
                                                     std::chrono::milliseconds timeout);

}  // namespace mstar::actors
