// Tensor parallelism on the CPU: the fixture Nemotron-H models split across
// ranks on threads of one process (parallel/local_group.hpp), each rank a
// whole engine over its own pools, the same requests on every rank. Greedy
// tokens must equal the unsplit model's (and transformers'), logits within
// 1e-5 of the largest logit; a rank that stops fails its peer's requests
// with an error naming it, within the group's timeout.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>
#include <optional>
#include <thread>

#include "parallel/local_group.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::test {
namespace {

using namespace std::chrono_literals;

using completions = std::vector<engine::completion>;

// The random-weight Nemotron-H configs of these tests, by name: "100m" is
// bench/model_bench.cpp's 100M-parameter shape (hidden 768, 12/4 heads,
// 24 Mamba-2 heads in 2 groups, 16 layers, vocab 32000); "wide" splits 4
// ways, with a vocabulary (1001) that does not.
models::nemotron_h_config random_config(const std::string& name) {
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

// A fixture model by name, or a random one ("random:...", seed 5).
result<std::unique_ptr<models::causal_lm>> load_named(const std::string& name,
                                                      const models::run_options& run) {
  if (!name.starts_with("random:"))
    return models::load_causal_lm(model_dir(name), run);
  auto m = models::nemotron_h_model::random(random_config(name), 5, run);
  if (!m)
    return m.error();
  return std::unique_ptr<models::causal_lm>(std::move(*m));
}

std::unique_ptr<engine::local_engine> tp_engine(const std::string& name,
                                                std::shared_ptr<parallel::communicator> comm) {
  models::run_options run;
  run.tensor_parallel = std::move(comm);
  auto model = load_named(name, run);
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  engine::engine_config config;  // small pools: three 100M-parameter engines share the host
  config.pools.max_num_pages = 256;
  config.pools.max_slots = 8;
  config.pools.checkpoint_slots = 8;
  auto e = engine::local_engine::make(std::move(*model), config);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

// Runs `requests` on every rank of a group of `n`, one thread each, and
// gives each rank's completions; `parameters` gets each rank's weight count.
std::vector<completions> run_group(const std::string& name, int n,
                                   const std::vector<engine::request_spec>& requests,
                                   std::vector<std::int64_t>* parameters = nullptr) {
  auto group = parallel::local_group::make(n, 20s);
  EXPECT_TRUE(group.has_value());
  std::vector<completions> out(static_cast<std::size_t>(n));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    std::shared_ptr<parallel::communicator> comm = std::move((*group)[static_cast<std::size_t>(r)]);
    threads.emplace_back([comm, r, &name, &requests, &out, &counts] {
      auto e = tp_engine(name, comm);
      ASSERT_NE(e, nullptr);
      counts[static_cast<std::size_t>(r)] = e->model().num_parameters();
      auto done = engine::run_to_completion(*e, requests);
      ASSERT_TRUE(done.has_value()) << done.error().message();
      expect_pools_empty(*e);
      out[static_cast<std::size_t>(r)] = std::move(*done);
    });
  }
  for (auto& t : threads)
    t.join();
  if (parameters != nullptr)
    *parameters = counts;
  return out;
}

std::vector<engine::request_spec> fixture_requests(const std::string& name, std::int32_t tokens) {
  std::vector<engine::request_spec> out;
  if (name.starts_with("random:")) {  // a short prompt and one past two pages
    std::vector<engine::token_id> longer;
    for (int i = 0; i < 37; ++i)
      longer.push_back(static_cast<engine::token_id>(3 + (i * 97) % 900));
    out.push_back(greedy_request({5, 77, 300, 12}, tokens, true));
    out.push_back(greedy_request(std::move(longer), tokens, true));
    return out;
  }
  for (const auto& p : load_expected(name))
    out.push_back(greedy_request(p.prompt, tokens, true));
  return out;
}

// The largest |a - b| over a logits row, relative to the row's largest |b|.
double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    gap = std::max(gap, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return gap / scale;
}

void expect_same_as_one_rank(const std::string& name, int n) {
  const auto requests = fixture_requests(name, 8);
  ASSERT_FALSE(requests.empty());
  auto e = tp_engine(name, nullptr);
  ASSERT_NE(e, nullptr);
  auto whole = engine::run_to_completion(*e, requests);
  ASSERT_TRUE(whole.has_value()) << whole.error().message();
  std::vector<std::int64_t> parameters;
  const auto ranks = run_group(name, n, requests, &parameters);
  // Each rank holds a part: less than the whole, and together more than it
  // (embedding and norms are on every rank).
  for (const auto p : parameters)
    EXPECT_LT(p, e->model().num_parameters());
  EXPECT_GT(std::accumulate(parameters.begin(), parameters.end(), std::int64_t{0}),
            e->model().num_parameters());
  const auto expected =
      name.starts_with("random:") ? std::vector<fixture_prompt>{} : load_expected(name);
  double worst = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    ASSERT_EQ(ranks[r].size(), whole->size());
    for (std::size_t i = 0; i < whole->size(); ++i) {
      const auto& want = (*whole)[i];
      const auto& got = ranks[r][i];
      ASSERT_EQ(got.tokens.size(), 1U) << got.id;
      EXPECT_EQ(got.tokens[0], want.tokens[0]) << "rank " << r << " request " << i;
      // transformers' greedy tokens, as far as the fixture has them
      if (!expected.empty()) {
        const auto& ref = expected[i].generated;
        const auto k = std::min(ref.size(), got.tokens[0].size());
        EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(k),
                               got.tokens[0].begin()))
            << "rank " << r << " request " << i;
      }
      ASSERT_EQ(want.logits[0].size(), 8U);
      ASSERT_EQ(got.logits[0].size(), want.logits[0].size());
      for (std::size_t s = 0; s < want.logits[0].size(); ++s)
        worst = std::max(worst, relative_gap(got.logits[0][s], want.logits[0][s]));
    }
  }
  EXPECT_LE(worst, 1e-5);
  std::printf("%s at tensor parallel %d: largest logit gap %.3g of the row's largest logit\n",
              name.c_str(), n, worst);
}

