#pragma once

// Multi-process test plumbing: children forked before anything touches UCX,
// messages over pipes with a deadline on every read, and a bounded wait for
// a child's exit code (the child reports through it).

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <poll.h>
// AddressSanitizer: GCC says so with a macro, clang with a feature test.
#if defined(__SANITIZE_ADDRESS__)
#define MSTAR_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MSTAR_TEST_ASAN 1
#endif
#endif
#ifdef MSTAR_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace mstar::transport::test {

/// One direction of a pipe, carrying length-prefixed messages.
class channel {
 public:
  channel() {
    int fds[2] = {-1, -1};
    if (::pipe(fds) == 0) {
      read_fd_ = fds[0];
      write_fd_ = fds[1];
    }
  }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;
  ~channel() {
    close_fd(read_fd_);
    close_fd(write_fd_);
  }

  /// Sends `text`; false when the pipe is broken.
  bool send(const std::string& text) const {
    const std::uint64_t size = text.size();
    return write_all(&size, sizeof size) && write_all(text.data(), text.size());
  }

  /// The next message, or nothing when `timeout` passes or the writer died.
  std::optional<std::string> receive(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::uint64_t size = 0;
    if (!read_all(&size, sizeof size, deadline))
      return std::nullopt;
    std::string text(size, '\0');
    if (!read_all(text.data(), size, deadline))
      return std::nullopt;
    return text;
  }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0)
      ::close(fd);
    fd = -1;
  }
  bool write_all(const void* data, std::size_t bytes) const {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(write_fd_, p, bytes);
      if (n <= 0 && errno != EINTR)
        return false;
      if (n > 0) {
        p += n;
        bytes -= static_cast<std::size_t>(n);
      }
    }
    return true;
  }
  bool read_all(void* data, std::size_t bytes,
                std::chrono::steady_clock::time_point deadline) const {
    char* p = static_cast<char*>(data);
    while (bytes > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return false;
      pollfd fd{read_fd_, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0)
        continue;
      const ssize_t n = ::read(read_fd_, p, bytes);
      if (n == 0 || (n < 0 && errno != EINTR))
        return false;
      if (n > 0) {
        p += n;
        bytes -= static_cast<std::size_t>(n);
      }
    }
    return true;
  }
  int read_fd_ = -1;
  int write_fd_ = -1;
};

/// Forks; the child runs `body` with an alarm of `watchdog_s` seconds armed
/// (so a hung child dies) and exits with its return value, skipping the
/// parent's destructors and gtest's exit handlers. Under AddressSanitizer a
/// child that leaked exits with 99.
template <class Body>
pid_t spawn(Body body, unsigned watchdog_s = 60) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(watchdog_s);
    int code = body();
#ifdef MSTAR_TEST_ASAN
    // _exit skips LeakSanitizer's exit-time check: run it here, so a child
    // that leaked fails through its exit code.
    if (__lsan_do_recoverable_leak_check() != 0)
      code = 99;
#endif
    ::_exit(code);
  }
  return pid;
}

/// The child's exit code (128 + signal when killed), or -1 when it did not
/// end within `timeout`; then it is killed and reaped. Sleeps on a pidfd.
inline int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  bool killed = false;
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
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

}  // namespace mstar::transport::test
