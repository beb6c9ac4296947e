#include "launcher/launch/supervisor.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mstar::launch {
namespace {

using std::chrono::milliseconds;

constexpr int handled_signals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;  // our own output is gone (a closed pipe): keep supervising
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string describe_exit(int status) {
  if (WIFEXITED(status))
    return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                       ::strsignal(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

struct supervisor::node {
  node_spec spec;
  internal::child_process proc;  ///< pid -1 while not running
  internal::line_splitter out_lines;
  internal::line_splitter err_lines;
  bool ready = false;
  bool serving = false;
  std::int32_t restarts = 0;
  std::optional<clock::time_point> restart_at;  ///< a restart is due then
  std::optional<clock::time_point> join_by;     ///< a restarted node must rejoin by then
  bool given_up = false;                        ///< out of restarts
  std::string last_line;
};

result<std::unique_ptr<supervisor>> supervisor::make(std::vector<node_spec> nodes,
                                                     supervisor_options options) {
  if (nodes.empty())
    return make_error(errc::invalid_argument, "no nodes to start");
  sigset_t set;
  ::sigemptyset(&set);
  for (int sig : handled_signals)
    ::sigaddset(&set, sig);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
    return make_error(errc::internal, fmt::format("sigprocmask: {}", std::strerror(errno)));
  internal::unique_fd fd{::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)};
  if (!fd.valid())
    return make_error(errc::internal, fmt::format("signalfd: {}", std::strerror(errno)));
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor
  // Processes the nodes leave behind become our children, so we reap them
  // instead of leaving zombies to an init that may not.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  return std::unique_ptr<supervisor>(
      new supervisor(std::move(nodes), std::move(options), std::move(fd)));
}

supervisor::supervisor(std::vector<node_spec> nodes, supervisor_options options,
                       internal::unique_fd sigfd)
    : options_(std::move(options)), sigfd_(std::move(sigfd)) {
  for (auto& spec : nodes) {
    nodes_.push_back(std::make_unique<node>());
    nodes_.back()->spec = std::move(spec);
  }
}

supervisor::~supervisor() {
  stop_all();
}

outcome supervisor::run() {
  join_deadline_ = clock::now() + options_.join_timeout;
  for (auto& n : nodes_) {
    if (!start_node(*n))
      break;
  }
  while (!done_) {
    if (phase_ == phase::starting && all_joined()) {
      phase_ = phase::serving;
      spdlog::info("all {} node(s) joined", nodes_.size());
      if (options_.on_joined)
        options_.on_joined(url_);
    }
    poll_once(next_deadline().value_or(clock::now() + std::chrono::hours{1}));
    if (!done_)
      on_deadlines();
  }
  stop_all();
  return outcome_;
}

bool supervisor::start_node(node& n) {
  auto child = internal::spawn_child(n.spec.argv, n.spec.over_ssh);
  if (!child) {
    after_death(n, child.error().message());
    return false;
  }
  n.proc = std::move(*child);
  n.ready = n.serving = false;
  spdlog::info("started {} (pid {}{})", n.spec.name, n.proc.pid, n.spec.over_ssh ? ", ssh" : "");
  return true;
}

void supervisor::poll_once(clock::time_point until) {
  std::vector<pollfd> fds;
  std::vector<std::pair<node*, bool>> owners;  // (node, stdout?) per pipe
  for (auto& n : nodes_) {
    for (bool out : {true, false}) {
      const auto& fd = out ? n->proc.out : n->proc.err;
      if (fd.valid()) {
        fds.push_back({fd.get(), POLLIN, 0});
        owners.emplace_back(n.get(), out);
      }
    }
  }
  fds.push_back({sigfd_.get(), POLLIN, 0});  // last: reaping closes pipes polled above
  const auto left = std::chrono::ceil<milliseconds>(until - clock::now()).count();
  const int timeout = static_cast<int>(std::clamp<std::int64_t>(left, 0, INT_MAX));
  if (::poll(fds.data(), fds.size(), timeout) < 0) {
    if (errno != EINTR)
      fail(outcome::start_failed, fmt::format("poll: {}", std::strerror(errno)));
    return;
  }
  for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
    if (fds[i].revents != 0)
      read_output(*owners[i].first, owners[i].second);
  }
  if (fds.back().revents != 0)
    read_signals();
}

