#include "launcher/launch/internal/child.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace mstar::launch::internal {
namespace {

struct pipe_fds {
  unique_fd read;
  unique_fd write;
};

result<pipe_fds> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return make_error(errc::io_error, fmt::format("pipe2: {}", std::strerror(errno)));
  return pipe_fds{unique_fd{fds[0]}, unique_fd{fds[1]}};
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(char* const* argv, pid_t parent, int in, int out, int err) {
  ::setpgid(0, 0);  // Ctrl-C at the terminal reaches the launcher, not the nodes
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent)  // the launcher died before prctl took effect
    ::_exit(127);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT})
    ::signal(sig, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
      ::dup2(err, STDERR_FILENO) < 0)
    ::_exit(127);
  ::execvp(argv[0], argv);
  const char* why = std::strerror(errno);
  for (const char* part :
       std::initializer_list<const char*>{"mstar-launch: cannot run ", argv[0], ": ", why, "\n"})
    (void)!::write(STDERR_FILENO, part, std::strlen(part));
  ::_exit(127);
}

}  // namespace

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int unique_fd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void unique_fd::reset() noexcept {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

result<child_process> spawn_child(const std::vector<std::string>& argv, bool stdin_pipe) {
  if (argv.empty())
    return make_error(errc::invalid_argument, "spawn_child: empty command");
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  auto out = make_pipe();
  auto err = make_pipe();
  if (!out || !err)
    return (!out ? out.error() : err.error()).with_context("starting " + argv[0]);
  pipe_fds in;
  if (stdin_pipe) {
    auto made = make_pipe();
    if (!made)
      return made.error().with_context("starting " + argv[0]);
    in = std::move(*made);
  } else {
    in.read = unique_fd{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  }

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    return make_error(errc::io_error,
                      fmt::format("starting {}: fork: {}", argv[0], std::strerror(errno)));
  if (pid == 0)
    exec_child(args.data(), parent, in.read.get(), out->write.get(), err->write.get());
  ::setpgid(pid, pid);  // also here, so kill(-pid) works before the child ran
  child_process child;
  child.pid = pid;
  child.out = std::move(out->read);
  child.err = std::move(err->read);
  child.in = std::move(in.write);
  set_nonblocking(child.out.get());
  set_nonblocking(child.err.get());
  return child;
}

}  // namespace mstar::launch::internal
