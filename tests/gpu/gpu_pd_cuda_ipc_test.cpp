// Disaggregated prefill and decode with both nodes' pools in device memory,
// in two processes on one GPU (issue 18; CUDA IPC between two processes of
// one device is allowed, so one GPU is enough). A child process (this
// binary run again, so it starts CUDA afresh) runs a prefill node: a fixture
// model on the GPU, its node actor published over the control plane's
// mutual TLS, its transfer agent exporting the pools' arenas over CUDA IPC.
// This process runs the decode node (its pools on the same GPU, its
// transfer agent opening the child's arenas) and the router. Each request's
// pages and recurrent slot move device to device and are verified against
// the prefill node's checksums; the greedy tokens equal one engine's alone
// on the GPU. Then a byte flipped in device memory after the copy is
// caught: the adoption is given up and the prompt recomputed, with the same
// tokens.
#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <vector>

#include "actors/control_plane.hpp"
#include "actors/deployment.hpp"
#include "actors/deployment_certs.hpp"
#include "actors/node_actor.hpp"
#include "actors/runtime.hpp"
#include "actors/transfer_actor.hpp"
#include "models/load.hpp"
#include "tests/actors/handle_support.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/gpu/gpu_support.hpp"
#include "tests/support/model_fixtures.hpp"
#include "tests/support/self_child.hpp"
#include "transport/descriptor.hpp"
#include "transport/error.hpp"

