#include "tests/support/subprocess.hpp"

#include <array>
#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace mstar::test {
namespace {

struct pipe_pair {
  int read = -1;
  int write = -1;
};

pipe_pair make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  return {fds[0], fds[1]};
}

void close_fd(int& fd) {
  if (fd >= 0)
    close(fd);
  fd = -1;
}

}  // namespace

process_output run_process(const std::vector<std::string>& argv, const std::string& input,
                           std::chrono::milliseconds deadline) {
  signal(SIGPIPE, SIG_IGN);  // a child that stops reading must not kill the test
  pipe_pair in = make_pipe(), out = make_pipe(), err = make_pipe();
  const pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in.read, STDIN_FILENO);
    dup2(out.write, STDOUT_FILENO);
    dup2(err.write, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close_fd(in.read);
  close_fd(out.write);
  close_fd(err.write);
  fcntl(in.write, F_SETFL, O_NONBLOCK);

  process_output result;
  std::size_t written = 0;
  if (input.empty())
    close_fd(in.write);
  const auto until = std::chrono::steady_clock::now() + deadline;
  bool killed = false;
  while (out.read >= 0 || err.read >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
    std::array<pollfd, 3> fds{
        {{out.read, POLLIN, 0}, {err.read, POLLIN, 0}, {in.write, POLLOUT, 0}}};
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR)
      break;
    std::array<char, 65536> buf;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      const ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf.data(), static_cast<std::size_t>(n));
      } else {
        close_fd(i == 0 ? out.read : err.read);
      }
    }
    if (fds[2].fd >= 0 && fds[2].revents != 0) {
      const ssize_t n = write(in.write, input.data() + written, input.size() - written);
      if (n > 0)
        written += static_cast<std::size_t>(n);
      if (n < 0 || written == input.size())
        close_fd(in.write);
    }
  }
  close_fd(in.write);
  close_fd(out.read);
  close_fd(err.read);
  int status = 0;
  waitpid(pid, &status, 0);
  if (killed) {
    result.exit_code = 137;
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace mstar::test
