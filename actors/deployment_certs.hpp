#pragma once

// A deployment's TLS credentials: a self-signed CA made for the deployment
// and one certificate per node signed by it (EC P-256, SHA-256), written as
// PEM files readable by their owner only. `mstar-launch` makes the folder;
// each `mstar-node` loads its own credential from it and hands it to
// `configure_node` (control_plane.hpp). Trust is the CA file: a certificate
// of another deployment, or none, does not verify.
//
// The deployment file's `auth: {mode: secret}` makes the same kind of
// credential without a folder to copy: every node derives the deployment's
// CA key from the shared secret and issues its own certificate
// (`derive_node_credentials`). README.md weighs the two.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mstar::actors {

/// A node to issue a certificate for.
struct node_identity {
  std::string name;                ///< the subject CN and the file stem: [A-Za-z0-9._-], not "ca"
  std::vector<std::string> hosts;  ///< DNS names or IP addresses the node is reached at (SAN)
};

/// Where one node's credential lives: three PEM files.
struct node_credentials {
  std::filesystem::path ca_file;      ///< the deployment CA's certificate (trust anchor)
  std::filesystem::path certificate;  ///< the node's certificate, signed by the CA
  std::filesystem::path key;          ///< the node's private key (mode 0600)
};

/// Makes `dir` (mode 0700; it must not exist or be empty) holding a fresh
/// deployment CA (`ca.pem`, `ca-key.pem`) and, for each node, `<name>.pem`
/// and `<name>-key.pem`, every file mode 0600. The CA key stays with the
/// launcher: nodes need only `ca.pem` and their own pair.
[[nodiscard]] caf::error make_deployment_certs(const std::filesystem::path& dir,
                                               const std::vector<node_identity>& nodes,
                                               std::chrono::hours validity = std::chrono::hours{
                                                   24 * 365});

/// The credential of node `name` in deployment folder `dir`, checked the
/// way the TLS handshake will use it: the files exist, the key is not
/// readable by group or others, the key matches the certificate and the
/// certificate verifies against `ca.pem`. CAF reads these files again on
/// every connection and throws from its I/O thread when they are bad, so a
/// node checks here, before its actor system starts.
[[nodiscard]] caf::expected<node_credentials> load_node_credentials(
    const std::filesystem::path& dir, const std::string& name);

/// The fewest characters a shared secret may have (the deployment file's
/// rule, mstar::deploy::min_secret_chars, which the tests check is equal).
inline constexpr std::size_t min_secret_chars = 16;

/// A node credential made from a shared secret, in a private temporary
/// folder it owns and removes when destroyed. CAF re-reads the files on
/// every connection, so it must outlive the actor system it configured.
/// Move-only; owned by the process that derived it (a forked child that
/// exits through `_exit` leaves the folder to its parent).
class derived_credentials {
 public:
  derived_credentials(derived_credentials&& other) noexcept;
  derived_credentials& operator=(derived_credentials&& other) noexcept;
  derived_credentials(const derived_credentials&) = delete;
  derived_credentials& operator=(const derived_credentials&) = delete;
  ~derived_credentials();

  /// The three files, for `configure_node`.
  [[nodiscard]] const node_credentials& credentials() const noexcept { return creds_; }
  /// The folder holding them (mode 0700).
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }

 private:
  friend caf::expected<derived_credentials> derive_node_credentials(std::string_view,
                                                                    std::string_view,
                                                                    const node_identity&);
  derived_credentials(std::filesystem::path dir, node_credentials creds) noexcept;
  void remove() noexcept;

  std::filesystem::path dir_;  ///< empty once moved from
  node_credentials creds_;
};

/// `node`'s credential for the deployment called `deployment` whose nodes
/// share `secret` (at least min_secret_chars). The CA key pair is derived
/// from the secret (HKDF-SHA256, the deployment name as salt; an EC P-256
/// scalar), so every holder makes the same CA: subject "CN=mstar deployment
/// <deployment> CA", fixed serial and validity. The node's key is fresh and
/// its certificate, signed by that key, names `node.hosts`. Writes ca.pem,
/// `<name>.pem` and `<name>-key.pem` (0600) into a new folder (0700) under
/// $XDG_RUNTIME_DIR, else the temporary directory; the CA key and the
/// secret are written nowhere. `deployment`: 1-44 of [A-Za-z0-9._-].
[[nodiscard]] caf::expected<derived_credentials> derive_node_credentials(
    std::string_view secret, std::string_view deployment, const node_identity& node);

}  // namespace mstar::actors
