#include "launcher/launch/node_commands.hpp"

#include <algorithm>
#include <cctype>

namespace mstar::launch {
namespace {

// Runs "$@" (the node) on the remote host; a watcher sends it SIGTERM when
// stdin reaches EOF, which happens when the launcher closes the pipe or the
// ssh connection drops (fd 3: an asynchronous list's own stdin is
// /dev/null). Then the group (the watcher) is cleaned up and the
// node's exit status becomes ssh's.
constexpr std::string_view remote_wrapper =
    "exec 3<&0; \"$@\" </dev/null 3<&- & p=$!; "
    "{ cat <&3 >/dev/null; kill -TERM $p; } >/dev/null 2>&1 & exec 3<&-; "
    "trap '' TERM; wait $p; r=$?; kill -TERM 0 2>/dev/null; exit $r";

}  // namespace

std::vector<std::string> node_argv(const command_options& options, const deploy::node_config& node,
                                   bool front) {
  std::vector<std::string> argv{options.node_binary.string(), "--config",
                                options.config_file.string(), "--node", node.name};
  if (!options.model.empty()) {
    argv.emplace_back("--model");
    argv.push_back(options.model.string());
  }
  if (front && options.port) {
    argv.emplace_back("--port");
    argv.push_back(std::to_string(*options.port));
  }
  return argv;
}

std::vector<std::string> ssh_argv(const std::string& destination,
                                  const std::vector<std::string>& remote) {
  std::vector<std::string> words{"sh", "-c", std::string{remote_wrapper}, "mstar-node"};
  words.insert(words.end(), remote.begin(), remote.end());
  return {"ssh", "-o", "BatchMode=yes", destination, "--", shell_join(words)};
}

std::vector<node_spec> plan_nodes(const deploy::deployment_config& config,
                                  const command_options& options,
                                  const std::optional<job_rank>& rank) {
  std::vector<node_spec> nodes;
  for (std::size_t i = 0; i < config.nodes.size(); ++i) {
    if (rank && rank->rank != i)
      continue;
    const auto& node = config.nodes[i];
    node_spec spec{node.name, node.role, node.name == config.front, {}, false};
    spec.argv = node_argv(options, node, spec.front);
    if (!rank && !node.ssh.empty()) {  // a job rank already runs on its node's host
      spec.argv = ssh_argv(node.ssh, spec.argv);
      spec.over_ssh = true;
    }
    nodes.push_back(std::move(spec));
  }
  return nodes;
}

std::string shell_quote(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view{"@%+=:,./_-"}.find(c) != std::string_view::npos;
  });
  if (plain)
    return std::string{word};
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) {
    if (!line.empty())
      line += ' ';
    line += shell_quote(word);
  }
  return line;
}

}  // namespace mstar::launch
