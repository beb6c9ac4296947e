// Tensor-parallel ranks as processes serving requests (actors/rank_processes.hpp):
// the actor runtime over the conductor's model, rank 1 of the hybrid
// fixture a follower process (this binary run again), requests submitted
// from several threads as they come and go; the tokens must be the unsplit
// model's. A follower killed mid-request fails the node's requests naming
// it, at once; strangers, a wrong token, and pools that differ are refused
// with the reason; malformed frames are parse errors.
#include "actors/rank_processes.hpp"

#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <thread>
#include <unistd.h>

#include "actors/rank_wire.hpp"
#include "actors/runtime.hpp"
#include "models/load.hpp"
#include "parallel/socket_group.hpp"
#include "tests/actors/handle_support.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/engine/tensor_parallel_support.hpp"
#include "tests/support/self_child.hpp"

namespace mstar::actors {
namespace {

using namespace std::chrono_literals;

constexpr const char* child_env = "MSTAR_TEST_RANK_FOLLOWER";
constexpr const char* child_test = "rank_processes.DISABLED_follower";
const std::string model_name = "nemotron_h_tiny_hybrid";

rank_loader fixture_loader(const std::string& name = model_name) {
  return [name](const models::run_options& run) -> result<std::unique_ptr<models::causal_lm>> {
    if (name.starts_with("random:")) {
      auto m = models::nemotron_h_model::random(test::random_tp_config(name), 5, run);
      if (!m)
        return m.error();
      return std::unique_ptr<models::causal_lm>(std::move(*m));
    }
    return models::load_causal_lm(test::model_dir(name), run);
  };
}

// A fresh directory for the sockets, removed at the end.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mstar-ranks-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      ADD_FAILURE() << "mkdtemp failed";
    else
      path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    if (!path.empty())
      std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] std::string socket(const std::string& name) const {
    return "unix:" + (path / name).string();
  }
};

// The follower's body in the child: "<conductor>|<group>|<token>" from the
// parent; its outcome a line on the pipe ("ok", or the error).
TEST(rank_processes, DISABLED_follower) {
  const auto role = test::child_side_of(child_env);
  if (!role)
    GTEST_SKIP() << "the rank-process tests' child; run by them only";
  const auto parts = test::split_role(role->payload);
  ASSERT_EQ(parts.size(), 3U) << role->payload;
  const std::string& conductor = parts[0];
  const std::string& group = parts[1];
  const std::string& token = parts[2];
  const int write_fd = role->write_fd;
  auto served =
      serve_as_follower({conductor, 1, 2, token, 30s}, models::run_options{},
                        parallel::socket_process_groups(group, token, 30s), fixture_loader());
  (void)test::write_all(write_fd, (served ? std::string{"ok"} : served.error().message()) + "\n");
  ASSERT_TRUE(served.has_value()) << served.error().message();
}

// The conductor's side of one test: listening, the follower process
// started with its address, the model once it joined.
struct conductor_side {
  temp_dir dir;
  std::string token = "ranks-test-" + std::to_string(::getpid());
  std::unique_ptr<test::self_child> child;
  std::unique_ptr<models::causal_lm> model;

  conductor_side() {
    auto c = rank_conductor::listen({dir.socket("conductor.sock"), 2, token, 30s});
    if (!c) {
      ADD_FAILURE() << c.error().message();
      return;
    }
    const auto group = dir.socket("group.sock");
    child = std::make_unique<test::self_child>(child_env, c->address() + "|" + group + "|" + token,
                                               child_test);
    auto m = c->accept_all(models::run_options{},
                           parallel::socket_process_groups(group, token, 30s), fixture_loader());
    if (!m) {
      ADD_FAILURE() << m.error().message();
      return;
    }
    model = std::move(*m);
  }

  // The follower's report line, or what went wrong reading it.
  [[nodiscard]] std::string report() const { return test::read_line(child->read_fd(), 60s); }
};

std::vector<engine::request_spec> mixed_requests() {
  std::vector<engine::request_spec> specs;
  for (int i = 0; i < 6; ++i) {
    specs.push_back(test::greedy_request(
        {5, 6, static_cast<engine::token_id>(7 + i), static_cast<engine::token_id>(20 + 3 * i)},
        12 + i));
  }
  // One prompt twice: the second finds the first's pages in the prefix cache.
  specs.push_back(test::greedy_request({9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7, 6, 5, 4, 3, 2}, 6));
  specs.push_back(test::greedy_request({9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7, 6, 5, 4, 3, 2}, 6));
  return specs;
}

