// mstar-launch end to end, against a fake mstar-node (a shell script that
// follows the contract in launcher/launch/README.md), plus its pure parts.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "launcher/deploy/deploy_config.hpp"
#include "launcher/launch/internal/line_splitter.hpp"
#include "launcher/launch/job_rank.hpp"
#include "launcher/launch/node_commands.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Behaviour from $FAKE_DIR/NAME.mode: ready (default), never (no ready line),
// crash (exit 3 0.3 s after ready), stubborn (ignores SIGTERM). The front
// (named in $FAKE_DIR/front) prints `serving`. PIDs go to NAME.pids, one line
// per start to NAME.starts, the arguments to NAME.args.
constexpr const char* fake_node = R"sh(#!/bin/sh
args="$*" name= port=18000
while [ $# -gt 0 ]; do
  case "$1" in
    --node) name=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    *) shift ;;
  esac
done
echo "$args" > "$FAKE_DIR/$name.args"
echo $$ >> "$FAKE_DIR/$name.starts"
echo $$ >> "$FAKE_DIR/$name.pids"
mode=ready
[ -f "$FAKE_DIR/$name.mode" ] && mode=$(cat "$FAKE_DIR/$name.mode")
trap 'echo "mstar-node $name: stopping"; exit 0' TERM INT
[ "$mode" = stubborn ] && trap 'echo "mstar-node $name: ignoring SIGTERM"' TERM
echo "starting as $mode" >&2
printf 'half a '; sleep 0.05; printf 'line\n'
if [ "$mode" != never ]; then
  echo "mstar-node $name: ready control=127.0.0.1:17001"
  [ "$(cat "$FAKE_DIR/front" 2>/dev/null)" = "$name" ] &&
    echo "mstar-node $name: serving http://127.0.0.1:$port"
fi
if [ "$mode" = crash ]; then sleep 0.3; echo "crashing" >&2; exit 3; fi
while :; do
  sleep 5 & echo $! >> "$FAKE_DIR/$name.pids"; wait $!
done
)sh";

// ssh that runs the remote command in a session of its own (out of reach of
// the launcher's process-group signals, like a real remote host), so only the
// closed stdin can stop it.
constexpr const char* fake_ssh = R"sh(#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in -o) shift 2 ;; --) shift; break ;; -*) shift ;; *) shift ;; esac
done
exec setsid -w sh -c "$*"
)sh";

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& file, const std::string& text, bool executable = false) {
  std::ofstream(file) << text;
  if (executable)
    fs::permissions(file, fs::perms::owner_all);
}

