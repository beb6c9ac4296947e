// Tensor parallelism of the CUDA Nemotron-H (models/cuda/nemotron_h_cuda_parallel.cpp)
// on one GPU: every rank a thread with its own engine, model part, stream
// and pools on cuda:0, the collectives through the in-process group
// (parallel/local_group.hpp, staged through pinned host memory). Two ranks
// on one device prove the sharded CUDA forward, not the speed: greedy
// tokens must equal one rank's on the same GPU (and transformers' on the
// fixtures), logits within a normalised budget; float32 and bfloat16
// weights; a rank that stops fails its peer's requests naming it, well
// inside the group's timeout. NCCL refuses two ranks on one device, so the
// NCCL group waits for a two-GPU machine.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <optional>
#include <thread>

#ifdef MSTAR_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "parallel/nccl_group.hpp"
#endif
#include "tests/engine/tensor_parallel_support.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::test::gpu {
namespace {

using namespace std::chrono_literals;

// Rank options on CUDA: `device`, `dtype`, no group yet.
models::run_options cuda_run(mstar::dtype dtype, const std::string& device = "cuda") {
  models::run_options run;
  run.device = device;
  run.dtype = dtype;
  return run;
}

std::vector<engine::request_spec> requests_for(const std::string& name) {
  std::vector<engine::request_spec> out;
  if (name == "random:100m") {  // a short prompt and one past two pages
    std::vector<engine::token_id> longer;
    for (int i = 0; i < 300; ++i)
      longer.push_back(static_cast<engine::token_id>(3 + (i * 97) % 30000));
    out.push_back(greedy_request({5, 77, 300, 12}, 8, true));
    out.push_back(greedy_request(std::move(longer), 8, true));
    return out;
  }
  for (const auto& p : load_expected(name))
    out.push_back(greedy_request(p.prompt, 8, true));
  return out;
}

// `budget`: the largest logit gap between the ranks and one rank, over the
// row's largest logit. bf16 GEMMs of a part sum in another order than the
// whole's, so bf16 gets a wider budget and its tokens may part at a near tie.
// `nccl`: the ranks on cuda:0 and cuda:1 over a NCCL group; else both on
// cuda:0 over the in-process group.
void expect_two_ranks_match_one(const std::string& name, mstar::dtype dtype, double budget,
                                bool nccl = false) {
  MSTAR_REQUIRE_GPU();
  const auto requests = requests_for(name);
  ASSERT_FALSE(requests.empty());
  auto one = tp_engine(name, cuda_run(dtype));
  ASSERT_NE(one, nullptr);
  auto whole = engine::run_to_completion(*one, requests);
  ASSERT_TRUE(whole.has_value()) << whole.error().message();
  const auto parameters = one->model().num_parameters();
  one.reset();

  std::vector<models::run_options> runs;
  if (nccl) {
#ifdef MSTAR_HAVE_NCCL
    auto id = parallel::nccl_group::make_unique_id();
    ASSERT_TRUE(id.has_value()) << id.error().message();
    std::array<std::optional<result<std::unique_ptr<parallel::nccl_group>>>, 2> made;
    std::vector<std::thread> joining;  // ranks of a group form together
    for (int r = 0; r < 2; ++r) {
      joining.emplace_back([r, &id, &made] {
        made[static_cast<std::size_t>(r)] = parallel::nccl_group::create(r, 2, *id, r, 60s);
      });
    }
    for (auto& t : joining)
      t.join();
    for (std::size_t r = 0; r < made.size(); ++r) {
      auto& g = made[r];
      ASSERT_TRUE(g && g->has_value()) << (g ? g->error().message() : "no result");
      runs.push_back(cuda_run(dtype, fmt::format("cuda:{}", r)));
      runs.back().tensor_parallel = std::move(**g);
    }
#endif
  } else {
    runs = local_ranks(cuda_run(dtype, "cuda:0"), 2, 60s);
  }
  std::vector<std::int64_t> counts;
  const auto ranks = run_ranks(name, runs, requests, &counts);
  for (const auto c : counts)
    EXPECT_LT(c, parameters);  // each rank holds a part
  const bool fixture = name != "random:100m";
  const auto expected = fixture ? load_expected(name) : std::vector<fixture_prompt>{};
  double worst = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    ASSERT_EQ(ranks[r].size(), whole->size());
    for (std::size_t i = 0; i < whole->size(); ++i) {
      const auto& want = (*whole)[i];
      const auto& got = ranks[r][i];
      ASSERT_EQ(got.tokens.size(), 1U) << got.id;
      if (dtype == mstar::dtype::float32) {
        EXPECT_EQ(got.tokens[0], want.tokens[0]) << "rank " << r << " request " << i;
        if (fixture) {  // transformers' greedy tokens, as far as the fixture has them
          const auto& ref = expected[i].generated;
          const auto k = std::min(ref.size(), got.tokens[0].size());
          EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(k),
                                 got.tokens[0].begin()))
              << "rank " << r << " request " << i;
        }
      }
      // Logits compared up to the first step whose token differs.
      const auto& wt = want.tokens[0];
      const auto& gt = got.tokens[0];
      std::size_t steps = 0;
      while (steps < wt.size() && steps < gt.size() && wt[steps] == gt[steps])
        ++steps;
      steps = std::min(steps + 1, std::min(want.logits[0].size(), got.logits[0].size()));
      ASSERT_GT(steps, 0U);
      for (std::size_t s = 0; s < steps; ++s)
        worst = std::max(worst, relative_gap(got.logits[0][s], want.logits[0][s]));
      if (dtype != mstar::dtype::float32) {
        EXPECT_GE(steps, 2U) << "rank " << r << " request " << i << ": parted at the first token";
      }
    }
  }
  EXPECT_LE(worst, budget);
  std::printf(
      "%s %s at tensor parallel 2: largest logit gap %.3g of the row's "
      "largest logit (budget %.3g)%s\n",
      name.c_str(), std::string(to_string(dtype)).c_str(), worst, budget,
      nccl ? ", NCCL across two GPUs" : "");
}

