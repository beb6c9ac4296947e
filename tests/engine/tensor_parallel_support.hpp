#pragma once

// Shared by the tensor-parallel tests on the CPU (tests/engine/tensor_parallel_test.cpp)
// and on a GPU (tests/gpu/gpu_tensor_parallel_test.cpp): the models by
// name, one rank's engine, the logit gap, and the check that a rank that
// stops fails its peer's requests naming it.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parallel/local_group.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::test {

/// The random-weight Nemotron-H configs of these tests, by name: "random:100m"
/// is bench/model_bench.cpp's 100M-parameter shape (hidden 768, 12 / 4
/// heads, 24 Mamba-2 heads in 2 groups, 16 layers, vocab 32000); any other
/// ("random:wide") splits 4 ways, with a vocabulary (1001) that does not.
inline models::nemotron_h_config random_tp_config(const std::string& name) {
  models::nemotron_h_config c;
  const bool big = name == "random:100m";
  c.vocab_size = big ? 32000 : 1001;
  c.hidden_size = big ? 768 : 128;
  c.num_attention_heads = big ? 12 : 8;
  c.num_key_value_heads = 4;
  c.head_dim = big ? 64 : 16;
  c.intermediate_size = big ? 2048 : 256;
  c.mamba_num_heads = big ? 24 : 16;
  c.mamba_head_dim = big ? 64 : 16;
  c.ssm_state_size = big ? 64 : 16;
  c.n_groups = big ? 2 : 4;
  c.chunk_size = big ? 128 : 8;
  for (const char ch : std::string{big ? "M-M*M-M-M-M*M-M-" : "M*M-M*-"}) {
    c.layers.push_back(ch == 'M'   ? models::layer_kind::mamba2
                       : ch == '*' ? models::layer_kind::attention
                                   : models::layer_kind::mlp);
  }
  return c;
}

/// A local engine over model `name` (a fixture, or "random:..." drawn with
/// seed 5) loaded with `run` (device, dtype, the rank's group), with small
/// pools: several 100M-parameter engines share the host.
inline std::unique_ptr<engine::local_engine> tp_engine(const std::string& name,
                                                       const models::run_options& run) {
  result<std::unique_ptr<models::causal_lm>> model = make_error(errc::internal, "no model loaded");
  if (name.starts_with("random:")) {
    auto m = models::nemotron_h_model::random(random_tp_config(name), 5, run);
    if (m)
      model = std::unique_ptr<models::causal_lm>(std::move(*m));
    else
      model = m.error();
  } else {
    model = models::load_causal_lm(model_dir(name), run);
  }
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  engine::engine_config config;
  config.pools.max_num_pages = 256;
  config.pools.max_slots = 8;
  config.pools.checkpoint_slots = 8;
  auto e = engine::local_engine::make(std::move(*model), config);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

/// `n` copies of `base` (device, dtype), each holding its rank of a new
/// in-process group (parallel/local_group.hpp) bounded by `timeout`.
inline std::vector<models::run_options> local_ranks(const models::run_options& base, int n,
                                                    std::chrono::milliseconds timeout) {
  auto group = parallel::local_group::make(n, timeout);
  EXPECT_TRUE(group.has_value()) << group.error().message();
  std::vector<models::run_options> runs;
  if (!group)
    return runs;
  for (auto& comm : *group) {
    runs.push_back(base);
    runs.back().tensor_parallel = std::move(comm);
  }
  return runs;
}

/// Runs `requests` on one rank per entry of `runs` (each loaded with its
/// options: device, dtype, its group's communicator), a thread each, and
/// gives each rank's completions, its pools checked empty after;
/// `parameters` gets each rank's weight count.
inline std::vector<std::vector<engine::completion>> run_ranks(
    const std::string& name, const std::vector<models::run_options>& runs,
    const std::vector<engine::request_spec>& requests,
    std::vector<std::int64_t>* parameters = nullptr) {
  std::vector<std::vector<engine::completion>> out(runs.size());
  std::vector<std::int64_t> counts(runs.size(), 0);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    threads.emplace_back([r, &runs, &name, &requests, &out, &counts] {
      auto e = tp_engine(name, runs[r]);
      ASSERT_NE(e, nullptr);
      counts[r] = e->model().num_parameters();
      auto done = engine::run_to_completion(*e, requests);
      ASSERT_TRUE(done.has_value()) << done.error().message();
      expect_pools_empty(*e);
      out[r] = std::move(*done);
    });
  }
  for (auto& t : threads)
    t.join();
  if (parameters != nullptr)
    *parameters = counts;
  return out;
}

/// The largest |a - b| over a logits row, relative to the row's largest |b|.
inline double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    gap = std::max(gap, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return gap / scale;
}

/// Two ranks of the hybrid fixture loaded with `run` (device, dtype): rank 1
/// runs two steps of `requests` and leaves; rank 0's requests fail naming
/// it, well inside the group's 30 s timeout.
inline void expect_a_stopped_rank_fails_its_peer(
    const models::run_options& run, const std::vector<engine::request_spec>& requests) {
  using namespace std::chrono_literals;
  const std::string name = "nemotron_h_tiny_hybrid";
  auto group = parallel::local_group::make(2, 30s);
  ASSERT_TRUE(group.has_value());
  auto r0 = run;
  auto r1 = run;
  r0.tensor_parallel = std::move((*group)[0]);
  r1.tensor_parallel = std::move((*group)[1]);
  std::string seen;
  const auto start = std::chrono::steady_clock::now();
  std::thread survivor([&r0, &name, &requests, &seen] {
    auto e = tp_engine(name, r0);
    ASSERT_NE(e, nullptr);
    auto done = engine::run_to_completion(*e, requests);
    if (!done) {
      seen = done.error().message();
      return;
    }
    for (const auto& c : *done) {
      for (const auto& err : c.errors)
        seen = err;
    }
  });
  {
    // Rank 1 runs two steps, then its engine and communicator go away.
    auto e = tp_engine(name, r1);
    ASSERT_NE(e, nullptr);
    for (const auto& r : requests)
      ASSERT_TRUE(e->submit(r).has_value());
    for (int s = 0; s < 2; ++s)
      ASSERT_TRUE(e->step().has_value());
    r1.tensor_parallel.reset();
  }
  survivor.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 25s);  // not the 30 s timeout
  EXPECT_NE(seen.find("rank 1 left the group"), std::string::npos) << seen;
}

}  // namespace mstar::test
