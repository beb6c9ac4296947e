#pragma once

// Starting one node process: pipes for its output, its own process group, and
// a parent-death signal so it cannot outlive the launcher.

#include <string>
#include <sys/types.h>
#include <vector>

#include "core/result.hpp"

namespace mstar::launch::internal {

/// Owns one file descriptor; closes it when destroyed. Move-only.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int fd_ = -1;
};

/// A started child: its pid (also its process group id) and the launcher's
/// ends of its pipes, all non-blocking and close-on-exec.
struct child_process {
  pid_t pid = -1;
  unique_fd out;  ///< the child's stdout
  unique_fd err;  ///< the child's stderr
  unique_fd in;   ///< the child's stdin when asked for (closing it tells an ssh node to stop)
};

/// Forks and executes `argv` (searched on PATH when it has no slash) in a new
/// process group, with default signal handling and an empty signal mask, and
/// SIGTERM as its parent-death signal. Its stdin is /dev/null unless
/// `stdin_pipe`. Call from a single-threaded process only: the child runs
/// code between fork and exec. A failed exec shows as exit status 127 with a
/// line on the child's stderr.
[[nodiscard]] result<child_process> spawn_child(const std::vector<std::string>& argv,
                                                bool stdin_pipe);

}  // namespace mstar::launch::internal
