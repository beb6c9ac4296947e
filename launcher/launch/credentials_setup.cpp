#include "launcher/launch/credentials_setup.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/deployment_certs.hpp"
#include "launcher/deploy/credentials.hpp"

namespace mstar::launch {

result<void> prepare_credentials(const deploy::deployment_config& config, bool dry_run) {
  const auto& auth = config.auth;
  if (auth.mode == deploy::auth_mode::tls)
    return prepare_tls_files(config, dry_run);
  std::error_code ec;
  if (auth.secret_file.empty() || std::filesystem::exists(auth.secret_file, ec))
    return {};
  if (dry_run) {
    spdlog::info("would create the shared secret {} (mode 0600)", auth.secret_file.string());
    return {};
  }
  auto made = deploy::create_secret_file(auth.secret_file);
  // Another rank of the same job may have created it a moment ago: keep theirs.
  if (!made && !std::filesystem::exists(auth.secret_file, ec))
    return made.error();
  if (made)
    spdlog::info("created the shared secret {} (64 random hex digits, mode 0600)",
                 auth.secret_file.string());
  return {};
}

result<void> prepare_tls_files(const deploy::deployment_config& config, bool dry_run) {
  const auto& dir = config.auth.tls_dir;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    if (dry_run) {
      spdlog::info("would make the deployment's certificates in {}", dir.string());
      return {};
    }
    std::vector<actors::node_identity> nodes;
    for (const auto& n : config.nodes)
      nodes.push_back({n.name, {n.host}});
    if (auto err = actors::make_deployment_certs(dir, nodes)) {
      return make_error(errc::io_error, fmt::format("auth.dir: making the certificates in {}: {}",
                                                    dir.string(), caf::to_string(err)));
    }
    spdlog::info("made the deployment's certificates in {} (a CA and one per node, mode 0600)",
                 dir.string());
  }
  for (const auto& n : config.nodes) {
    if (auto creds = actors::load_node_credentials(dir, n.name); !creds) {
      return make_error(errc::invalid_argument,
                        fmt::format("auth.dir: {}: node {}: {}", dir.string(), n.name,
                                    caf::to_string(creds.error())));
    }
  }
  return {};
}

}  // namespace mstar::launch
