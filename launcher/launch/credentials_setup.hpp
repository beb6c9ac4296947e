#pragma once

// Credentials the launcher makes before any node starts.

#include "core/result.hpp"
#include "launcher/deploy/deploy_config.hpp"

namespace mstar::launch {

/// In secret mode with a `secret_file` that does not exist, creates it (64
/// random hex digits, mode 0600) and says so; an existing file is kept. In
/// tls mode, calls prepare_tls_files. With `dry_run`, only says what it
/// would do.
[[nodiscard]] result<void> prepare_credentials(const deploy::deployment_config& config,
                                               bool dry_run);

/// TLS mode: when `auth.dir` does not exist, makes it (a deployment CA and a
/// certificate per node, with the node's host in its SAN:
/// actors/deployment_certs.hpp); then checks every node's credential the way
/// the node will (a folder of another deployment, or with a node missing,
/// is an error naming it).
[[nodiscard]] result<void> prepare_tls_files(const deploy::deployment_config& config, bool dry_run);

}  // namespace mstar::launch