// The runtime over `model`, requests submitted from three threads with
// fewer slots than requests (they come and go); each request's tokens.
std::vector<std::vector<engine::token_id>> serve(std::unique_ptr<models::causal_lm> model) {
  const auto specs = mixed_requests();
  engine::engine_config config;
  config.pools.max_num_pages = 64;
  config.pools.max_slots = 4;
  auto rt = runtime::start(std::move(model), config, 2);
  EXPECT_TRUE(rt.has_value()) << rt.error().message();
  if (!rt)
    return std::vector<std::vector<engine::token_id>>(specs.size());
  auto got = test::tokens_from_threads(**rt, specs, 3);
  test::expect_pools_empty(**rt);
  return got;
}

TEST(rank_processes, the_runtime_over_a_follower_process_gives_the_unsplit_models_tokens) {
  auto whole_model = fixture_loader()(models::run_options{});
  ASSERT_TRUE(whole_model.has_value()) << whole_model.error().message();
  const auto whole = serve(std::move(*whole_model));

  conductor_side side;
  ASSERT_NE(side.model, nullptr);
  EXPECT_GT(side.model->num_parameters(), 0);
  const auto split = serve(std::move(side.model));  // the runtime ends: the follower is told
  EXPECT_EQ(side.report(), "ok");
  EXPECT_EQ(side.child->exit_code(30s), std::optional<int>{0});
  ASSERT_EQ(split.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_FALSE(whole[i].empty());
    EXPECT_EQ(split[i], whole[i]) << "request " << i;
  }
}

TEST(rank_processes, a_killed_follower_fails_the_nodes_requests_naming_it) {
  conductor_side side;
  ASSERT_NE(side.model, nullptr);
  engine::engine_config config;
  config.pools.max_num_pages = 64;
  config.pools.max_slots = 4;
  auto rt = runtime::start(std::move(side.model), config, 2);
  ASSERT_TRUE(rt.has_value()) << rt.error().message();
  auto h = (*rt)->submit(test::greedy_request({5, 6, 7}, 100000));
  auto first = h.next_for(30s);
  ASSERT_TRUE(first.has_value());
  const auto start = std::chrono::steady_clock::now();
  side.child->kill_now();
  auto rest = test::read_all(h, 20s);
  ASSERT_FALSE(rest.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);  // not the group's 30 s timeout
  const auto& last = rest.back();
  ASSERT_TRUE(last.finished.has_value());
  EXPECT_EQ(*last.finished, engine::finish_reason::error);
  EXPECT_NE(last.error.find("rank 1"), std::string::npos) << last.error;
  std::printf(
      "killed follower: the request failed %.0f ms later: %s\n",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
      last.error.c_str());
  // Later requests fail too, with the same cause, rather than hang.
  auto again = (*rt)->submit(test::greedy_request({5, 6}, 4));
  auto after = test::read_all(again, 20s);
  ASSERT_FALSE(after.empty());
  EXPECT_NE(after.back().error.find("rank 1"), std::string::npos) << after.back().error;
  EXPECT_EQ(side.child->exit_code(10s), std::optional<int>{-SIGKILL});
}

TEST(rank_processes, a_follower_with_the_wrong_token_is_refused_with_the_reason) {
  temp_dir dir;
  auto c = rank_conductor::listen({dir.socket("conductor.sock"), 2, "right", 2s});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  std::optional<error> follower_error;
  std::thread stranger([&] {
    auto served = serve_as_follower(
        {c->address(), 1, 2, "wrong", 2s}, models::run_options{},
        parallel::socket_process_groups(dir.socket("g.sock"), "wrong", 2s), fixture_loader());
    if (!served)
      follower_error = served.error();
  });
  auto m = c->accept_all(models::run_options{},
                         parallel::socket_process_groups(dir.socket("g.sock"), "right", 2s),
                         fixture_loader());
  stranger.join();
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message().find("rank 1 did not join"), std::string::npos)
      << m.error().message();
  EXPECT_NE(m.error().message().find("wrong token"), std::string::npos) << m.error().message();
  ASSERT_TRUE(follower_error.has_value());
  EXPECT_NE(follower_error->message().find("refused rank 1: wrong token"), std::string::npos)
      << follower_error->message();
}