void supervisor::read_output(node& n, bool from_stdout) {
  auto& fd = from_stdout ? n.proc.out : n.proc.err;
  auto& lines = from_stdout ? n.out_lines : n.err_lines;
  const auto sink = [&](std::string_view line) { on_line(n, from_stdout, line); };
  char buf[16384];
  const ssize_t got = ::read(fd.get(), buf, sizeof buf);
  if (got > 0) {
    lines.feed({buf, static_cast<std::size_t>(got)}, sink);
  } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
    lines.finish(sink);
    fd.reset();
  }
}

void supervisor::drain_output(node& n) {
  for (bool out : {true, false}) {
    // Bounded: the group is already killed, so the pipe holds at most its buffer.
    for (int i = 0; i < 64 && (out ? n.proc.out : n.proc.err).valid(); ++i)
      read_output(n, out);
    auto& lines = out ? n.out_lines : n.err_lines;
    lines.finish([&](std::string_view line) { on_line(n, out, line); });
  }
}

void supervisor::on_line(node& n, bool from_stdout, std::string_view line) {
  write_all(from_stdout ? STDOUT_FILENO : STDERR_FILENO,
            fmt::format("[{}] {}\n", n.spec.name, line));
  n.last_line = std::string{line};
  const std::string prefix = fmt::format("mstar-node {}: ", n.spec.name);
  if (!from_stdout || !line.starts_with(prefix))
    return;
  const auto said = line.substr(prefix.size());
  if (said.starts_with("ready control="))
    n.ready = true;
  else if (said.starts_with("serving ") && n.spec.front)
    n.serving = true, url_ = std::string{said.substr(8)};
  if (n.join_by && joined(n)) {
    n.join_by.reset();
    spdlog::info("{} rejoined after restart {}", n.spec.name, n.restarts);
  }
}

void supervisor::read_signals() {
  signalfd_siginfo info;
  bool child = false;
  while (::read(sigfd_.get(), &info, sizeof info) == sizeof info) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      child = true;
    } else if (phase_ == phase::stopping) {
      spdlog::warn("{} again: killing the nodes now", ::strsignal(sig));
      signal_all(SIGKILL);
    } else if (!done_) {
      spdlog::info("{}: stopping the deployment", ::strsignal(sig));
      done_ = true;
      outcome_ = outcome::stopped;
    }
  }
  if (child)
    reap();
}

void supervisor::reap() {
  int status = 0;
  pid_t pid = 0;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    // Not a node: a process a node left behind, reparented to us (subreaper).
    const auto it = std::find_if(nodes_.begin(), nodes_.end(),
                                 [&](const auto& n) { return n->proc.pid == pid; });
    if (it != nodes_.end())
      on_exit(**it, status);
  }
}

void supervisor::on_exit(node& n, int status) {
  ::kill(-n.proc.pid, SIGKILL);  // whatever the node left behind in its group
  drain_output(n);
  n.proc = {};
  n.join_by.reset();
  if (phase_ == phase::stopping) {
    spdlog::info("{} stopped ({})", n.spec.name, describe_exit(status));
    return;
  }
  after_death(n, describe_exit(status));
}

void supervisor::after_death(node& n, const std::string& what) {
  const std::string last =
      n.last_line.empty() ? " (no output)" : fmt::format(" (last output: '{}')", n.last_line);
  if (phase_ == phase::starting) {
    fail(outcome::start_failed, fmt::format("{} {} before it joined{}", n.spec.name, what, last));
    return;
  }
  if (n.restarts >= options_.max_retries) {
    give_up(n, what + last);
    return;
  }
  const milliseconds doubled{options_.backoff.count() << std::min(n.restarts, 20)};
  const auto delay = std::min(options_.max_backoff, doubled);
  n.restarts++;
  n.restart_at = clock::now() + delay;
  spdlog::warn("{} {}{}; restart {} of {} in {:.1f} s", n.spec.name, what, last, n.restarts,
               options_.max_retries, seconds(delay));
}

