#pragma once

// A deployment's TLS credentials: a self-signed CA made for the deployment
// and one certificate per node signed by it (EC P-256, SHA-256), written as
// PEM files readable by their owner only. `mstar-launch` makes the folder;
// each `mstar-node` loads its own credential from it and hands it to
// `configure_node` (control_plane.hpp). Trust is the CA file: a certificate
// of another deployment, or none, does not verify.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <chrono>
#include <filesystem>
#include <string>
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

}  // namespace mstar::actors