// Alive and not a zombie.
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return false;
  const auto stat = read_text(fs::path{"/proc"} / std::to_string(pid) / "stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

class launch_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/mstar-launch-test-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
    write_text(dir_ / "fake-node", fake_node, true);
    write_text(dir_ / "front", "prefill-0");
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void write_deploy(const std::string& nodes, double join_s = 5, int retries = 2,
                    double backoff_s = 0.2) {
    write_text(dir_ / "deploy.yaml",
               "deployment: t\nauth: {mode: secret, secret_file: secret.txt}\n"
               "timeouts: {join_s: " +
                   std::to_string(join_s) +
                   "}\n"
                   "restart: {max_retries: " +
                   std::to_string(retries) + ", backoff_s: " + std::to_string(backoff_s) +
                   "}\nnodes:\n" + nodes + "front: prefill-0\n");
  }

  void set_mode(const std::string& node, const std::string& mode) {
    write_text(dir_ / (node + ".mode"), mode);
  }

  // Starts mstar-launch with stdout and stderr going to files.
  void start(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {MSTAR_LAUNCH_PATH, (dir_ / "deploy.yaml").string(), "--node-binary",
                               (dir_ / "fake-node").string()});
    env["FAKE_DIR"] = dir_.string();
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      for (const auto& [k, v] : env)
        ::setenv(k.c_str(), v.c_str(), 1);
      for (const char* var : {"SLURM_PROCID", "NODE_RANK"})
        if (!env.contains(var))
          ::unsetenv(var);
      std::freopen((dir_ / "out.txt").c_str(), "w", stdout);
      std::freopen((dir_ / "err.txt").c_str(), "w", stderr);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  [[nodiscard]] std::string out() const { return read_text(dir_ / "out.txt"); }
  [[nodiscard]] std::string err() const { return read_text(dir_ / "err.txt"); }

  // Polls the output until `text` shows up; false after `deadline`.
  bool wait_for(const std::string& text, std::chrono::milliseconds deadline = 8s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      if (out().find(text) != std::string::npos || err().find(text) != std::string::npos)
        return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // The launcher's exit code; -1 (and killed) when it outlives `deadline`.
  int wait_exit(std::chrono::milliseconds deadline = 8s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    int status = 0;
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  std::vector<pid_t> pids(const std::string& node, const std::string& kind = "pids") const {
    std::vector<pid_t> out;
    std::ifstream in(dir_ / (node + "." + kind));
    for (pid_t p = 0; in >> p;)
      out.push_back(p);
    return out;
  }

  // Every process the fake nodes recorded is gone (within a deadline: a node
  // behind fake ssh stops asynchronously, through the wrapper's stdin
  // watcher, the node's trap and the wrapper's group kill; with other tests
  // on both cores 3 s was once not enough in CI's build/ step).
  void expect_no_survivors(const std::vector<std::string>& nodes) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    for (const auto& node : nodes) {
      const auto recorded = pids(node);
      EXPECT_FALSE(recorded.empty()) << node;
      for (pid_t p : recorded) {
        while (alive(p) && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(20ms);
        EXPECT_FALSE(alive(p)) << node << " left pid " << p << " running";
      }
    }
  }

  fs::path dir_;
  pid_t pid_ = -1;
};

constexpr const char* two_nodes =
    "  - {name: prefill-0, role: prefill, control_port: 17101}\n"
    "  - {name: decode-0, role: decode, control_port: 17102}\n";

TEST_F(launch_test, starts_every_node_prefixes_their_lines_and_stops_them_all_on_sigterm) {
  write_deploy(two_nodes);
  start({"--port", "18123", "--model", dir_.string(), "--rank-env", "none"});
  ASSERT_TRUE(wait_for("mstar-launch: t serving http://127.0.0.1:18123")) << out() << err();
  // Whole lines, each with its node's name, stdout and stderr kept apart.
  EXPECT_NE(out().find("[prefill-0] half a line\n"), std::string::npos) << out();
  EXPECT_NE(out().find("[decode-0] half a line\n"), std::string::npos) << out();
  EXPECT_NE(out().find("[decode-0] mstar-node decode-0: ready"), std::string::npos);
  EXPECT_NE(err().find("[decode-0] starting as ready\n"), std::string::npos) << err();
  EXPECT_EQ(out().find("half a \n"), std::string::npos);
  // --model goes to every node, --port to the front only.
  const auto model = " --model " + dir_.string();
  EXPECT_NE(read_text(dir_ / "prefill-0.args").find(model + " --port 18123"), std::string::npos);
  EXPECT_NE(read_text(dir_ / "decode-0.args").find(model), std::string::npos);
  EXPECT_EQ(read_text(dir_ / "decode-0.args").find("--port"), std::string::npos);
  // The missing secret file was created: 64 hex digits, private.
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "secret.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_text(dir_ / "secret.txt").size(), 65u);
  EXPECT_NE(err().find("created the shared secret"), std::string::npos);

  ::kill(pid_, SIGTERM);
  EXPECT_EQ(wait_exit(), 0) << err();
  EXPECT_NE(out().find("[prefill-0] mstar-node prefill-0: stopping"), std::string::npos);
  EXPECT_NE(out().find("[decode-0] mstar-node decode-0: stopping"), std::string::npos);
  expect_no_survivors({"prefill-0", "decode-0"});
}

TEST_F(launch_test, join_timeout_names_the_node_that_never_became_ready_and_stops_the_others) {
  write_deploy(two_nodes, /*join_s=*/1);
  set_mode("decode-0", "never");
  start({"--rank-env", "none"});
  EXPECT_EQ(wait_exit(), 1) << err();
  EXPECT_NE(err().find("waiting for nodes to join: decode-0 (never ready; last output: 'half a "
                       "line')"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("prefill-0 stopped (exited with status 0)"), std::string::npos);
  expect_no_survivors({"prefill-0", "decode-0"});
}

TEST_F(launch_test, a_crashing_node_is_restarted_with_backoff_then_stops_all_without_decode) {
  write_deploy(two_nodes, 5, /*retries=*/2, /*backoff_s=*/0.2);
  set_mode("decode-0", "crash");
  start({"--rank-env", "none"});
  EXPECT_EQ(wait_exit(), 1) << err();
  EXPECT_NE(err().find("decode-0 exited with status 3 (last output: 'crashing'); restart 1 of 2 "
                       "in 0.2 s"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("restart 2 of 2 in 0.4 s"), std::string::npos);
  EXPECT_NE(err().find("decode-0 exited with status 3 (last output: 'crashing') and is out of "
                       "restarts (2); no node left that can decode"),
            std::string::npos);
  EXPECT_EQ(pids("decode-0", "starts").size(), 3u);
  expect_no_survivors({"prefill-0", "decode-0"});
}

TEST_F(launch_test, a_node_out_of_restarts_leaves_the_rest_serving_while_capacity_remains) {
  write_deploy(std::string{two_nodes} + "  - {name: decode-1, role: decode, control_port: 17103}\n",
               5, /*retries=*/1, 0.1);
  set_mode("decode-0", "crash");
  start({"--rank-env", "none"});
  ASSERT_TRUE(wait_for("still serving")) << err();
  EXPECT_EQ(pids("decode-0", "starts").size(), 2u);
  ::kill(pid_, SIGINT);
  EXPECT_EQ(wait_exit(), 0) << err();
  expect_no_survivors({"prefill-0", "decode-0", "decode-1"});
}

TEST_F(launch_test, sigterm_while_starting_stops_every_node) {
  write_deploy(two_nodes, /*join_s=*/30);
  set_mode("prefill-0", "never");
  set_mode("decode-0", "never");
  start({"--rank-env", "none"});
  ASSERT_TRUE(wait_for("[prefill-0] half a line")) << out();
  ASSERT_TRUE(wait_for("[decode-0] half a line")) << out();
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(wait_exit(), 0) << err();
  expect_no_survivors({"prefill-0", "decode-0"});
}

TEST_F(launch_test, a_node_ignoring_sigterm_is_killed_after_the_grace_period) {
  write_deploy(two_nodes);
  set_mode("decode-0", "stubborn");
  start({"--rank-env", "none", "--grace", "0.5"});
  ASSERT_TRUE(wait_for("mstar-launch: t serving http://")) << err();
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(wait_exit(), 0) << err();
  EXPECT_NE(err().find("still running after 0.5 s: decode-0; SIGKILL"), std::string::npos) << err();
  expect_no_survivors({"prefill-0", "decode-0"});
}

TEST_F(launch_test, a_node_over_ssh_is_stopped_when_its_connection_closes) {
  write_text(dir_ / "ssh", fake_ssh, true);
  write_deploy(
      "  - {name: prefill-0, role: prefill, control_port: 17101}\n"
      "  - {name: decode-0, role: decode, host: 10.9.9.9, control_port: 17102, "
      "ssh: me@10.9.9.9}\n");
  start({"--rank-env", "none"}, {{"PATH", dir_.string() + ":" + std::getenv("PATH")}});
  ASSERT_TRUE(wait_for("mstar-launch: t serving http://")) << err();
  EXPECT_NE(out().find("[decode-0] mstar-node decode-0: ready"), std::string::npos);
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(wait_exit(), 0) << err();
  expect_no_survivors({"prefill-0", "decode-0"});
}

TEST_F(launch_test, a_slurm_rank_runs_only_its_own_node) {
  write_deploy(two_nodes);
  start({}, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "gpu[01-02]"}});
  ASSERT_TRUE(
      wait_for("1 node(s) of t ready; the front node prefill-0 serves http://127.0.0.1:8000"))
      << out() << err();
  EXPECT_FALSE(fs::exists(dir_ / "prefill-0.args"));
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(wait_exit(), 0) << err();
  expect_no_survivors({"decode-0"});
}

TEST_F(launch_test, errors_are_reported_with_exit_code_2_before_anything_starts) {
  write_deploy("  - {name: prefill-0, role: prefill}\n");
  const auto expected = mstar::deploy::load_deployment(dir_ / "deploy.yaml");
  ASSERT_FALSE(expected);
  start({"--rank-env", "none"});
  EXPECT_EQ(wait_exit(), 2);
  EXPECT_NE(err().find(expected.error().message()), std::string::npos) << err();
  EXPECT_FALSE(fs::exists(dir_ / "secret.txt"));

  write_deploy(two_nodes);
  start({}, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "3"}});
  EXPECT_EQ(wait_exit(), 2);
  EXPECT_NE(err().find("SLURM_NTASKS=3 but the deployment has 2 nodes"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "prefill-0.args"));
}

