// mstar-node: one node of a deployment (launcher/deploy/README.md): its
// engine (pools, worker, preprocess stage, conductor) behind a node actor
// published on the node's control port over mutual TLS. The front node also
// runs the router over every node that joined and the HTTP front end.
// mstar-launch starts these; launcher/launch/README.md has the contract
// (the `ready` and `serving` lines on stdout).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "actors/control_plane.hpp"
#include "actors/deployment.hpp"
#include "actors/deployment_certs.hpp"
#include "actors/node_actor.hpp"
#include "actors/rank_processes.hpp"
#include "actors/runtime.hpp"
#include "actors/transfer_actor.hpp"
#include "launcher/common/chat.hpp"
#include "launcher/common/engine_cli.hpp"
#include "launcher/common/guarded_main.hpp"
#include "launcher/common/memory_fit.hpp"
#include "launcher/common/served.hpp"
#include "launcher/deploy/credentials.hpp"
#include "launcher/deploy/deploy_config.hpp"
#include "launcher/node/rank_processes.hpp"
#include "models/load.hpp"
#include "models/tensor_parallel_lm.hpp"
#include "serve/deployment_port.hpp"
#include "serve/http_server.hpp"
#include "transport/shm.hpp"

namespace {

using namespace std::chrono_literals;
namespace deploy = mstar::deploy;

struct options {
  std::string config;
  std::string node;
  std::string model;  ///< overrides the file's
  int port = -1;      ///< overrides the file's HTTP port (front node)
  std::string served_name;
  bool quiet = false;
  int rank = 0;           ///< >= 1: this process is that tensor-parallel rank of the node
  std::string conductor;  ///< the node's conductor stream (with --rank)
};

int fail(const std::string& node, const std::string& message) {
  spdlog::error("{}", message);
  std::printf("mstar-node %s: failed: %s\n", node.c_str(), message.c_str());
  std::fflush(stdout);
  return 1;
}

/// The contract's lines (launcher/launch/README.md), on stdout, whole.
void announce(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

mstar::engine::engine_config engine_of(const deploy::deployment_config& d,
                                       const deploy::node_config& n) {
  mstar::engine::engine_config e;
  if (d.page_size)
    e.pools.page_size = *d.page_size;
  if (n.pools.kv_pages)
    e.pools.max_num_pages = *n.pools.kv_pages;
  if (n.pools.max_slots)
    e.pools.max_slots = *n.pools.max_slots;
  if (n.engine.max_batched_tokens)
    e.scheduler.max_batched_tokens = *n.engine.max_batched_tokens;
  if (n.engine.max_running)
    e.scheduler.max_running = *n.engine.max_running;
  if (auto mode = mstar::engine::parse_schedule_mode(n.engine.schedule); mode)
    e.schedule = *mode;  // checked by the parser; empty keeps the default
  return e;
}

std::chrono::milliseconds seconds_of(double s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
}

bool loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

/// Whether two nodes' hosts are one machine by the file (loopback names
/// are one host; names compare case-insensitively).
bool same_host(const std::string& a, const std::string& b) {
  if (loopback(a) && loopback(b))
    return true;
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

/// Whether the node keeps its pools in named shared-memory segments:
/// `pools.memory`, or by default when another node has the same host (its
/// decode nodes then read published pages with a mapped copy).
bool shared_pools(const deploy::deployment_config& d, const deploy::node_config& self) {
  if (!self.pools.memory.empty())
    return self.pools.memory == "shared";
  return std::any_of(d.nodes.begin(), d.nodes.end(), [&](const auto& n) {
    return n.name != self.name && same_host(n.host, self.host);
  });
}

/// The node's transfer agent over the runtime's pools, and its arenas'
/// descriptors. UCX settings from the environment (UCX_TLS, UCX_NET_DEVICES)
/// win; otherwise TCP and shared memory, on loopback when every node is.
caf::expected<std::pair<mstar::actors::transfer_actor, std::vector<std::string>>> start_transfer(
    caf::actor_system& sys, const mstar::actors::runtime& rt, const deploy::deployment_config& d,
    const deploy::node_config& self) {
  auto [regions, keep] = rt.pool_memory();
  mstar::actors::transfer_setup setup;
  setup.agent.name = self.name;
  setup.agent.deployment = d.name;
  if (std::getenv("UCX_TLS") == nullptr)
    setup.agent.ucx.config.emplace_back("TLS", "tcp,sm,self");
  const bool all_local =
      std::all_of(d.nodes.begin(), d.nodes.end(), [](const auto& n) { return loopback(n.host); });
  if (std::getenv("UCX_NET_DEVICES") == nullptr && all_local)
    setup.agent.ucx.config.emplace_back("NET_DEVICES", "lo");
  setup.regions = regions;
  setup.keep_alive = keep;
  auto t = mstar::actors::spawn_transfer_actor(sys, std::move(setup));
  if (!t)
    return t.error();
  std::vector<std::string> arenas;
  caf::error failed;
  caf::scoped_actor asker{sys};
  asker->request(*t, std::chrono::seconds(10), mstar::actors::describe_atom_v)
      .receive([&](std::vector<std::string>& a) { arenas = std::move(a); },
               [&](caf::error& e) { failed = std::move(e); });
  if (failed)
    return failed;
  return std::make_pair(*t, std::move(arenas));
}

/// Set by SIGINT / SIGTERM while the front node starts (before the HTTP
/// server takes the signals over): start-up stops at the next checkpoint
/// and main returns, so everything is cleaned up (the derived credential's
/// folder too).
volatile std::sig_atomic_t stop_requested = 0;
extern "C" void request_stop(int /*signal*/) {
  stop_requested = 1;
}

/// Sends an exit to each actor when it goes out of scope.
struct stop_on_exit {
  std::vector<caf::actor> actors;
  ~stop_on_exit() {
    for (const auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

/// Waits for SIGINT or SIGTERM (blocked in every thread by main).
void wait_for_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

/// Joins every other node, retrying until `deadline`; the name of the first
/// node that did not join, or empty.
std::string join_all(caf::actor_system& sys, mstar::actors::deployment& dep,
                     const deploy::deployment_config& d, const std::string& self_name,
                     std::chrono::steady_clock::time_point deadline) {
  for (const auto& n : d.nodes) {
    if (n.name == self_name)
      continue;
    std::string last;
    for (;;) {
      auto peer = mstar::actors::connect_node(sys, n.host, n.control_port, 2s);
      if (peer) {
        auto joined = dep.join(caf::actor_cast<mstar::actors::node_actor>(*peer), 10s);
        if (joined) {
          spdlog::info("node {} joined ({} on {}:{})", n.name, joined->role, n.host,
                       n.control_port);
          break;
        }
        last = joined.error().message();
      } else {
        last = sys.render(peer.error());
      }
      if (std::chrono::steady_clock::now() >= deadline || stop_requested != 0)
        return fmt::format("{} ({}:{}: {})", n.name, n.host, n.control_port, last);
      std::this_thread::sleep_for(250ms);
    }
  }
  return {};
}

/// Reconnects nodes that left (a restarted process) every second until stopped.
class rejoiner {
 public:
  rejoiner(caf::actor_system& sys, mstar::actors::deployment& dep,
           const deploy::deployment_config& d, std::string self_name)
      : thread_([this, &sys, &dep, &d, self = std::move(self_name)] {
          while (!stop_.load()) {
            {
              std::unique_lock lock{m_};
              if (cv_.wait_for(lock, 1s, [this] { return stop_.load(); }))
                return;
            }
            auto s = dep.stats();
            if (!s)
              continue;
            for (const auto& n : s->nodes) {
              if (n.alive || n.name == self)
                continue;
              const auto* cfg = d.find_node(n.name);
              if (cfg == nullptr)
                continue;
              auto peer = mstar::actors::connect_node(sys, cfg->host, cfg->control_port, 1s);
              if (!peer)
                continue;
              if (auto ok = dep.join(caf::actor_cast<mstar::actors::node_actor>(*peer), 5s); ok)
                spdlog::info("node {} joined again", n.name);
            }
          }
        }) {}
  ~rejoiner() {
    stop_ = true;
    cv_.notify_all();
    thread_.join();
  }
  rejoiner(const rejoiner&) = delete;
  rejoiner& operator=(const rejoiner&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
};

/// Set when a follower rank process exited while the node served: the node
/// then exits 1 (mstar-launch restarts it).
std::atomic<int> rank_lost{0};

/// The folder of a node's rank sockets, removed with the node.
struct rank_dir {
  std::filesystem::path path;
  rank_dir() = default;
  explicit rank_dir(std::filesystem::path p) : path(std::move(p)) {}
  rank_dir(const rank_dir&) = delete;
  rank_dir& operator=(const rank_dir&) = delete;
  ~rank_dir() {
    std::error_code ec;
    if (!path.empty())
      std::filesystem::remove_all(path, ec);
  }
};

/// Rank 0 of `tensor_parallel_mode: processes`: listens on a Unix socket in
/// a fresh folder, starts ranks 1..N-1 from this binary, forms the ranks'
/// data group and loads rank 0 while they load theirs; the conductor's model.
mstar::result<std::unique_ptr<mstar::models::causal_lm>> start_rank_processes(
    const std::vector<std::string>& self_argv, const deploy::node_config& self,
    const mstar::models::run_options& run, const std::string& model_dir,
    std::chrono::milliseconds timeout, std::unique_ptr<mstar::launcher::rank_followers>& followers,
    std::optional<rank_dir>& dir) {
  auto token = mstar::launcher::random_token();
  if (!token)
    return token.error();
  std::string tmpl = (std::filesystem::temp_directory_path() / "mstar-ranks-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return mstar::make_error(mstar::errc::io_error, tmpl + ": " + std::strerror(errno));
  dir.emplace(tmpl);
  const int ranks = self.tensor_parallel;
  auto conductor = mstar::actors::rank_conductor::listen(
      {"unix:" + (dir->path / "conductor.sock").string(), ranks, *token, timeout});
  if (!conductor)
    return conductor.error();
  auto started =
      mstar::launcher::rank_followers::start(self_argv, ranks, conductor->address(), *token);
  if (!started)
    return started.error();
  followers = std::move(*started);
  for (std::size_t i = 0; i < followers->pids().size(); ++i)
    spdlog::info("started tensor-parallel rank {} (pid {})", i + 1, followers->pids()[i]);
  mstar::models::run_options mine = run;
  mine.device = mstar::models::rank_devices(run.device, ranks).front();
  mine.tensor_parallel_ranks = 1;
  mine.tensor_parallel_groups = nullptr;
  return conductor->accept_all(
      mine, mstar::launcher::node_rank_groups(run.device, dir->path, *token, timeout),
      [&model_dir](const mstar::models::run_options& r) {
        return mstar::models::load_causal_lm(model_dir, r);
      });
}

/// A follower rank process (`--rank R`): loads its part of the model and
/// does what the node's conductor says until it says stop. The launcher's
/// SIGINT / SIGTERM reach the node's whole process group: a follower leaves
/// when its conductor tells it (or dies with it), not on its own.
int serve_rank(const options& opt, const deploy::deployment_config& d,
               const deploy::node_config& self, const std::string& model_dir) {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  const std::string name = fmt::format("{} rank {}", opt.node, opt.rank);
  if (self.tensor_parallel <= opt.rank || self.tensor_parallel_mode != "processes") {
    return fail(
        name, fmt::format("node {} has no rank {} process (tensor_parallel {}, mode {})", self.name,
                          opt.rank, self.tensor_parallel, self.tensor_parallel_mode));
  }
  const char* token = std::getenv(mstar::launcher::rank_token_env);
  if (token == nullptr)
    return fail(name, fmt::format("{} is not set", mstar::launcher::rank_token_env));
  const std::string device = self.device.empty() ? d.device : self.device;
  mstar::models::run_options run;
  run.device = mstar::models::rank_devices(device, self.tensor_parallel)
                   .at(static_cast<std::size_t>(opt.rank));
  const auto timeout = seconds_of(d.timeouts.join_s);
  spdlog::info("rank {} of {} on {}, conductor {}", opt.rank, self.tensor_parallel, run.device,
               opt.conductor);
  auto served = mstar::actors::serve_as_follower(
      {opt.conductor, opt.rank, self.tensor_parallel, token, timeout}, run,
      mstar::launcher::node_rank_groups(device, {}, token, timeout),
      [&model_dir](const mstar::models::run_options& r) {
        return mstar::models::load_causal_lm(model_dir, r);
      });
  if (!served)
    return fail(name, served.error().message());
  spdlog::info("the conductor is done: leaving");
  return 0;
}

int run(int argc, char** argv) {
  const std::vector<std::string> self_argv(argv, argv + argc);
  CLI::App app{
      "mstar-node: one node of a prefill/decode deployment described by a YAML file "
      "(launcher/deploy/README.md). mstar-launch starts every node; run this by hand to start "
      "one. The front node also serves HTTP (/v1/completions, /v1/chat/completions, /metrics)."};
  options opt;
  app.add_option("--config", opt.config, "The deployment file")->required();
  app.add_option("--node", opt.node, "Which of its nodes this process is")->required();
  app.add_option("--model", opt.model, "Model folder (overrides the file's)");
  app.add_option("--port", opt.port, "HTTP port of the front node (overrides the file's)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--served-model-name", opt.served_name,
                 "The model name clients send (default: the folder's name)");
  app.add_flag("--no-request-log", opt.quiet, "No log line per request");
  app.add_option("--rank", opt.rank,
                 "Run as this tensor-parallel rank (1..N-1) of the node, serving its conductor "
                 "(the node starts these itself for tensor_parallel_mode: processes; the token "
                 "comes in MSTAR_RANK_TOKEN)")
      ->check(CLI::Range(1, 63));
  app.add_option("--conductor", opt.conductor,
                 "With --rank: the node's conductor stream address (unix:PATH or tcp:HOST:PORT)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (opt.rank > 0 && opt.conductor.empty()) {
    std::fprintf(stderr, "mstar-node: --rank needs --conductor\n");
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("mstar-node"));
  spdlog::set_pattern(fmt::format("%Y-%m-%d %H:%M:%S.%e %^%l%$ [{}{}] %v", opt.node,
                                  opt.rank > 0 ? fmt::format(" rank {}", opt.rank) : ""));

  auto config = deploy::load_deployment(opt.config);
  if (!config) {
    spdlog::error("{}", config.error().message());
    return 2;
  }
  auto& d = *config;
  const auto* self = d.find_node(opt.node);
  if (self == nullptr) {
    std::string names;
    for (const auto& n : d.nodes)
      names += (names.empty() ? "" : ", ") + n.name;
    spdlog::error("{}: no node named '{}' (nodes: {})", opt.config, opt.node, names);
    return 2;
  }
  if (!opt.model.empty())
    d.model = opt.model;
  if (opt.port >= 0)
    d.http.port = static_cast<std::uint16_t>(opt.port);
  const bool front = d.front == self->name;
  const std::string model_dir = d.model.empty() ? MSTAR_EMBEDDED_MODEL_DIR : d.model.string();
  if (opt.rank > 0)
    return serve_rank(opt, d, *self, model_dir);

  // Signals are taken by sigwait (or the HTTP server) only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (front) {
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
  } else {
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // pending until sigwait
  }

  // The control plane is mutual TLS (actors/README.md says why): the node's
  // certificate from the deployment's folder (tls mode, mstar-launch makes
  // it), or derived from the shared secret (secret mode; `derived` owns the
  // temporary folder CAF reads the files from, until the node exits).
  std::optional<mstar::actors::derived_credentials> derived;
  mstar::actors::node_credentials creds;
  if (d.auth.mode == deploy::auth_mode::tls) {
    auto loaded_creds = mstar::actors::load_node_credentials(d.auth.tls_dir, self->name);
    if (!loaded_creds) {
      return fail(opt.node, fmt::format("{}: auth.dir {}: {}", opt.config, d.auth.tls_dir.string(),
                                        caf::to_string(loaded_creds.error())));
    }
    creds = *loaded_creds;
  } else {
    auto secret = deploy::read_secret(d.auth);
    if (!secret)
      return fail(opt.node, fmt::format("{}: {}", opt.config, secret.error().message()));
    auto made_creds =
        mstar::actors::derive_node_credentials(*secret, d.name, {self->name, {self->host}});
    if (!made_creds) {
      return fail(opt.node, "deriving the node's certificate from the secret: " +
                                caf::to_string(made_creds.error()));
    }
    derived.emplace(std::move(*made_creds));
    creds = derived->credentials();
  }
  caf::actor_system_config cfg;
  mstar::actors::runtime::add_message_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (auto err = mstar::actors::configure_node(cfg, creds))
    return fail(opt.node, "the control plane: " + caf::to_string(err));
  caf::actor_system sys{cfg};

  mstar::models::run_options run;
  run.device = self->device.empty() ? d.device : self->device;
  run.tensor_parallel_ranks = self->tensor_parallel;
  run.tensor_parallel_groups = mstar::launcher::tensor_parallel_group_maker();
  spdlog::info("loading {} on {}{}", model_dir, run.device,
               self->tensor_parallel > 1
                   ? fmt::format(" at tensor parallel {}", self->tensor_parallel)
                   : std::string{});
  // With tensor_parallel_mode: processes, this process is rank 0 and the
  // conductor; the other ranks are processes it starts and watches (a rank
  // that exits stops the node, which mstar-launch then restarts whole).
  std::unique_ptr<mstar::launcher::rank_followers> followers;
  std::optional<rank_dir> ranks_dir;
  auto loaded = [&]() -> mstar::result<std::unique_ptr<mstar::models::causal_lm>> {
    if (self->tensor_parallel <= 1 || self->tensor_parallel_mode != "processes")
      return mstar::models::load_causal_lm(model_dir, run);
    return start_rank_processes(self_argv, *self, run, model_dir, seconds_of(d.timeouts.join_s),
                                followers, ranks_dir);
  }();
  if (!loaded)
    return fail(opt.node, loaded.error().message());
  if (followers) {
    followers->watch([](int rank, int status) {
      spdlog::error("tensor-parallel rank {} exited ({}): the node stops", rank,
                    WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                        : fmt::format("status {}", WEXITSTATUS(status)));
      rank_lost = 1;
      ::kill(::getpid(), SIGTERM);
    });
  }
  auto chat = mstar::launcher::load_chat(model_dir, (*loaded)->tok());
  auto engine = engine_of(d, *self);
  mstar::launcher::memory_fit fit;
  fit.fraction = self->pools.gpu_memory_fraction.value_or(fit.fraction);
  fit.fraction_given = self->pools.gpu_memory_fraction.has_value();
  fit.pages_given = self->pools.kv_pages.has_value();
  fit.slots_given = self->pools.max_slots.has_value();
  if (self->tensor_parallel > 1) {  // every rank holds its own pools
    const auto devices = mstar::models::rank_devices(run.device, self->tensor_parallel);
    if (devices.front() == devices.back())
      fit.fraction /= self->tensor_parallel;
  }
  auto fitted = mstar::launcher::fit_pools_to_device(model_dir, **loaded, run.device, fit, engine);
  if (!fitted)
    return fail(opt.node, fitted.error().message());
  if (!fitted->empty())
    spdlog::info("{}", *fitted);
  if (shared_pools(d, *self)) {
    auto prefix = mstar::transport::segment_name(d.name, ::getpid(), "pool");
    if (!prefix)
      return fail(opt.node, sys.render(prefix.error()));
    engine.host_memory = mstar::kernels::shared_memory_arena_factory(*prefix);
    spdlog::info("pools in shared-memory segments {}-N (same-host nodes map them)", *prefix);
  }
  auto made = mstar::actors::runtime::start_in(sys, std::move(*loaded), engine);
  if (!made)
    return fail(opt.node, made.error().message());
  auto& rt = **made;
  if (auto warmed = rt.warm_up(); !warmed)
    return fail(opt.node, warmed.error().message());
  auto parts = mstar::actors::node_parts_of(rt, self->name, std::string{to_string(self->role)});
  parts.lease = seconds_of(d.lease_s);
  parts.transfer_timeout = seconds_of(d.timeouts.transfer_s);
  // The transfer agent: the pools' arenas registered with UCX, read by
  // (prefill) or reading from (decode) the other nodes. Pools in device
  // memory are registered as device arenas: a decode node on the same host
  // opens them over CUDA IPC and copies device to device (checksums read
  // through pinned memory). Where that cannot be (a build without CUDA, no
  // IPC export; tensor-parallel pools, whose ranks each hold their part),
  // the node neither publishes nor adopts: its decode peers recompute the
  // prompt, and the handoff still works.
  std::optional<mstar::actors::transfer_actor> transfer;
  if (run.device != "cpu" && self->tensor_parallel > 1) {
    spdlog::warn(
        "pools on {} at tensor parallel {}: KV pages and recurrent slots do not move between "
        "nodes (each rank holds its part); decode nodes recompute prompts",
        run.device, self->tensor_parallel);
  } else if (auto started = start_transfer(sys, rt, d, *self); started) {
    transfer = started->first;
    parts.transfer = started->first;
    parts.arenas = started->second;
  } else if (run.device == "cpu") {
    return fail(opt.node, "the transfer agent: " + sys.render(started.error()));
  } else {
    spdlog::warn(
        "pools on {}: no transfer agent ({}); KV pages and recurrent slots do not move "
        "between nodes, decode nodes recompute prompts",
        run.device, sys.render(started.error()));
  }
  auto node = mstar::actors::spawn_node_actor(sys, std::move(parts));
  // However main returns, these stop before the runtime and the actor
  // system (which waits for every actor).
  stop_on_exit stops{{caf::actor_cast<caf::actor>(node)}};
  if (transfer)
    stops.actors.push_back(caf::actor_cast<caf::actor>(*transfer));
  auto bound = mstar::actors::publish_node(sys, caf::actor_cast<caf::actor>(node), self->host,
                                           self->control_port);
  if (!bound) {
    return fail(opt.node, fmt::format("cannot listen on {}:{}: {}", self->host, self->control_port,
                                      sys.render(bound.error())));
  }
  announce(fmt::format("mstar-node {}: ready control={}:{}", self->name, self->host, *bound));

  if (!front) {
    wait_for_signal();
    spdlog::info("stopping");
    rt.stop();
    return rank_lost != 0 ? 1 : 0;
  }

  // The front node: the router over every node, then HTTP.
  if (stop_requested != 0) {
    spdlog::info("stopped while starting");
    rt.stop();
    return 0;
  }
  mstar::actors::router_options ro;
  ro.prefill_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(d.timeouts.request_s * 1000));
  // A request finding no node that can take it (one is restarting) waits
  // as long as a node gets to join.
  ro.wait_for_node = std::chrono::milliseconds(static_cast<std::int64_t>(d.timeouts.join_s * 1000));
  auto dep = mstar::actors::deployment::start_in(sys, ro);
  if (auto joined = dep->join(node, 10s); !joined)
    return fail(opt.node, joined.error().message());
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<std::int64_t>(d.timeouts.join_s * 1000));
  if (auto missing = join_all(sys, *dep, d, self->name, deadline); !missing.empty()) {
    // CAF 0.17 has no handshake deadline: a connection to a peer that never
    // answers stays open and the actor system's shutdown would wait for it.
    // Nothing ran yet, so clean up what matters and leave without it.
    rt.stop();
    derived.reset();  // the credential's temporary folder
    int rc = 0;
    if (stop_requested != 0)
      spdlog::info("stopped while waiting for the nodes to join");
    else
      rc = fail(opt.node,
                fmt::format("node {} did not join within {} s", missing, d.timeouts.join_s));
    spdlog::default_logger()->flush();
    std::fflush(stdout);
    std::_Exit(rc);
  }
  rejoiner again{sys, *dep, d, self->name};

  auto stats = rt.stats();
  if (!stats)
    return fail(opt.node, stats.error().message());
  auto served = mstar::launcher::served_model_of(rt.model(), model_dir, opt.served_name, 0,
                                                 stats->kv_pages * engine.pools.page_size,
                                                 static_cast<bool>(chat.render));
  const auto images = mstar::launcher::load_images(model_dir, rt.model());
  served.images = images.support;
  spdlog::info("images: {}", images.describe);
  mstar::serve::service_options so;
  if (!d.http.api_key_file.empty()) {
    auto key = mstar::deploy::read_private_file(d.http.api_key_file, "http.api_key_file");
    if (!key)
      return fail(opt.node, key.error().message());
    so.api_key = *key;
  }
  mstar::serve::deployment_port port{*dep};
  auto svc = std::make_shared<mstar::serve::service>(&port, served, chat.render, so);
  mstar::serve::server_options http;
  http.host = d.http.host;
  http.port = d.http.port;
  http.log_requests = !opt.quiet;
  auto server = mstar::serve::http_server::start(svc, http);
  if (!server)
    return fail(opt.node, server.error().message());
  announce(fmt::format("mstar-node {}: serving http://{}:{}", self->name, d.http.host,
                       (*server)->port()));
  if (stop_requested == 0)
    (*server)->run_until_signal();  // from here the server takes SIGINT / SIGTERM
  else
    (*server)->stop();
  spdlog::info("stopping");
  rt.stop();
  return rank_lost != 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mstar::launcher::guarded_main("mstar-node", [&] { return run(argc, argv); });
}
