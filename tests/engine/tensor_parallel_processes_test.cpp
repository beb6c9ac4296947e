// Tensor-parallel ranks as processes on the CPU: rank 1 of the hybrid
// fixture in a child process (this binary run again), rank 0 here, meeting
// over a Unix socket (parallel/socket_group.hpp), each rank a whole engine
// over its own pools with the same requests, as the threads of
// tensor_parallel_test.cpp do. Rank 0's greedy tokens must equal the
// unsplit model's and its logits stay within 1e-5 of the row's largest; a
// rank process that exits mid-run fails its peer's requests naming it, at
// once rather than at the group's timeout.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "parallel/socket_group.hpp"
#include "tests/engine/tensor_parallel_support.hpp"
#include "tests/support/self_child.hpp"

namespace mstar::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* child_env = "MSTAR_TEST_TP_RANK_PROCESS";
constexpr const char* child_test = "tensor_parallel_processes.DISABLED_rank_one";
const std::string model_name = "nemotron_h_tiny_hybrid";

std::vector<engine::request_spec> requests() {
  std::vector<engine::request_spec> out;
  for (const auto& p : load_expected(model_name))
    out.push_back(greedy_request(p.prompt, 8, true));
  return out;
}

// What the parent tells the child: "<address>|<token>|<mode>", mode "run"
// (every request to completion) or "stop" (two steps, then exit).
struct child_role {
  std::string address;
  std::string token;
  std::string mode;
};

std::optional<child_role> parse_role(const std::string& payload) {
  const auto a = payload.find('|');
  const auto b = payload.find('|', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos)
    return std::nullopt;
  return child_role{payload.substr(0, a), payload.substr(a + 1, b - a - 1), payload.substr(b + 1)};
}

// The child's body: rank 1 of a group of two, its report a line on the pipe
// ("ok", or what failed).
TEST(tensor_parallel_processes, DISABLED_rank_one) {
  const auto side = child_side_of(child_env);
  if (!side)
    GTEST_SKIP() << "the rank-process tests' child; run by them only";
  const int write_fd = side->write_fd;
  const auto role = parse_role(side->payload);
  ASSERT_TRUE(role.has_value()) << side->payload;
  const auto report = [&](const std::string& line) { (void)write_all(write_fd, line + "\n"); };
  auto comm = parallel::socket_group::join({role->address, 1, 2, role->token, 30s});
  if (!comm) {
    report("join: " + comm.error().message());
    FAIL() << comm.error().message();
  }
  models::run_options run;
  run.tensor_parallel = std::shared_ptr<parallel::communicator>(std::move(*comm));
  auto e = tp_engine(model_name, run);
  ASSERT_NE(e, nullptr);
  if (role->mode == "stop") {
    // Two steps, then the process ends: its sockets close with it.
    for (const auto& r : requests())
      ASSERT_TRUE(e->submit(r).has_value());
    for (int s = 0; s < 2; ++s)
      ASSERT_TRUE(e->step().has_value());
    report("stopping");
    ::_exit(0);
  }
  auto done = engine::run_to_completion(*e, requests());
  if (!done) {
    report("run: " + done.error().message());
    FAIL() << done.error().message();
  }
  expect_pools_empty(*e);
  report("ok");
}

// Rank 0's side: a listener on a fresh Unix socket, the child started with
// its address, then the group formed.
struct rank_zero {
  std::filesystem::path dir;
  std::unique_ptr<self_child> child;
  std::shared_ptr<parallel::communicator> comm;

  explicit rank_zero(const std::string& mode) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mstar-tp-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir = tmpl;
    const std::string token = "tp-test-" + std::to_string(::getpid());
    auto listener =
        parallel::socket_group::listen({"unix:" + (dir / "group.sock").string(), 0, 2, token, 30s});
    if (!listener) {
      ADD_FAILURE() << listener.error().message();
      return;
    }
    child = std::make_unique<self_child>(child_env, listener->address() + "|" + token + "|" + mode,
                                         child_test);
    auto c = listener->accept_all();
    if (!c) {
      ADD_FAILURE() << c.error().message();
      return;
    }
    comm = std::move(*c);
  }
  rank_zero(const rank_zero&) = delete;
  rank_zero& operator=(const rank_zero&) = delete;
  ~rank_zero() {
    std::error_code ec;
    if (!dir.empty())
      std::filesystem::remove_all(dir, ec);
  }

  // The child's report line, or what went wrong reading it.
  [[nodiscard]] std::string report() const { return read_line(child->read_fd(), 60s); }
};

TEST(tensor_parallel_processes, two_rank_processes_over_a_unix_socket_match_one_rank) {
  const auto reqs = requests();
  auto whole_engine = tp_engine(model_name, models::run_options{});
  ASSERT_NE(whole_engine, nullptr);
  auto whole = engine::run_to_completion(*whole_engine, reqs);
  ASSERT_TRUE(whole.has_value()) << whole.error().message();

  rank_zero zero("run");
  ASSERT_NE(zero.comm, nullptr);
  models::run_options run;
  run.tensor_parallel = zero.comm;
  auto e = tp_engine(model_name, run);
  ASSERT_NE(e, nullptr);
  auto got = engine::run_to_completion(*e, reqs);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  expect_pools_empty(*e);
  EXPECT_EQ(zero.report(), "ok");
  EXPECT_EQ(zero.child->exit_code(30s), std::optional<int>{0});

  ASSERT_EQ(got->size(), whole->size());
  double worst = 0;
  for (std::size_t i = 0; i < whole->size(); ++i) {
    EXPECT_EQ((*got)[i].tokens[0], (*whole)[i].tokens[0]) << "request " << i;
    ASSERT_EQ((*got)[i].logits[0].size(), (*whole)[i].logits[0].size());
    for (std::size_t s = 0; s < (*whole)[i].logits[0].size(); ++s)
      worst = std::max(worst, relative_gap((*got)[i].logits[0][s], (*whole)[i].logits[0][s]));
  }
  EXPECT_LE(worst, 1e-5);
  std::printf("%s, two rank processes: largest logit gap %.3g of the row's largest logit\n",
              model_name.c_str(), worst);
}

TEST(tensor_parallel_processes, a_rank_process_that_exits_fails_its_peers_requests_naming_it) {
  rank_zero zero("stop");
  ASSERT_NE(zero.comm, nullptr);
  const auto start = std::chrono::steady_clock::now();
  models::run_options run;
  run.tensor_parallel = zero.comm;
  auto e = tp_engine(model_name, run);
  ASSERT_NE(e, nullptr);
  std::string seen;
  auto done = engine::run_to_completion(*e, requests());
  if (!done) {
    seen = done.error().message();
  } else {
    for (const auto& c : *done) {
      for (const auto& err : c.errors)
        seen = err;
    }
  }
  EXPECT_EQ(zero.report(), "stopping");
  EXPECT_EQ(zero.child->exit_code(30s), std::optional<int>{0});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 25s);  // not the 30 s timeout
  EXPECT_NE(seen.find("rank 1 left the group"), std::string::npos) << seen;
}

}  // namespace
}  // namespace mstar::test