TEST(tensor_parallel, two_ranks_of_the_hybrid_fixture_match_one_rank) {
  expect_same_as_one_rank("nemotron_h_tiny_hybrid", 2);
}

TEST(tensor_parallel, two_ranks_of_the_attention_fixture_match_one_rank) {
  expect_same_as_one_rank("nemotron_h_tiny_attn", 2);
}

TEST(tensor_parallel, two_ranks_of_the_embedded_model_match_one_rank) {
  expect_same_as_one_rank("default", 2);
}

TEST(tensor_parallel, four_ranks_of_a_random_model_with_an_odd_vocabulary_match_one_rank) {
  expect_same_as_one_rank("random:wide", 4);
}

TEST(tensor_parallel, two_ranks_of_a_100m_random_model_match_one_rank) {
  expect_same_as_one_rank("random:100m", 2);
}

TEST(tensor_parallel, refuses_a_group_whose_size_does_not_split_the_heads) {
  // The hybrid fixture has 8 Mamba-2 heads in 2 groups and 2 KV heads: 4 ranks
  // cannot split its B/C groups.
  auto group = parallel::local_group::make(4, 1s);
  ASSERT_TRUE(group.has_value());
  models::run_options run;
  run.tensor_parallel = std::move((*group)[0]);
  auto model = models::load_causal_lm(model_dir("nemotron_h_tiny_hybrid"), run);
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.error().code(), errc::invalid_argument);
  EXPECT_NE(model.error().message().find("field 'n_groups': 2 does not split across "
                                         "tensor_parallel 4"),
            std::string::npos)
      << model.error().message();
}

TEST(tensor_parallel, a_rank_that_stops_fails_its_peers_requests_naming_it) {
  const auto requests = fixture_requests("nemotron_h_tiny_hybrid", 8);
  auto group = parallel::local_group::make(2, 30s);
  ASSERT_TRUE(group.has_value());
  std::shared_ptr<parallel::communicator> c0 = std::move((*group)[0]);
  std::shared_ptr<parallel::communicator> c1 = std::move((*group)[1]);
  std::string seen;
  const auto start = std::chrono::steady_clock::now();
  std::thread survivor([c0, &requests, &seen] {
    auto e = tp_engine("nemotron_h_tiny_hybrid", c0);
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
    auto e = tp_engine("nemotron_h_tiny_hybrid", c1);
    ASSERT_NE(e, nullptr);
    for (const auto& r : requests)
      ASSERT_TRUE(e->submit(r).has_value());
    for (int s = 0; s < 2; ++s)
      ASSERT_TRUE(e->step().has_value());
    c1.reset();
  }
  survivor.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 25s);  // not the 30 s timeout
  EXPECT_NE(seen.find("rank 1 left the group"), std::string::npos) << seen;
}

}  // namespace
}  // namespace mstar::test
