#pragma once

// Shared by the tests that need a second process (the two-process GPU tests
// gpu_cuda_ipc_test.cpp and gpu_pd_cuda_ipc_test.cpp, tensor-parallel ranks
// as processes): this test binary run again as a child process, so the
// child starts afresh (a forked child of a process that has used CUDA, or
// started threads, may not go on as it was), with two pipes between the
// pair and a deadline on every read and wait.

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <optional>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace mstar::test {

/// Writes all of `bytes` to `fd`; false when the reader has gone. Each test
/// frames its own messages on top (length-prefixed, or a line each).
[[nodiscard]] inline bool write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

/// Reads exactly `bytes` from `fd` into `p`; false at `until`, or when the
/// writer closed or died first.
[[nodiscard]] inline bool read_exact(int fd, char* p, std::size_t bytes,
                                     std::chrono::steady_clock::time_point until) {
  while (bytes > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return false;
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;  // the writer closed or died
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

/// What a child finds in `env_name` (set by self_child below): its ends of
/// the two pipes and its role's payload; nullopt when the variable is unset
/// (the test runs as itself, not as a child) or not in that form.
struct child_side {
  int read_fd = -1;
  int write_fd = -1;
  std::string payload;
};

[[nodiscard]] inline std::optional<child_side> child_side_of(const char* env_name) {
  const char* env = std::getenv(env_name);
  if (env == nullptr)
    return std::nullopt;
  const std::string text{env};
  const auto c1 = text.find(',');
  const auto c2 = c1 == std::string::npos ? c1 : text.find(',', c1 + 1);
  if (c2 == std::string::npos)
    return std::nullopt;
  return child_side{std::atoi(text.substr(0, c1).c_str()),
                    std::atoi(text.substr(c1 + 1, c2 - c1 - 1).c_str()), text.substr(c2 + 1)};
}

/// `text` split at every `sep`.
[[nodiscard]] inline std::vector<std::string> split_role(const std::string& text, char sep = '|') {
  std::vector<std::string> parts;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(sep, from)) != std::string::npos; from = at + 1)
    parts.push_back(text.substr(from, at - from));
  parts.push_back(text.substr(from));
  return parts;
}

/// A line from the child (up to '\n', without it), or what came before a
/// deadline `timeout` away or the child's end.
[[nodiscard]] inline std::string read_line(int fd, std::chrono::milliseconds timeout) {
  std::string line;
  const auto until = std::chrono::steady_clock::now() + timeout;
  char ch = 0;
  while (read_exact(fd, &ch, 1, until) && ch != '\n')
    line.push_back(ch);
  return line;
}

/// This test binary run again (`/proc/self/exe`) as a child process that runs
/// one disabled test, `test_name` ("DISABLED_suite.name"). The child finds
/// `env_name` set to "<read fd>,<write fd>,<payload>": its ends of the two
/// pipes, then its role. A failed pipe or fork is added as a test failure and
/// leaves `pid()` not positive. The destructor kills a child not yet reaped.
/// Not copyable: it owns the child and the parent's two pipe ends.
class self_child {
 public:
  self_child(const char* env_name, const std::string& payload, const std::string& test_name) {
    int to_child[2] = {-1, -1};
    int from_child[2] = {-1, -1};
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return;
    }
    // Everything exec needs is built before fork: the child only calls
    // async-signal-safe functions until exec.
    std::vector<std::string> env_text{std::string{env_name} + "=" + std::to_string(to_child[0]) +
                                      "," + std::to_string(from_child[1]) + "," + payload};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, env_name, std::strlen(env_name)) != 0)
        env_text.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& s : env_text)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::string filter = "--gtest_filter=" + test_name;
    std::string disabled = "--gtest_also_run_disabled_tests";
    char* argv[] = {exe.data(), filter.data(), disabled.data(), nullptr};
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::execve("/proc/self/exe", argv, envp.data());
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    write_fd_ = to_child[1];
    read_fd_ = from_child[0];
    if (pid_ < 0)
      ADD_FAILURE() << "fork: " << std::strerror(errno);
  }
  self_child(const self_child&) = delete;
  self_child& operator=(const self_child&) = delete;
  ~self_child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      (void)exit_code(std::chrono::seconds{10});
    }
    if (write_fd_ >= 0)
      ::close(write_fd_);
    if (read_fd_ >= 0)
      ::close(read_fd_);
  }

  /// The child's process id; not positive when it could not be started, or
  /// once reaped.
  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Our end of the pipe the child reads.
  [[nodiscard]] int write_fd() const { return write_fd_; }
  /// Our end of the pipe the child writes.
  [[nodiscard]] int read_fd() const { return read_fd_; }
  /// Sends SIGKILL now; `exit_code` reaps it.
  void kill_now() const { ::kill(pid_, SIGKILL); }

  /// The child's exit status (or -signal), or nothing by `timeout`; reaps it.
  [[nodiscard]] std::optional<int> exit_code(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      if (r < 0 || std::chrono::steady_clock::now() > until)
        return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  int write_fd_ = -1;
  int read_fd_ = -1;
};

}  // namespace mstar::test
