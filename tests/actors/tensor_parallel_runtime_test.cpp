// The actor runtime over a tensor_parallel_lm (models/tensor_parallel_lm.hpp):
// the pool actors make one set of replicated pools, the worker drives every
// rank, and requests submitted from several threads get the unsplit
// model's greedy tokens.
#include <gtest/gtest.h>
#include <thread>

#include "actors/runtime.hpp"
#include "models/tensor_parallel_lm.hpp"
#include "tests/actors/handle_support.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::actors {
namespace {

std::unique_ptr<models::causal_lm> tp_fixture_model(int ranks) {
  models::run_options run;
  run.tensor_parallel_ranks = ranks;
  auto m = models::load_causal_lm(test::model_dir("nemotron_h_tiny_hybrid"), run);
  EXPECT_TRUE(m.has_value()) << m.error().message();
  return m ? std::move(*m) : nullptr;
}

std::vector<std::vector<engine::token_id>> tokens_from(std::unique_ptr<models::causal_lm> model) {
  std::vector<engine::request_spec> specs;
  for (int i = 0; i < 6; ++i) {
    specs.push_back(test::greedy_request(
        {5, 6, static_cast<engine::token_id>(7 + i), static_cast<engine::token_id>(20 + 3 * i)},
        12 + i));
  }
  engine::engine_config config;
  config.pools.max_num_pages = 64;
  config.pools.max_slots = 4;  // fewer than the requests: they come and go
  auto rt = runtime::start(std::move(model), config, 2);
  EXPECT_TRUE(rt.has_value()) << rt.error().message();
  if (!rt)
    return std::vector<std::vector<engine::token_id>>(specs.size());
  auto got = test::tokens_from_threads(**rt, specs, 3);
  test::expect_pools_empty(**rt);
  return got;
}

TEST(tensor_parallel_runtime, the_runtime_over_two_ranks_gives_the_unsplit_models_tokens) {
  const auto whole = tokens_from(tp_fixture_model(1));
  const auto split = tokens_from(tp_fixture_model(2));
  ASSERT_EQ(split.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_FALSE(whole[i].empty());
    EXPECT_EQ(split[i], whole[i]) << "request " << i;
  }
}

}  // namespace
}  // namespace mstar::actors
