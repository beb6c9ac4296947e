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

/// The files of tls mode, each checked to exist; key.pem must be private.
struct tls_files {
  std::filesystem::path ca;    ///< ca.pem: the authority every node's certificate chains to
  std::filesystem::path cert;  ///< cert.pem: this node's certificate
  std::filesystem::path key;   ///< key.pem: its private key
};
[[nodiscard]] result<tls_files> find_tls_files(const auth_config& auth);

/// Creates `file` holding a fresh random secret (64 hex digits), readable by
/// its owner only, as mstar-launch does when `auth.secret_file` is missing.
/// Fails when the file exists: an existing secret is never replaced.
[[nodiscard]] result<void> create_secret_file(const std::filesystem::path& file);

}  // namespace mstar::deploy
