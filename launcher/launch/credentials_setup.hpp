#pragma once

// Credentials the launcher makes before any node starts.

#include "core/result.hpp"
#include "launcher/deploy/deploy_config.hpp"

namespace mstar::launch {

/// In secret mode with a `secret_file` that does not exist, creates it (64
/// random hex digits, mode 0600) and says so; an existing file is kept. In
/// tls mode, calls prepare_tls_files. With `dry_run`, only says what it
/// would do.
[[nodiscard]] result<void> prepare_credentials(const deploy::auth_config& auth, bool dry_run);

/// The hook for TLS mode: today it checks that ca.pem, cert.pem and key.pem
/// exist in `auth.tls_dir`; generating missing ones (a deployment CA and a
/// certificate per host) is still to be written here.
[[nodiscard]] result<void> prepare_tls_files(const deploy::auth_config& auth, bool dry_run);

}  // namespace mstar::launch