TEST(gpu_tensor_parallel, two_ranks_of_the_hybrid_fixture_match_one_rank_f32) {
  expect_two_ranks_match_one("nemotron_h_tiny_hybrid", mstar::dtype::float32, 1e-5);
}

TEST(gpu_tensor_parallel, two_ranks_of_the_attention_fixture_match_one_rank_f32) {
  expect_two_ranks_match_one("nemotron_h_tiny_attn", mstar::dtype::float32, 1e-5);
}

TEST(gpu_tensor_parallel, two_ranks_of_a_100m_random_model_match_one_rank_f32) {
  expect_two_ranks_match_one("random:100m", mstar::dtype::float32, 1e-4);
}

TEST(gpu_tensor_parallel, two_ranks_of_a_100m_random_model_match_one_rank_bf16) {
  expect_two_ranks_match_one("random:100m", mstar::dtype::bfloat16, 5e-2);
}

// Two GPUs: each rank on its own device, the collectives through NCCL on
// the device buffers (no host staging).
TEST(gpu_tensor_parallel, two_nccl_ranks_on_two_gpus_match_one_rank) {
  MSTAR_REQUIRE_GPU();
#ifndef MSTAR_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL";
#else
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2)
    GTEST_SKIP() << "needs 2 CUDA devices (one NCCL rank each), found " << count;
  expect_two_ranks_match_one("nemotron_h_tiny_hybrid", mstar::dtype::float32, 1e-5, true);
  expect_two_ranks_match_one("random:100m", mstar::dtype::bfloat16, 5e-2, true);
#endif
}

// The launchers' way: one engine over a tensor_parallel_lm whose group the
// NCCL maker forms (models::run_options::tensor_parallel_groups). Ranks that
// would share a device get no NCCL group (NCCL refuses them): the maker
// says so without touching NCCL, and the wrapper keeps its in-process
// group. With two GPUs, rank r on cuda:r over NCCL gives one rank's tokens.
TEST(gpu_tensor_parallel, the_nccl_maker_serves_one_engine_over_ranks_on_distinct_gpus) {
  MSTAR_REQUIRE_GPU();
#ifndef MSTAR_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL";
#else
  const auto maker = parallel::nccl_group_maker();
  for (const std::vector<std::string>& shared :
       {std::vector<std::string>{"cuda:0", "cuda:0"}, std::vector<std::string>{"cuda", "cuda"},
        std::vector<std::string>{"cpu", "cpu"}}) {
    auto made = maker(2, shared, 5s);
    ASSERT_TRUE(made.has_value()) << made.error().message();
    EXPECT_FALSE(made->has_value()) << shared[0];
  }
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2)
    GTEST_SKIP() << "needs 2 CUDA devices (one NCCL rank each), found " << count;
  const std::string name = "nemotron_h_tiny_hybrid";
  const auto requests = requests_for(name);
  auto one = tp_engine(name, cuda_run(mstar::dtype::float32));
  ASSERT_NE(one, nullptr);
  auto whole = engine::run_to_completion(*one, requests);
  ASSERT_TRUE(whole.has_value()) << whole.error().message();
  one.reset();
  auto run = cuda_run(mstar::dtype::float32);
  run.tensor_parallel_ranks = 2;
  run.tensor_parallel_groups = maker;
  auto split = tp_engine(name, run);
  ASSERT_NE(split, nullptr);
  auto got = engine::run_to_completion(*split, requests);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  ASSERT_EQ(got->size(), whole->size());
  for (std::size_t i = 0; i < whole->size(); ++i) {
    EXPECT_TRUE((*got)[i].errors[0].empty()) << (*got)[i].errors[0];
    EXPECT_EQ((*got)[i].tokens[0], (*whole)[i].tokens[0]) << "request " << i;
  }
#endif
}

TEST(gpu_tensor_parallel, a_rank_that_stops_fails_its_peers_requests_naming_it) {
  MSTAR_REQUIRE_GPU();
  expect_a_stopped_rank_fails_its_peer(cuda_run(mstar::dtype::float32),
                                       requests_for("nemotron_h_tiny_hybrid"));
}

}  // namespace
}  // namespace mstar::test::gpu