void supervisor::give_up(node& n, const std::string& what) {
  n.given_up = true;
  bool prefill = false, decode = false;
  for (const auto& other : nodes_) {
    prefill |= !other->given_up && deploy::can_prefill(other->spec.role);
    decode |= !other->given_up && deploy::can_decode(other->spec.role);
  }
  const std::string head =
      fmt::format("{} {} and is out of restarts ({})", n.spec.name, what, options_.max_retries);
  if (n.spec.front)
    fail(outcome::capacity_lost, head + "; it was the front node: the HTTP listener is gone");
  else if (!prefill || !decode)
    fail(outcome::capacity_lost,
         fmt::format("{}; no node left that can {}", head, !prefill ? "prefill" : "decode"));
  else
    spdlog::warn("{}; still serving: nodes that can prefill and decode remain", head);
}

void supervisor::on_deadlines() {
  const auto now = clock::now();
  if (phase_ == phase::starting && now >= join_deadline_) {
    std::string missing;
    for (const auto& n : nodes_) {
      if (joined(*n))
        continue;
      missing +=
          fmt::format("{}{} ({}; last output: '{}')", missing.empty() ? "" : ", ", n->spec.name,
                      n->ready ? "ready but never printed serving" : "never ready", n->last_line);
    }
    fail(outcome::start_failed,
         fmt::format("timed out after {:.1f} s waiting for nodes to join: {}",
                     seconds(options_.join_timeout), missing));
    return;
  }
  for (auto& n : nodes_) {
    if (n->restart_at && now >= *n->restart_at) {
      n->restart_at.reset();
      spdlog::info("restarting {} (restart {} of {})", n->spec.name, n->restarts,
                   options_.max_retries);
      if (start_node(*n))
        n->join_by = now + options_.join_timeout;
    }
    if (n->join_by && now >= *n->join_by && n->proc.pid > 0) {
      n->join_by.reset();
      n->last_line = fmt::format("(no ready line within {:.1f} s of its restart)",
                                 seconds(options_.join_timeout));
      ::kill(-n->proc.pid, SIGKILL);  // reaped as a death: restarted again or given up
    }
  }
}

void supervisor::fail(outcome why, std::string reason) {
  if (done_)
    return;
  done_ = true;
  outcome_ = why;
  reason_ = std::move(reason);
  spdlog::error("{}", reason_);
}

bool supervisor::joined(const node& n) const {
  return n.ready && (!n.spec.front || n.serving);
}

bool supervisor::all_joined() const {
  return std::all_of(nodes_.begin(), nodes_.end(), [&](const auto& n) { return joined(*n); });
}

std::optional<clock::time_point> supervisor::next_deadline() const {
  std::optional<clock::time_point> next;
  const auto consider = [&](std::optional<clock::time_point> t) {
    if (t && (!next || *t < *next))
      next = t;
  };
  if (phase_ == phase::starting)
    consider(join_deadline_);
  for (const auto& n : nodes_) {
    consider(n->restart_at);
    consider(n->join_by);
  }
  return next;
}

void supervisor::signal_all(int sig) {
  for (auto& n : nodes_) {
    if (n->proc.pid <= 0)
      continue;
    ::kill(-n->proc.pid, sig);
    n->proc.in.reset();  // an ssh node's remote wrapper stops its node on EOF
  }
}

bool supervisor::any_running() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->proc.pid > 0; });
}

void supervisor::stop_all() {
  phase_ = phase::stopping;
  for (auto& n : nodes_)
    n->restart_at.reset();
  if (!any_running())
    return;
  spdlog::info("stopping: SIGTERM to every node, SIGKILL after {:.1f} s", seconds(options_.grace));
  signal_all(SIGTERM);
  const auto kill_at = clock::now() + options_.grace;
  bool killed = false;
  clock::time_point give_up_at{};
  while (any_running()) {
    if (killed && clock::now() >= give_up_at) {  // stuck in the kernel: nothing more to do
      spdlog::error("some nodes did not die within 5 s of SIGKILL");
      return;
    }
    if (!killed && clock::now() >= kill_at) {
      std::string names;
      for (const auto& n : nodes_)
        if (n->proc.pid > 0)
          names += (names.empty() ? "" : ", ") + n->spec.name;
      spdlog::warn("still running after {:.1f} s: {}; SIGKILL", seconds(options_.grace), names);
      signal_all(SIGKILL);
      killed = true;
      give_up_at = clock::now() + std::chrono::seconds{5};
    }
    poll_once(killed ? clock::now() + milliseconds{100} : kill_at);
    reap();  // also without a SIGCHLD in this round
  }
}

}  // namespace mstar::launch