TEST_F(launch_test, dry_run_prints_every_command_and_starts_nothing) {
  write_deploy(
      "  - {name: prefill-0, role: prefill, control_port: 17101}\n"
      "  - {name: decode-0, role: decode, host: 10.9.9.9, control_port: 17102, "
      "ssh: me@10.9.9.9}\n");
  start({"--dry-run", "--rank-env", "none"});
  EXPECT_EQ(wait_exit(), 0);
  const auto node = (dir_ / "fake-node").string();
  const auto config = (dir_ / "deploy.yaml").string();
  EXPECT_NE(out().find("prefill-0: " + node + " --config " + config + " --node prefill-0\n"),
            std::string::npos)
      << out();
  EXPECT_NE(out().find("decode-0: ssh -o BatchMode=yes me@10.9.9.9 -- "), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "prefill-0.args"));
  EXPECT_FALSE(fs::exists(dir_ / "secret.txt"));
}

// The pure parts.

TEST(launch_hostlist, expands_slurm_ranges_keeping_zero_padding) {
  auto hosts = mstar::launch::expand_hostlist("gpu[01-03,07],login1");
  ASSERT_TRUE(hosts) << hosts.error().message();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu07", "login1"}));
  EXPECT_FALSE(mstar::launch::expand_hostlist("gpu[3-1]"));
  EXPECT_FALSE(mstar::launch::expand_hostlist("gpu[1-2"));
}

