#pragma once

// The launcher's process table and event loop: starts the nodes, waits for
// them to join, restarts the ones that die, stops them all. One poll() loop
// over the nodes' output pipes and a signalfd (SIGCHLD, SIGINT, SIGTERM,
// SIGHUP); no threads.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "launcher/launch/internal/child.hpp"
#include "launcher/launch/internal/line_splitter.hpp"
#include "launcher/launch/node_commands.hpp"

namespace mstar::launch {

using clock = std::chrono::steady_clock;

/// Deadlines and the restart policy.
struct supervisor_options {
  std::chrono::milliseconds join_timeout{60'000};  ///< every node ready (and front serving)
  std::int32_t max_retries = 3;                    ///< restarts per node
  std::chrono::milliseconds backoff{1'000};        ///< before the first restart; doubles
  std::chrono::milliseconds max_backoff{60'000};   ///< the doubling stops here
  std::chrono::milliseconds grace{10'000};         ///< SIGTERM to SIGKILL when stopping
  /// Called once when every node joined, with the front's `serving` URL
  /// (empty when this process runs no front node).
  std::function<void(const std::string& url)> on_joined;
};

/// How run() ended. Every node is stopped and reaped in all cases.
enum class outcome : std::uint8_t {
  stopped,        ///< SIGINT, SIGTERM or SIGHUP asked to stop
  start_failed,   ///< a node did not join in time, died while starting, or could not start
  capacity_lost,  ///< nodes out of restarts left no prefill, no decode or no front node
};

/// Supervises the nodes of one launch. Construct with make() before any
/// thread exists: it blocks the signals it reads in the calling thread.
class supervisor {
 public:
  [[nodiscard]] static result<std::unique_ptr<supervisor>> make(std::vector<node_spec> nodes,
                                                                supervisor_options options);
  supervisor(const supervisor&) = delete;
  supervisor& operator=(const supervisor&) = delete;
  /// Stops and reaps whatever still runs.
  ~supervisor();

  /// Starts every node and supervises them until a signal or a failure.
  [[nodiscard]] outcome run();

  /// Why run() failed, naming the node; empty after `stopped`.
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

 private:
  struct node;
  enum class phase : std::uint8_t { starting, serving, stopping };

  supervisor(std::vector<node_spec> nodes, supervisor_options options, internal::unique_fd sigfd);

  bool start_node(node& n);
  void poll_once(clock::time_point until);
  void read_output(node& n, bool from_stdout);
  void drain_output(node& n);
  void on_line(node& n, bool from_stdout, std::string_view line);
  void read_signals();
  void reap();
  void on_exit(node& n, int status);
  void on_deadlines();
  void after_death(node& n, const std::string& what);
  void give_up(node& n, const std::string& what);
  void fail(outcome why, std::string reason);
  [[nodiscard]] bool joined(const node& n) const;
  [[nodiscard]] bool all_joined() const;
  [[nodiscard]] std::optional<clock::time_point> next_deadline() const;
  void signal_all(int sig);
  void stop_all();
  [[nodiscard]] bool any_running() const;

  std::vector<std::unique_ptr<node>> nodes_;
  supervisor_options options_;
  internal::unique_fd sigfd_;
  phase phase_ = phase::starting;
  clock::time_point join_deadline_{};
  outcome outcome_ = outcome::stopped;
  bool done_ = false;
  std::string reason_;
  std::string url_;
};

}  // namespace mstar::launch
