#pragma once

// The control plane's credentials and the HTTP API key, read from the files a
// deployment names. Files holding secrets must be private to their owner.

#include <filesystem>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "launcher/deploy/deploy_config.hpp"

namespace mstar::deploy {

/// The fewest characters a shared secret may have.
inline constexpr std::size_t min_secret_chars = 16;

/// The contents of `file` without surrounding whitespace. Fails, naming `key`
/// (the deployment key that named the file), when the file is missing,
/// unreadable, empty, or readable by its group or others.
[[nodiscard]] result<std::string> read_private_file(const std::filesystem::path& file,
                                                    std::string_view key);

/// The control plane's shared secret, inline or from `auth.secret_file`; at
/// least min_secret_chars long. Fails in tls mode.
[[nodiscard]] result<std::string> read_secret(const auth_config& auth);

// TLS mode's files are the deployment folder of actors/deployment_certs.hpp
// (ca.pem, <node>.pem, <node>-key.pem): mstar-launch makes it, each node
// checks its own with load_node_credentials.

/// Creates `file` holding a fresh random secret (64 hex digits), readable by
/// its owner only, as mstar-launch does when `auth.secret_file` is missing.
/// Fails when the file exists: an existing secret is never replaced.
[[nodiscard]] result<void> create_secret_file(const std::filesystem::path& file);

}  // namespace mstar::deploy
