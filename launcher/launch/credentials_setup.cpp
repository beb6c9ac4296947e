#include "launcher/launch/credentials_setup.hpp"

#include <filesystem>
#include <spdlog/spdlog.h>

#include "launcher/deploy/credentials.hpp"

namespace mstar::launch {

result<void> prepare_credentials(const deploy::auth_config& auth, bool dry_run) {
  if (auth.mode == deploy::auth_mode::tls)
    return prepare_tls_files(auth, dry_run);
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

result<void> prepare_tls_files(const deploy::auth_config& auth, bool dry_run) {
  (void)dry_run;  // TODO(tls): generate a CA and per-host certificates here when missing
  auto files = deploy::find_tls_files(auth);
  if (!files)
    return files.error();
  return {};
}

}  // namespace mstar::launch
