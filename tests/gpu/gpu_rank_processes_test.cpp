// Tensor-parallel ranks as processes on GPUs (actors/rank_processes.hpp):
// the actor runtime (overlap schedule: launch / finish through the
// followers' streams) over the conductor's model, rank 1 of the hybrid
// fixture in a follower process (this binary run again). Rank r runs on
// cuda:r when there are two GPUs, else both share cuda:0. The data group is
// a socket group (host memory, the CUDA model stages its collectives
// through pinned memory), or NCCL between two GPUs where built with it.
// float32 weights: the greedy tokens must equal one rank's on the GPU.
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <thread>
#include <unistd.h>

#include "actors/rank_processes.hpp"
#include "actors/runtime.hpp"
#include "kernels/device.hpp"
#include "models/load.hpp"
#include "models/tensor_parallel_lm.hpp"
#include "parallel/socket_group.hpp"
#include "tests/actors/handle_support.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/gpu/gpu_support.hpp"
#include "tests/support/self_child.hpp"
#ifdef MSTAR_HAVE_NCCL
#include "parallel/nccl_group.hpp"
#endif

namespace mstar::test::gpu {
namespace {

using namespace std::chrono_literals;

constexpr const char* child_env = "MSTAR_TEST_GPU_RANK_FOLLOWER";
constexpr const char* child_test = "gpu_rank_processes.DISABLED_follower";
const std::string model_name = "nemotron_h_tiny_hybrid";

models::run_options rank_run(int rank) {
  models::run_options run;
  run.device = models::rank_devices("cuda", 2)[static_cast<std::size_t>(rank)];
  run.dtype = mstar::dtype::float32;
  return run;
}

actors::rank_loader loader() {
  return [](const models::run_options& run) {
    return models::load_causal_lm(model_dir(model_name), run);
  };
}

// "socket" or "nccl", with the socket group's address for the first.
actors::rank_group_factory groups(const std::string& kind, const std::string& address,
                                  const std::string& token) {
#ifdef MSTAR_HAVE_NCCL
  if (kind == "nccl") {
    return parallel::nccl_process_groups(
        [](int rank, int) { return models::parse_device(rank_run(rank).device); }, 60s);
  }
#endif
  return parallel::socket_process_groups(address, token, 60s);
}

// The follower in the child: "<conductor>|<group kind>|<group address>|<token>".
TEST(gpu_rank_processes, DISABLED_follower) {
  const auto role = child_side_of(child_env);
  if (!role)
    GTEST_SKIP() << "the GPU rank-process tests' child; run by them only";
  const auto parts = split_role(role->payload);
  ASSERT_EQ(parts.size(), 4U) << role->payload;
  const int write_fd = role->write_fd;
  auto served = actors::serve_as_follower({parts[0], 1, 2, parts[3], 60s}, rank_run(1),
                                          groups(parts[1], parts[2], parts[3]), loader());
  (void)write_all(write_fd, (served ? std::string{"ok"} : served.error().message()) + "\n");
  ASSERT_TRUE(served.has_value()) << served.error().message();
}

std::vector<std::vector<engine::token_id>> serve(std::unique_ptr<models::causal_lm> model) {
  std::vector<engine::request_spec> specs;
  for (const auto& p : load_expected(model_name))
    specs.push_back(greedy_request(p.prompt, 12));
  specs.push_back(greedy_request({5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, 10));
  engine::engine_config config;
  config.pools.max_num_pages = 64;
  config.pools.max_slots = 3;  // fewer than the requests: they come and go
  auto rt = actors::runtime::start(std::move(model), config, 2);
  EXPECT_TRUE(rt.has_value()) << rt.error().message();
  if (!rt)
    return std::vector<std::vector<engine::token_id>>(specs.size());
  auto got = tokens_from_threads(**rt, specs, 2);
  expect_pools_empty(**rt);
  return got;
}

void expect_rank_processes_match_one_rank(const std::string& kind) {
  MSTAR_REQUIRE_GPU();
  auto whole_model = loader()(rank_run(0));
  ASSERT_TRUE(whole_model.has_value()) << whole_model.error().message();
  const auto whole = serve(std::move(*whole_model));

  std::string dir = (std::filesystem::temp_directory_path() / "mstar-gpu-ranks-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string token = "gpu-ranks-" + std::to_string(::getpid());
  const std::string group = "unix:" + dir + "/group.sock";
  auto c = actors::rank_conductor::listen({"unix:" + dir + "/conductor.sock", 2, token, 60s});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  self_child child(child_env, c->address() + "|" + kind + "|" + group + "|" + token, child_test);
  auto model = c->accept_all(rank_run(0), groups(kind, group, token), loader());
  ASSERT_TRUE(model.has_value()) << model.error().message();
  const auto split = serve(std::move(*model));
  EXPECT_EQ(read_line(child.read_fd(), 60s), "ok");
  EXPECT_EQ(child.exit_code(30s), std::optional<int>{0});
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  ASSERT_EQ(split.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_FALSE(whole[i].empty());
    EXPECT_EQ(split[i], whole[i]) << "request " << i;
  }
  std::printf("%s over %s: rank 0 on %s, rank 1 on %s, %zu requests equal to one rank's\n",
              model_name.c_str(), kind.c_str(), rank_run(0).device.c_str(),
              rank_run(1).device.c_str(), whole.size());
}

TEST(gpu_rank_processes, a_follower_process_over_a_socket_group_matches_one_rank_f32) {
  expect_rank_processes_match_one_rank("socket");
}

TEST(gpu_rank_processes, a_follower_process_over_nccl_on_two_gpus_matches_one_rank_f32) {
  MSTAR_REQUIRE_GPU();
#ifndef MSTAR_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL";
#else
  if (kernels::query_cuda_devices().devices.size() < 2)
    GTEST_SKIP() << "needs two GPUs (NCCL refuses two ranks on one device)";
  expect_rank_processes_match_one_rank("nccl");
#endif
}

}  // namespace
}  // namespace mstar::test::gpu
