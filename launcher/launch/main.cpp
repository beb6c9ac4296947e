// mstar-launch: starts every node of a deployment file, supervises them and
// stops them all. README.md in this folder is the contract with mstar-node.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "launcher/common/guarded_main.hpp"
#include "launcher/deploy/deploy_config.hpp"
#include "launcher/launch/credentials_setup.hpp"
#include "launcher/launch/job_rank.hpp"
#include "launcher/launch/node_commands.hpp"
#include "launcher/launch/supervisor.hpp"

namespace {

namespace fs = std::filesystem;
using namespace mstar;

struct options {
  std::string config;
  std::string model;
  std::uint16_t port = 0;
  bool dry_run = false;
  std::string node_binary;
  double grace_s = 10;
  std::string rank_env = "auto";
};

int fail(const std::string& message) {
  spdlog::error("{}", message);
  return 2;
}

void add_options(CLI::App& app, options& opt) {
  app.add_option("DEPLOY.yaml", opt.config, "The deployment file (launcher/deploy/README.md)")
      ->required();
  app.add_option("--model", opt.model, "Model folder for every node, instead of the file's");
  app.add_option("--port", opt.port, "HTTP port of the front node, instead of the file's")
      ->check(CLI::Range(1, 65535));
  app.add_flag("--dry-run", opt.dry_run, "Print the command of each node and start nothing");
  app.add_option("--node-binary", opt.node_binary,
                 "The mstar-node to run (default: mstar-node next to mstar-launch; the same "
                 "path on ssh hosts)");
  app.add_option("--grace", opt.grace_s, "Seconds nodes get to stop after SIGTERM before SIGKILL")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--rank-env", opt.rank_env,
                 "Where a job rank comes from: auto (SLURM_PROCID, else NODE_RANK), none (start "
                 "every node from here), slurm, torchrun; rank i runs nodes[i] only")
      ->check(CLI::IsMember({"auto", "none", "slurm", "torchrun"}))
      ->capture_default_str();
}

fs::path default_node_binary() {
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  return (ec ? fs::current_path() : self.parent_path()) / "mstar-node";
}

launch::supervisor_options supervision_of(const deploy::deployment_config& config, double grace_s) {
  using std::chrono::milliseconds;
  const auto ms = [](double s) { return milliseconds{static_cast<std::int64_t>(s * 1000)}; };
  launch::supervisor_options so;
  so.join_timeout = ms(config.timeouts.join_s);
  so.max_retries = config.restart.max_retries;
  so.backoff = ms(config.restart.backoff_s);
  so.max_backoff = std::max(so.backoff, milliseconds{60'000});
  so.grace = ms(grace_s);
  return so;
}

// Where clients go, once every node this process runs has joined.
void announce(const deploy::deployment_config& config, const options& opt, std::size_t nodes,
              const std::string& url) {
  const auto& front = config.front_node();
  const std::string where =
      !url.empty() ? url
                   : fmt::format("http://{}:{}", front.host.empty() ? config.http.host : front.host,
                                 opt.port != 0 ? opt.port : config.http.port);
  const std::string line =
      url.empty()
          ? fmt::format("mstar-launch: {} node(s) of {} ready; the front node {} serves {}\n",
                        nodes, config.name, front.name, where)
          : fmt::format("mstar-launch: {} serving {} ({} node(s); Ctrl-C stops)\n", config.name,
                        where, nodes);
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  CLI::App app{
      "mstar-launch: starts every mstar-node of a deployment file (here, over ssh, or as one "
      "rank of a Slurm or torchrun-style job), prefixes their output with their names, waits for "
      "them to join, restarts nodes that die, and stops them all on Ctrl-C or SIGTERM.\n"
      "Exit status: 0 after a requested stop, 1 when the start or the deployment failed, 2 for "
      "bad flags or a bad deployment file."};
  options opt;
  add_options(app, opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("mstar-launch"));
  spdlog::set_pattern("[mstar-launch] %^%l%$ %v");

  auto loaded = deploy::load_deployment(opt.config);
  if (!loaded)
    return fail(loaded.error().message());
  const auto& config = *loaded;
  auto rank = launch::detect_rank(*launch::parse_rank_source(opt.rank_env), config.nodes.size(),
                                  launch::process_env());
  if (!rank)
    return fail(rank.error().message());

  launch::command_options co;
  co.config_file = fs::absolute(opt.config).lexically_normal();
  co.node_binary = opt.node_binary.empty() ? default_node_binary()
                                           : fs::absolute(opt.node_binary).lexically_normal();
  if (!opt.model.empty())
    co.model = fs::absolute(opt.model).lexically_normal();
  if (opt.port != 0)
    co.port = opt.port;
  auto nodes = launch::plan_nodes(config, co, *rank);
  if (*rank)
    spdlog::info("{} rank {}: running node {} {}", (*rank)->scheduler, (*rank)->rank,
                 nodes.front().name, (*rank)->detail);

  if (auto prepared = launch::prepare_credentials(config, opt.dry_run); !prepared)
    return fail(prepared.error().message());
  if (opt.dry_run) {
    for (const auto& node : nodes)
      std::fputs(fmt::format("{}: {}\n", node.name, launch::shell_join(node.argv)).c_str(), stdout);
    return 0;
  }
  const bool any_local =
      std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return !n.over_ssh; });
  if (any_local && ::access(co.node_binary.c_str(), X_OK) != 0)
    return fail(fmt::format("no executable mstar-node at {} (build it, or pass --node-binary)",
                            co.node_binary.string()));

  auto so = supervision_of(config, opt.grace_s);
  const std::size_t count = nodes.size();
  so.on_joined = [&](const std::string& url) { announce(config, opt, count, url); };
  auto made = launch::supervisor::make(std::move(nodes), std::move(so));
  if (!made)
    return fail(made.error().message());
  spdlog::info("starting {} node(s) of {}; join timeout {} s", count, config.name,
               config.timeouts.join_s);
  const auto ended = (*made)->run();
  if (ended == launch::outcome::stopped) {
    spdlog::info("stopped");
    return 0;
  }
  spdlog::error("exit status 1: {}", ended == launch::outcome::start_failed
                                         ? "the start failed"
                                         : "the deployment lost what it needs to serve");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  return mstar::launcher::guarded_main("mstar-launch", [&] { return run(argc, argv); });
}
