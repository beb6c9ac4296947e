#pragma once

// A node's tensor-parallel ranks as processes (`tensor_parallel_mode:
// processes`): the node's process is rank 0 and the conductor
// (actors/rank_processes.hpp); it starts every other rank from its own
// binary and command line plus `--rank R --conductor ADDR`, the stream's
// token in the environment (MSTAR_RANK_TOKEN, never on a command line), and
// watches them. A rank process that exits while the node serves stops the
// node (its requests have failed naming the rank), so mstar-launch restarts
// the whole node as it would after any death. The followers share the
// node's process group (mstar-launch's signals reach them; they wait for
// the conductor's word instead) and get SIGKILL when the node dies.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

#include "actors/rank_processes.hpp"
#include "core/result.hpp"

namespace mstar::launcher {

/// Where the followers read the stream's token.
inline constexpr const char* rank_token_env = "MSTAR_RANK_TOKEN";

/// The ranks' data group: NCCL when `device` is a GPU and the build has NCCL
/// (each rank on its device: rank_devices), else a socket group on a Unix
/// socket in `dir` (host memory; the ranks' collectives staged through it).
[[nodiscard]] actors::rank_group_factory node_rank_groups(const std::string& device,
                                                          const std::filesystem::path& dir,
                                                          const std::string& token,
                                                          std::chrono::milliseconds timeout);

/// 32 random hex digits from /dev/urandom, or io_error.
[[nodiscard]] result<std::string> random_token();

/// The follower processes of one node. Destroying it (after the conductor's
/// model told them to leave) waits up to `grace` for each to exit, then
/// kills what remains; every one is reaped.
class rank_followers {
 public:
  /// Starts ranks 1..ranks-1: `/proc/self/exe` with `argv` (the node's own
  /// arguments, argv[0] first) and `--rank R --conductor ADDR`. io_error
  /// naming the rank when fork fails (those already started are killed).
  [[nodiscard]] static result<std::unique_ptr<rank_followers>> start(
      const std::vector<std::string>& argv, int ranks, const std::string& conductor,
      const std::string& token);
  ~rank_followers();
  rank_followers(const rank_followers&) = delete;
  rank_followers& operator=(const rank_followers&) = delete;

  /// Each follower's pid, rank 1 first.
  [[nodiscard]] const std::vector<pid_t>& pids() const noexcept { return pids_; }
  /// From now on, a follower that exits calls `on_exit(rank, status)` (from
  /// a watcher thread; status as from waitpid) unless this is being destroyed.
  void watch(std::function<void(int rank, int status)> on_exit);

 private:
  rank_followers() = default;
  std::vector<pid_t> pids_;  ///< -1 once reaped
  std::thread watcher_;
  std::atomic<bool> stopping_{false};
};

}  // namespace mstar::launcher
