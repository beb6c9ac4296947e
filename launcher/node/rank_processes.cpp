// A node's follower rank processes: started, watched, reaped
// (launcher/node/rank_processes.hpp).
#include "launcher/node/rank_processes.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/tensor_parallel_lm.hpp"
#include "parallel/socket_group.hpp"
#ifdef MSTAR_HAVE_NCCL
#include "parallel/nccl_group.hpp"
#endif

extern char** environ;

namespace mstar::launcher {

actors::rank_group_factory node_rank_groups([[maybe_unused]] const std::string& device,
                                            const std::filesystem::path& dir,
                                            const std::string& token,
                                            std::chrono::milliseconds timeout) {
#ifdef MSTAR_HAVE_NCCL
  if (device.starts_with("cuda")) {
    return parallel::nccl_process_groups(
        [device](int rank, int ranks) {
          return models::parse_device(
              models::rank_devices(device, ranks)[static_cast<std::size_t>(rank)]);
        },
        timeout);
  }
#endif
  return parallel::socket_process_groups("unix:" + (dir / "group.sock").string(), token, timeout);
}

result<std::string> random_token() {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error(errc::io_error, std::string{"/dev/urandom: "} + std::strerror(errno));
  unsigned char bytes[16];
  const ssize_t n = ::read(fd, bytes, sizeof bytes);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof bytes))
    return make_error(errc::io_error, "/dev/urandom: short read");
  std::string out;
  for (unsigned char b : bytes)
    out += fmt::format("{:02x}", b);
  return out;
}

result<std::unique_ptr<rank_followers>> rank_followers::start(const std::vector<std::string>& argv,
                                                              int ranks,
                                                              const std::string& conductor,
                                                              const std::string& token) {
  std::unique_ptr<rank_followers> f(new rank_followers());
  const std::string token_entry = std::string{rank_token_env} + "=" + token;
  for (int r = 1; r < ranks; ++r) {
    // Everything exec needs is built before fork: the child calls only
    // async-signal-safe functions until exec.
    std::vector<std::string> words = argv;
    words.insert(words.end(), {"--rank", std::to_string(r), "--conductor", conductor});
    std::vector<char*> args;
    for (auto& w : words)
      args.push_back(w.data());
    args.push_back(nullptr);
    std::vector<std::string> env_text{token_entry};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, rank_token_env, std::strlen(rank_token_env)) != 0)
        env_text.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& s : env_text)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      const auto why = std::strerror(errno);
      for (const pid_t p : f->pids_)
        ::kill(p, SIGKILL);
      return make_error(errc::io_error,
                        fmt::format("starting tensor-parallel rank {}: fork: {}", r, why));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the conductor
      if (::getppid() != parent)
        ::_exit(127);
      ::execve("/proc/self/exe", args.data(), envp.data());
      ::_exit(127);
    }
    f->pids_.push_back(pid);
  }
  return f;
}

void rank_followers::watch(std::function<void(int rank, int status)> on_exit) {
  watcher_ = std::thread([this, on_exit = std::move(on_exit)] {
    while (!stopping_.load()) {
      for (std::size_t i = 0; i < pids_.size(); ++i) {
        if (pids_[i] <= 0)
          continue;
        int status = 0;
        if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
          pids_[i] = -1;
          if (!stopping_.load())
            on_exit(static_cast<int>(i) + 1, status);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
    }
  });
}

rank_followers::~rank_followers() {
  stopping_ = true;
  if (watcher_.joinable())
    watcher_.join();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  for (auto& pid : pids_) {
    while (pid > 0) {
      int status = 0;
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid || r < 0) {
        pid = -1;
        break;
      }
      if (std::chrono::steady_clock::now() > until) {
        ::kill(pid, SIGKILL);
        (void)::waitpid(pid, &status, 0);
        pid = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
  }
}

}  // namespace mstar::launcher