// A namespace of its own: the GPU tests build as unity sources.
namespace mstar::actors::pd_cuda_ipc_gpu_test {
namespace {

using namespace std::chrono_literals;

// The child's role: "<read fd>,<write fd>,<model>".
constexpr const char* child_env = "MSTAR_PD_CUDA_IPC_CHILD";
constexpr const char* host = "127.0.0.1";
constexpr const char* deployment_name = "gpu-pd-test";
constexpr const char* secret = "gpu pd test: not a real secret";

// One line per message over a pipe end; reads bounded by a deadline.
bool write_line(int fd, std::string text) {
  text += '\n';
  return test::write_all(fd, text);
}

std::optional<std::string> read_line(int fd, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::string line;
  for (;;) {
    char c = 0;
    if (!test::read_exact(fd, &c, 1, until))
      return std::nullopt;
    if (c == '\n')
      return line;
    line += c;
  }
}

// The fixture `model` on the GPU (device 0 of this process).
std::unique_ptr<models::causal_lm> load_on_gpu(const std::string& model) {
  models::run_options run;
  run.device = "cuda";
  auto m = models::load_causal_lm(test::model_dir(model), run);
  EXPECT_TRUE(m.has_value()) << m.error().message();
  return m ? std::move(*m) : nullptr;
}

// Sends an exit to each actor when it goes out of scope: declared right
// after the actor system, so a failed assertion cannot leave the system's
// destructor waiting on a node or transfer actor forever.
struct exits_at_scope_end {
  std::vector<caf::actor> actors;
  exits_at_scope_end() = default;
  exits_at_scope_end(const exits_at_scope_end&) = delete;
  exits_at_scope_end& operator=(const exits_at_scope_end&) = delete;
  ~exits_at_scope_end() {
    for (const auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

// A node's control-plane credential, derived from the test's secret as a
// node in secret mode derives it; kept alive with the actor system.
std::optional<derived_credentials> credential_of(const std::string& name) {
  auto made = derive_node_credentials(secret, deployment_name, {name, {host}});
  EXPECT_TRUE(static_cast<bool>(made)) << caf::to_string(made.error());
  if (!made)
    return std::nullopt;
  return std::move(*made);
}

// A transfer agent over `rt`'s pools (tcp over loopback for the UCX
// worker's address; device pools go over CUDA IPC) and its descriptors.
caf::expected<std::pair<transfer_actor, std::vector<std::string>>> start_transfer(
    caf::actor_system& sys, runtime& rt, const std::string& name) {
  auto [regions, keep] = rt.pool_memory();
  transfer_setup setup;
  setup.agent.name = name;
  setup.agent.ucx.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  setup.regions = regions;
  setup.keep_alive = keep;
  auto t = spawn_transfer_actor(sys, std::move(setup));
  if (!t)
    return t.error();
  std::vector<std::string> arenas;
  caf::error failed;
  caf::scoped_actor self{sys};
  self->request(*t, 10s, describe_atom_v)
      .receive([&](std::vector<std::string>& a) { arenas = std::move(a); },
               [&](caf::error& e) { failed = std::move(e); });
  if (failed)
    return failed;
  return std::make_pair(*t, std::move(arenas));
}

// The prefill node of the child process: sends "port <n>" (or "error
// <why>") and serves until the parent writes "done". Empty on success.
std::string run_prefill_node(int read_fd, int write_fd, const std::string& model) {
  auto creds = credential_of("prefill-0");
  if (!creds)
    return "cannot derive the prefill node's credential";
  caf::actor_system_config cfg;
  runtime::add_message_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (auto err = configure_node(cfg, creds->credentials()))
    return "the control plane: " + caf::to_string(err);
  caf::actor_system sys{cfg};
  exits_at_scope_end stops;
  auto m = load_on_gpu(model);
  if (!m)
    return "cannot load " + model + " on the GPU";
  auto rt = runtime::start_in(sys, std::move(m), {});
  if (!rt)
    return rt.error().message();
  auto parts = node_parts_of(**rt, "prefill-0", "prefill");
  auto t = start_transfer(sys, **rt, "prefill-0");
  if (!t)
    return "the transfer agent: " + transport::describe(t.error());
  stops.actors.push_back(caf::actor_cast<caf::actor>(t->first));
  parts.transfer = t->first;
  parts.arenas = t->second;
  auto node = spawn_node_actor(sys, std::move(parts));
  stops.actors.push_back(caf::actor_cast<caf::actor>(node));
  auto port = publish_node(sys, caf::actor_cast<caf::actor>(node), host, 0);
  if (!port)
    return "publish: " + caf::to_string(port.error());
  if (!write_line(write_fd, "port " + std::to_string(*port)))
    return "cannot write to the parent";
  const auto word = read_line(read_fd, 600s);
  (*rt)->stop();
  return word == "done" ? std::string{} : "no word from the parent within 600 s";
}

// The child process, started by `prefill_child`.
TEST(DISABLED_gpu_pd_cuda_ipc_child, runs_a_prefill_node) {
  const char* role = std::getenv(child_env);
  if (role == nullptr)
    GTEST_SKIP() << "run by gpu_pd_cuda_ipc tests as their child process only";
  int read_fd = -1;
  int write_fd = -1;
  char model[128] = {};
  ASSERT_EQ(std::sscanf(role, "%d,%d,%127s", &read_fd, &write_fd, model), 3);
  const auto why = run_prefill_node(read_fd, write_fd, model);
  if (!why.empty()) {
    (void)write_line(write_fd, "error " + why);
    ADD_FAILURE() << why;
  }
}

// This binary run again as the prefill node, with two pipes.
class prefill_child {
 public:
  explicit prefill_child(const std::string& model)
      : child_{child_env, model, "DISABLED_gpu_pd_cuda_ipc_child.runs_a_prefill_node"} {}

  /// The port the child's node listens on, or nothing (the failure added).
  std::optional<std::uint16_t> port() const {
    const auto line = read_line(child_.read_fd(), 300s);
    if (!line) {
      ADD_FAILURE() << "the prefill child sent no port within 300 s (its output is above)";
      return std::nullopt;
    }
    if (line->rfind("port ", 0) != 0) {
      ADD_FAILURE() << "the prefill child failed: " << *line;
      return std::nullopt;
    }
    return static_cast<std::uint16_t>(std::stoi(line->substr(5)));
  }
  /// Tells the child to stop; its exit code, or nothing by `timeout`.
  std::optional<int> stop(std::chrono::milliseconds timeout) {
    (void)write_line(child_.write_fd(), "done");
    return child_.exit_code(timeout);
  }

 private:
  test::self_child child_;
};

std::vector<engine::token_id> pd_prompt(int len, engine::token_id start) {
  std::vector<engine::token_id> p;
  for (int i = 0; i < len; ++i)
    p.push_back(start + static_cast<engine::token_id>(i * 13 % 150));
  return p;
}

// Each request's greedy tokens on one engine alone on the GPU, one request
// at a time (as the P/D run takes them: the same batch shapes).
std::vector<std::vector<engine::token_id>> colocated(
    const std::string& model, const std::vector<engine::request_spec>& specs) {
  std::vector<std::vector<engine::token_id>> out;
  auto rt = runtime::start(load_on_gpu(model), {});
  EXPECT_TRUE(rt.has_value()) << rt.error().message();
  if (!rt)
    return out;
  for (const auto& s : specs) {
    auto h = (*rt)->submit(s);
    out.push_back(test::tokens_of(test::read_all(h)));
  }
  (*rt)->stop();
  return out;
}

class gpu_pd_cuda_ipc : public testing::TestWithParam<std::string> {};

TEST_P(gpu_pd_cuda_ipc,
       decode_adopts_device_pages_and_slots_over_cuda_ipc_with_one_engines_tokens) {
  MSTAR_REQUIRE_GPU();
  const std::string model = GetParam();
  std::vector<engine::request_spec> specs;
  for (int i = 0; i < 5; ++i)
    specs.push_back(test::greedy_request(pd_prompt(9 + 11 * i, 30 + i), 8));
  const auto expected = colocated(model, specs);
  ASSERT_EQ(expected.size(), specs.size());

  prefill_child child{model};
  const auto port = child.port();
  ASSERT_TRUE(port.has_value());
  {
    auto creds = credential_of("decode-0");
    ASSERT_TRUE(creds.has_value());
    caf::actor_system_config cfg;
    runtime::add_message_types(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    ASSERT_FALSE(configure_node(cfg, creds->credentials()));
    caf::actor_system sys{cfg};
    exits_at_scope_end stops;
    auto rt = runtime::start_in(sys, load_on_gpu(model), {});
    ASSERT_TRUE(rt.has_value()) << rt.error().message();
    // The decode node's pools are device arenas, and say so to the agent.
    auto [regions, keep] = (*rt)->pool_memory();
    const bool recurrent = !regions.blocks.empty();
    EXPECT_EQ(regions.kv_memory, transport::memory_kind::cuda);
    for (const auto m : regions.block_memory)
      EXPECT_EQ(m, transport::memory_kind::cuda);
    auto t = start_transfer(sys, **rt, "decode-0");
    ASSERT_TRUE(static_cast<bool>(t)) << transport::describe(t.error());
    stops.actors.push_back(caf::actor_cast<caf::actor>(t->first));
    for (const auto& text : t->second) {  // exported over CUDA IPC
      auto d = transport::descriptor_from_json(text);
      ASSERT_TRUE(static_cast<bool>(d)) << text;
      EXPECT_EQ(d->memory, transport::memory_kind::cuda) << d->layout.name;
      EXPECT_TRUE(d->cuda_ipc.has_value()) << d->layout.name;
    }
    auto parts = node_parts_of(**rt, "decode-0", "decode");
    parts.transfer = t->first;
    parts.arenas = t->second;
    auto decode = spawn_node_actor(sys, std::move(parts));
    stops.actors.push_back(caf::actor_cast<caf::actor>(decode));
    auto d = deployment::start_in(sys);
    auto remote = connect_node(sys, host, *port, 30s);
    ASSERT_TRUE(static_cast<bool>(remote)) << caf::to_string(remote.error());
    auto joined = d->join(caf::actor_cast<node_actor>(*remote), 10s);
    ASSERT_TRUE(joined.has_value()) << joined.error().message();
    joined = d->join(decode, 10s);
    ASSERT_TRUE(joined.has_value()) << joined.error().message();

    // The first four move: pages and slots device to device, verified.
    for (std::size_t i = 0; i < 4; ++i) {
      auto h = d->submit(specs[i]);
      EXPECT_EQ(test::tokens_of(test::read_all(h)), expected[i]) << "request " << i;
    }
    auto s = d->stats();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->handoffs, 4);
    EXPECT_EQ(s->adopted, 4);  // no prompt recomputed
    auto n = d->node_stats();
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->transfers.pulls, 4);
    EXPECT_EQ(n->transfers.device_pulls, 4);  // over CUDA IPC
    EXPECT_EQ(n->transfers.mapped_pulls, 0);
    EXPECT_EQ(n->transfers.failed, 0);
    EXPECT_GT(n->transfers.pages_fetched, 0);
    EXPECT_EQ(n->transfers.slots_fetched, recurrent ? 4 : 0);
    EXPECT_GT(n->transfers.bytes, 0);
    auto dec = (*rt)->stats();
    ASSERT_TRUE(dec.has_value());
    EXPECT_EQ(dec->generated_tokens, 4 * 7);  // no prompt here: one token each past it

    // A byte flipped in device memory after the copy is caught by the
    // checksums: the adoption is undone and the prompt recomputed here.
    ::setenv("MSTAR_TEST_CORRUPT_TRANSFER", "1", 1);
    auto h = d->submit(specs[4]);
    const auto tokens = test::tokens_of(test::read_all(h));
    ::unsetenv("MSTAR_TEST_CORRUPT_TRANSFER");
    EXPECT_EQ(tokens, expected[4]) << "the corrupted transfer's request";
    s = d->stats();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->handoffs, 5);
    EXPECT_EQ(s->adopted, 4);
    n = d->node_stats();
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->transfers.failed, 1);
    EXPECT_EQ(n->transfers.pulls, 4);

    auto ok = (*rt)->check_pools();  // reads the device: freed slots are zero
    EXPECT_TRUE(ok.has_value()) << ok.error().message();
    d.reset();
    (*rt)->stop();
  }
  EXPECT_EQ(child.stop(60s), std::optional<int>{0}) << "the prefill child's exit code";
}

INSTANTIATE_TEST_SUITE_P(fixtures, gpu_pd_cuda_ipc,
                         testing::Values("nemotron_h_tiny_hybrid", "qwen3_5_tiny_text"));

}  // namespace
}  // namespace mstar::actors::pd_cuda_ipc_gpu_test