TEST(rank_processes, pools_that_differ_between_ranks_refuse_the_runtime_naming_both) {
  temp_dir dir;
  auto c = rank_conductor::listen({dir.socket("conductor.sock"), 2, "t", 10s});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  const auto group = dir.socket("g.sock");
  std::optional<error> follower_error;
  std::thread follower([&] {
    // Rank 1 loads another model: its pools' shape is not rank 0's.
    auto served = serve_as_follower({c->address(), 1, 2, "t", 10s}, models::run_options{},
                                    parallel::socket_process_groups(group, "t", 10s),
                                    fixture_loader("random:wide"));
    if (!served)
      follower_error = served.error();
  });
  auto m = c->accept_all(models::run_options{}, parallel::socket_process_groups(group, "t", 10s),
                         fixture_loader());
  ASSERT_TRUE(m.has_value()) << m.error().message();
  auto rt = runtime::start(std::move(*m), engine::engine_config{}, 2);
  ASSERT_FALSE(rt.has_value());
  EXPECT_NE(rt.error().message().find("rank 1's pools differ from rank 0's"), std::string::npos)
      << rt.error().message();
  follower.join();  // the model went with the refused runtime: the follower was told to leave
  EXPECT_FALSE(follower_error.has_value()) << follower_error->message();
}

TEST(rank_processes, malformed_frames_and_payloads_are_parse_errors) {
  std::vector<char> cut = ranks::encode(*std::make_unique<ranks::hello_wire>());
  cut.pop_back();
  auto h = ranks::decode<ranks::hello_wire>(cut, "hello");
  ASSERT_FALSE(h.has_value());
  EXPECT_EQ(h.error().code(), errc::parse_error);
  EXPECT_NE(h.error().message().find("malformed hello"), std::string::npos);

  auto extra = ranks::encode(*std::make_unique<ranks::hello_wire>());
  extra.push_back('x');
  EXPECT_FALSE(ranks::decode<ranks::hello_wire>(extra, "hello").has_value());

  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  parallel::internal::unique_fd a(fds[0]), b(fds[1]);
  const char junk[16] = "not a frame....";
  ASSERT_EQ(::write(a.get(), junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
  auto f = ranks::read_frame(b.get(), ranks::after(1s), "a peer");
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.error().code(), errc::parse_error);
  EXPECT_NE(f.error().message().find("not a rank stream"), std::string::npos);

  // A frame that announces more than any request carries is refused before
  // anything is allocated for it.
  ranks::frame_header big;
  big.op = static_cast<std::uint8_t>(ranks::op::forward);
  big.bytes = ranks::max_payload + 1;
  ASSERT_EQ(::write(a.get(), &big, sizeof big), static_cast<ssize_t>(sizeof big));
  auto g = ranks::read_frame(b.get(), ranks::after(1s), "a peer");
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().message().find("at most"), std::string::npos) << g.error().message();

  // A step's call survives the trip whole: rows, both plans, draws, loopback.
  ranks::step_call call;
  call.rows = {{"a", {1, 2, 3}}, {"b", {4}}};
  call.kv.emplace();
  call.kv->labels["main"].kv_indices = {3, 4, 5};
  call.recurrent.emplace();
  call.recurrent->labels["main"].slot_indices = {1, 2};
  call.draws = {{0.5F, 3, 0.9F, 7, 2}};
  call.loopback = {-1, 0};
  auto back = ranks::decode<ranks::step_call>(ranks::encode(call), "step");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back->rows[0].tokens, call.rows[0].tokens);
  EXPECT_EQ(back->kv->labels["main"].kv_indices, call.kv->labels["main"].kv_indices);
  EXPECT_EQ(back->recurrent->labels["main"].slot_indices,
            call.recurrent->labels["main"].slot_indices);
  EXPECT_EQ(back->draws[0].seed, 7U);
  EXPECT_EQ(back->draws[0].top_k, 3);
  EXPECT_EQ(back->loopback, call.loopback);
}

}  // namespace
}  // namespace mstar::actors