TEST(launch_rank, torchrun_variables_pick_the_node_and_must_match_the_node_count) {
  std::map<std::string, std::string> env{
      {"NODE_RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "10.0.0.1"}};
  const mstar::launch::env_lookup lookup = [&](std::string_view name) {
    const auto it = env.find(std::string{name});
    return it == env.end() ? std::nullopt : std::optional<std::string>{it->second};
  };
  using mstar::launch::rank_source;
  auto rank = mstar::launch::detect_rank(rank_source::automatic, 3, lookup);
  ASSERT_TRUE(rank && *rank);
  EXPECT_EQ((*rank)->scheduler, "torchrun");
  EXPECT_EQ((*rank)->rank, 2u);
  EXPECT_FALSE(mstar::launch::detect_rank(rank_source::automatic, 4, lookup));
  EXPECT_FALSE(*mstar::launch::detect_rank(rank_source::none, 3, lookup));
  env["NODE_RANK"] = "two";
  EXPECT_FALSE(mstar::launch::detect_rank(rank_source::torchrun, 3, lookup));
}

TEST(launch_commands, shell_quoting_survives_quotes_and_spaces) {
  EXPECT_EQ(mstar::launch::shell_quote("/a/b-c.yaml"), "/a/b-c.yaml");
  EXPECT_EQ(mstar::launch::shell_quote("it's a"), "'it'\\''s a'");
  EXPECT_EQ(mstar::launch::shell_quote(""), "''");
}

TEST(launch_lines, splitter_hands_out_whole_lines_only) {
  mstar::launch::internal::line_splitter split;
  std::vector<std::string> lines;
  const auto sink = [&](std::string_view l) { lines.emplace_back(l); };
  split.feed("half a ", sink);
  EXPECT_TRUE(lines.empty());
  split.feed("line\r\nnext\nrest", sink);
  EXPECT_EQ(lines, (std::vector<std::string>{"half a line", "next"}));
  split.finish(sink);
  EXPECT_EQ(lines.back(), "rest");
}

}  // namespace
