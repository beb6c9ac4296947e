#pragma once

// Process plumbing for the transport benchmark: pipes between a forked peer
// and the parent, a bounded wait for a child, and `ucx_perftest` run as a
// server + client pair on loopback with its bandwidth parsed from the
// "Final:" line. Every wait has a deadline.

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace mstar::bench {

/// A pipe carrying newline-terminated messages (no newlines inside).
class line_pipe {
 public:
  line_pipe() {
    int fds[2] = {-1, -1};
    if (::pipe(fds) == 0) {
      read_fd_ = fds[0];
      write_fd_ = fds[1];
    }
  }
  line_pipe(const line_pipe&) = delete;
  line_pipe& operator=(const line_pipe&) = delete;
  ~line_pipe() {
    for (int fd : {read_fd_, write_fd_}) {
      if (fd >= 0)
        ::close(fd);
    }
  }
  /// Sends `line`; false on a broken pipe.
  bool send(std::string line) const {
    line.push_back('\n');
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(write_fd_, line.data() + done, line.size() - done);
      if (n <= 0 && errno != EINTR)
        return false;
      done += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    return true;
  }
  /// The next line, or nothing after `timeout` or at end of file.
  std::optional<std::string> receive(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd fd{read_fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&fd, 1, static_cast<int>(left.count())) <= 0)
        return std::nullopt;
      std::array<char, 65536> chunk;
      const ssize_t n = ::read(read_fd_, chunk.data(), chunk.size());
      if (n <= 0)
        return std::nullopt;
      buffer_.append(chunk.data(), static_cast<std::size_t>(n));
    }
  }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::string buffer_;
};

/// The exit code of `pid` (128 + signal), or -1 after killing it when it
/// outlives `timeout`.
inline int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  bool killed = false;
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    killed = ::poll(&p, 1, static_cast<int>(timeout.count())) <= 0;
    ::close(fd);
  }
  if (killed)
    ::kill(pid, SIGKILL);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || killed)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// A TCP port that was free a moment ago on loopback.
inline int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(s);
  return port;
}

/// Starts `argv` with `env` added to ours, stdout (and stderr) into
/// `out_fd` when >= 0, else /dev/null. Returns the pid or -1.
inline pid_t start_process(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, int out_fd) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp, args;
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out_fd, STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data()) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

/// Runs `command`'s stdout to completion (deadline `timeout`); its output,
/// or nothing when it failed or timed out.
inline std::optional<std::string> capture(const std::vector<std::string>& argv,
                                          const std::vector<std::string>& env,
                                          std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe(fds) != 0)
    return std::nullopt;
  const pid_t pid = start_process(argv, env, fds[1]);
  ::close(fds[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<char, 4096> chunk;
  while (pid > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      break;
    const ssize_t n = ::read(fds[0], chunk.data(), chunk.size());
    if (n <= 0)
      break;
    out.append(chunk.data(), static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (pid <= 0 || wait_exit(pid, std::chrono::milliseconds{2000}) != 0)
    return std::nullopt;
  return out;
}

/// `ucx_perftest` put bandwidth in bytes/s for messages of `bytes` over
/// `tls` on loopback (`iterations` puts after a short warm-up), or nothing
/// when it could not run. Its MB/s are MiB/s.
inline std::optional<double> perftest_put_bandwidth(const std::string& tls, std::uint64_t bytes,
                                                    std::uint64_t iterations) {
  const std::vector<std::string> env{"UCX_TLS=" + tls, "UCX_NET_DEVICES=lo"};
  const int port = free_port();
  const pid_t server = start_process({"ucx_perftest", "-p", std::to_string(port)}, env, -1);
  if (server <= 0)
    return std::nullopt;
  std::optional<double> bandwidth;
  // The server needs a moment to listen: the client retries until it can.
  for (int attempt = 0; attempt < 50 && !bandwidth; ++attempt) {
    const auto out =
        capture({"ucx_perftest", "127.0.0.1", "-p", std::to_string(port), "-t", "ucp_put_bw", "-s",
                 std::to_string(bytes), "-n", std::to_string(iterations), "-w", "8"},
                env, std::chrono::seconds{120});
    if (!out) {
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
      continue;
    }
    std::istringstream lines{*out};
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("Final:", 0) != 0)
        continue;
      std::istringstream fields{line.substr(6)};
      double iters, p50, avg, overall, bw_avg, bw_overall;
      if (fields >> iters >> p50 >> avg >> overall >> bw_avg >> bw_overall)
        bandwidth = bw_overall * 1024.0 * 1024.0;
    }
    break;
  }
  ::kill(server, SIGTERM);
  wait_exit(server, std::chrono::milliseconds{2000});
  return bandwidth;
}

}  // namespace mstar::bench
