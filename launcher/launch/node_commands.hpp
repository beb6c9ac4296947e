#pragma once

// The command line of each node: `mstar-node --config FILE --node NAME
// [--model DIR] [--port N]`, run here or through ssh (README.md, "Contract").

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/deploy/deploy_config.hpp"
#include "launcher/launch/job_rank.hpp"

namespace mstar::launch {

/// What the launcher's flags add to every node's command.
struct command_options {
  std::filesystem::path node_binary;  ///< absolute; the same path on ssh hosts
  std::filesystem::path config_file;  ///< absolute; the same path on ssh hosts
  std::filesystem::path model;        ///< `--model` for every node; empty: the file's
  std::optional<std::uint16_t> port;  ///< `--port` for the front node; unset: the file's
};

/// One node as the launcher starts and supervises it.
struct node_spec {
  std::string name;
  deploy::role role = deploy::role::both;
  bool front = false;             ///< runs the HTTP listener; prints `serving` once all joined
  std::vector<std::string> argv;  ///< the whole command: mstar-node, or ssh running it
  bool over_ssh = false;          ///< stdin is a pipe; closing it stops the remote node
};

/// `mstar-node --config FILE --node NAME [--model DIR] [--port N]` for `node`.
[[nodiscard]] std::vector<std::string> node_argv(const command_options& options,
                                                 const deploy::node_config& node, bool front);

/// `ssh -o BatchMode=yes DEST 'sh -c ...'`: runs `remote` on DEST and stops it
/// (SIGTERM) when the ssh connection or its stdin closes.
[[nodiscard]] std::vector<std::string> ssh_argv(const std::string& destination,
                                                const std::vector<std::string>& remote);

/// The nodes this process starts: every node of `config` (over ssh where the
/// node has `ssh:`), or only nodes[rank] on this host when `rank` is set.
[[nodiscard]] std::vector<node_spec> plan_nodes(const deploy::deployment_config& config,
                                                const command_options& options,
                                                const std::optional<job_rank>& rank);

/// `word` quoted for a POSIX shell (unchanged when it needs no quotes).
[[nodiscard]] std::string shell_quote(std::string_view word);

/// `argv` as one shell command line.
[[nodiscard]] std::string shell_join(const std::vector<std::string>& argv);

}  // namespace mstar::launch
