// One engine over N tensor-parallel ranks (models/tensor_parallel_lm.hpp):
// one scheduler and one set of pools drive every rank, so requests may come
// and go. Greedy tokens must equal the unsplit model's and logits agree
// within 1e-5 of the row's largest, with requests arriving while others run
// and a prompt served a second time from cached pages; a rank whose forward
// fails fails the step naming it, at once rather than at the group's timeout.
#include "models/tensor_parallel_lm.hpp"

#include <algorithm>
#include <chrono>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>

#include "engine/pool_memory.hpp"
#include "parallel/local_group.hpp"
#include "tests/engine/failing_model.hpp"
#include "tests/engine/tensor_parallel_support.hpp"

namespace mstar::test {
namespace {

using namespace std::chrono_literals;

// Rank `run.tensor_parallel` of model `name` (tp_engine's models).
result<std::unique_ptr<models::causal_lm>> load_tp_rank(const std::string& name,
                                                        const models::run_options& run) {
  if (name.starts_with("random:")) {
    auto m = models::nemotron_h_model::random(random_tp_config(name), 5, run);
    if (!m)
      return m.error();
    return std::unique_ptr<models::causal_lm>(std::move(*m));
  }
  return models::load_causal_lm(model_dir(name), run);
}

std::unique_ptr<engine::local_engine> engine_over(std::unique_ptr<models::causal_lm> model) {
  engine::engine_config config;
  config.pools.max_num_pages = 256;
  config.pools.max_slots = 8;
  config.pools.checkpoint_slots = 8;
  auto e = engine::local_engine::make(std::move(model), config);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

std::unique_ptr<engine::local_engine> wrapper_engine(const std::string& name, int n) {
  auto lm = models::make_tensor_parallel(
      {}, n, [&name](const models::run_options& run) { return load_tp_rank(name, run); });
  EXPECT_TRUE(lm.has_value()) << lm.error().message();
  if (!lm)
    return nullptr;
  EXPECT_NE(dynamic_cast<models::tensor_parallel_lm*>(lm->get()), nullptr);
  return engine_over(std::move(*lm));
}

// Submits `requests` (ids set, each expected by `c`).
void submit_all(engine::local_engine& e, engine::completion_collector& c,
                std::vector<engine::request_spec> requests) {
  for (auto& r : requests) {
    auto id = e.submit(r);
    ASSERT_TRUE(id.has_value()) << id.error().message();
    r.id = *id;
    c.expect(r);
  }
}

void step_times(engine::local_engine& e, engine::completion_collector& c, int steps) {
  for (int s = 0; s < steps && !e.idle(); ++s) {
    auto deltas = e.step();
    ASSERT_TRUE(deltas.has_value()) << deltas.error().message();
    for (const auto& d : *deltas)
      c.add(d);
  }
}

std::vector<engine::request_spec> first_requests(const std::string& name, std::int32_t tokens) {
  std::vector<engine::request_spec> out;
  if (name.starts_with("random:")) {
    out.push_back(greedy_request({5, 77, 300, 12}, tokens, true));
    out.push_back(greedy_request({9, 8, 7, 6, 5, 4, 3}, tokens, true));
    out.push_back(greedy_request({400, 1, 2}, tokens, true));
    return out;
  }
  for (const auto& p : load_expected(name))
    out.push_back(greedy_request(p.prompt, tokens, true));
  return out;
}

// A prompt of three pages and a bit (page size 16): long enough that a
// second request for it starts from cached pages.
engine::request_spec long_request(std::int64_t vocab, std::int32_t tokens) {
  std::vector<engine::token_id> prompt;
  for (int i = 0; i < 53; ++i)
    prompt.push_back(static_cast<engine::token_id>(3 + (i * 97) % (vocab - 3)));
  return greedy_request(std::move(prompt), tokens, true);
}

// The same traffic on `e`: half the first requests, three steps, the rest,
// until idle; then the long prompt, until idle; then it again, until idle.
std::vector<engine::completion> traffic(engine::local_engine& e, const std::string& name) {
  const auto first = first_requests(name, 8);
  const auto half = static_cast<std::ptrdiff_t>(first.size() / 2);
  engine::completion_collector c;
  submit_all(e, c, {first.begin(), first.begin() + half});
  step_times(e, c, 3);
  submit_all(e, c, {first.begin() + half, first.end()});
  step_times(e, c, 10'000);
  const auto again = long_request(e.model().vocab_size(), 6);
  submit_all(e, c, {again});
  step_times(e, c, 10'000);
  submit_all(e, c, {again});
  step_times(e, c, 10'000);
  EXPECT_TRUE(e.idle());
  expect_pools_empty(e);
  return c.take();
}

void expect_one_engine_matches_the_unsplit_model(const std::string& name, int n) {
  auto whole_engine = tp_engine(name, models::run_options{});
  ASSERT_NE(whole_engine, nullptr);
  const auto whole = traffic(*whole_engine, name);
  auto split_engine = wrapper_engine(name, n);
  ASSERT_NE(split_engine, nullptr);
  const auto split = traffic(*split_engine, name);
  ASSERT_EQ(split.size(), whole.size());
  double worst = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    const auto& want = whole[i];
    const auto& got = split[i];
    ASSERT_EQ(got.tokens.size(), 1U);
    EXPECT_TRUE(got.errors[0].empty()) << got.errors[0];
    EXPECT_EQ(got.tokens[0], want.tokens[0]) << "request " << i;
    ASSERT_EQ(got.logits[0].size(), want.logits[0].size()) << "request " << i;
    for (std::size_t s = 0; s < want.logits[0].size(); ++s)
      worst = std::max(worst, relative_gap(got.logits[0][s], want.logits[0][s]));
  }
  // The long prompt's second request started from cached pages, as the
  // unsplit model's did.
  EXPECT_GT(split.back().counts.cached_tokens, 0);
  EXPECT_EQ(split.back().counts.cached_tokens, whole.back().counts.cached_tokens);
  EXPECT_LE(worst, 1e-5);
  std::printf("%s, one engine over %d ranks: largest logit gap %.3g of the row's largest\n",
              name.c_str(), n, worst);
}

TEST(tensor_parallel_lm, one_engine_over_two_ranks_of_the_hybrid_fixture_matches_one_rank) {
  expect_one_engine_matches_the_unsplit_model("nemotron_h_tiny_hybrid", 2);
}

TEST(tensor_parallel_lm, one_engine_over_two_ranks_of_the_attention_fixture_matches_one_rank) {
  expect_one_engine_matches_the_unsplit_model("nemotron_h_tiny_attn", 2);
}

TEST(tensor_parallel_lm, one_engine_over_four_ranks_of_a_random_model_matches_one_rank) {
  expect_one_engine_matches_the_unsplit_model("random:wide", 4);
}

TEST(tensor_parallel_lm, load_causal_lm_gives_the_wrapper_for_tensor_parallel_ranks) {
  models::run_options run;
  run.tensor_parallel_ranks = 2;
  auto lm = models::load_causal_lm(model_dir("nemotron_h_tiny_hybrid"), run);
  ASSERT_TRUE(lm.has_value()) << lm.error().message();
  auto* tp = dynamic_cast<models::tensor_parallel_lm*>(lm->get());
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->ranks(), 2);
}

// run_options::tensor_parallel_groups forms the group (the launchers pass
// NCCL's maker): its joiner runs once per rank, each on a thread of its own,
// and the model made over its communicators serves as over the in-process
// group; a maker that gives nullopt leaves the in-process group; a rank that
// cannot join fails the load naming the rank, a maker that fails names the
// group.
TEST(tensor_parallel_lm, a_group_maker_forms_the_ranks_group_on_their_threads) {
  const std::string name = "nemotron_h_tiny_hybrid";
  std::mutex mutex;
  std::vector<int> joined;
  std::vector<std::thread::id> threads;
  std::vector<std::string> seen_devices;
  auto group = parallel::local_group::make(2, 30s);
  ASSERT_TRUE(group.has_value()) << group.error().message();
  std::vector<std::shared_ptr<parallel::communicator>> comms;
  for (auto& c : *group)
    comms.push_back(std::move(c));
  models::run_options run;
  run.tensor_parallel_groups =
      [&](int ranks, std::span<const std::string> devices,
          std::chrono::milliseconds) -> result<std::optional<parallel::rank_joiner>> {
    EXPECT_EQ(ranks, 2);
    seen_devices.assign(devices.begin(), devices.end());
    return std::optional<parallel::rank_joiner>{
        [&](int rank) -> result<std::shared_ptr<parallel::communicator>> {
          std::lock_guard lock(mutex);
          joined.push_back(rank);
          threads.push_back(std::this_thread::get_id());
          return comms[static_cast<std::size_t>(rank)];
        }};
  };
  auto lm = models::make_tensor_parallel(
      run, 2, [&name](const models::run_options& r) { return load_tp_rank(name, r); });
  ASSERT_TRUE(lm.has_value()) << lm.error().message();
  std::sort(joined.begin(), joined.end());
  EXPECT_EQ(joined, (std::vector<int>{0, 1}));
  ASSERT_EQ(threads.size(), 2U);
  EXPECT_NE(threads[0], threads[1]);
  EXPECT_NE(threads[0], std::this_thread::get_id());
  EXPECT_EQ(seen_devices, (std::vector<std::string>{"cpu", "cpu"}));
  auto e = engine_over(std::move(*lm));
  ASSERT_NE(e, nullptr);
  auto done = engine::run_to_completion(*e, {greedy_request({5, 6, 7}, 3)});
  ASSERT_TRUE(done.has_value()) << done.error().message();
  EXPECT_TRUE(done->front().errors[0].empty()) << done->front().errors[0];
  EXPECT_EQ(done->front().tokens[0].size(), 3U);
  comms.clear();

  // nullopt: the wrapper's own in-process group.
  run.tensor_parallel_groups =
      [](int, std::span<const std::string>,
         std::chrono::milliseconds) -> result<std::optional<parallel::rank_joiner>> {
    return std::optional<parallel::rank_joiner>{};
  };
  auto own = models::make_tensor_parallel(
      run, 2, [&name](const models::run_options& r) { return load_tp_rank(name, r); });
  EXPECT_TRUE(own.has_value()) << own.error().message();

  // Rank 1 cannot join.
  run.tensor_parallel_groups =
      [](int, std::span<const std::string>,
         std::chrono::milliseconds) -> result<std::optional<parallel::rank_joiner>> {
    return std::optional<parallel::rank_joiner>{
        [](int rank) -> result<std::shared_ptr<parallel::communicator>> {
          auto g = parallel::local_group::make(1, 1s);
          if (rank == 1 || !g)
            return make_error(errc::internal, "injected join failure");
          return std::shared_ptr<parallel::communicator>(std::move(g->front()));
        }};
  };
  auto broken = models::make_tensor_parallel(
      run, 2, [&name](const models::run_options& r) { return load_tp_rank(name, r); });
  ASSERT_FALSE(broken.has_value());
  EXPECT_NE(broken.error().message().find("tensor-parallel rank 1: injected join failure"),
            std::string::npos)
      << broken.error().message();

  // The maker itself fails.
  run.tensor_parallel_groups =
      [](int, std::span<const std::string>,
         std::chrono::milliseconds) -> result<std::optional<parallel::rank_joiner>> {
    return make_error(errc::internal, "no id");
  };
  auto unmade = models::make_tensor_parallel(
      run, 2, [&name](const models::run_options& r) { return load_tp_rank(name, r); });
  ASSERT_FALSE(unmade.has_value());
  EXPECT_NE(unmade.error().message().find("forming the group of 2 ranks: no id"), std::string::npos)
      << unmade.error().message();
}

// The pools of N ranks cost N copies of a rank's arenas: the memory check
// (engine/pool_memory.hpp) counts them all.
TEST(tensor_parallel_lm, its_pools_count_every_ranks_copy) {
  models::run_options run;
  run.tensor_parallel_ranks = 2;
  auto lm = models::load_causal_lm(model_dir("nemotron_h_tiny_hybrid"), run);
  ASSERT_TRUE(lm.has_value()) << lm.error().message();
  auto* tp = dynamic_cast<models::tensor_parallel_lm*>(lm->get());
  ASSERT_NE(tp, nullptr);
  models::pool_options options;
  options.max_num_pages = 64;
  options.max_slots = 8;
  auto spec = (*lm)->pools(options);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->replicas, 2);
  auto one = *spec;
  one.replicas = 1;
  const auto both = engine::pool_memory_of(*spec, true);
  const auto rank = engine::pool_memory_of(one, true);
  ASSERT_TRUE(both.has_value() && rank.has_value());
  EXPECT_GT(rank->arena_bytes, 0U);
  EXPECT_EQ(both->arena_bytes, 2 * rank->arena_bytes);
  // A limit that holds one copy but not two refuses, naming the limit.
  const auto limit = rank->host_bytes;  // one copy and its bookkeeping
  EXPECT_TRUE(engine::check_pool_memory(one, true, limit).has_value());
  const auto refused = engine::check_pool_memory(*spec, true, limit);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("--max-memory"), std::string::npos)
      << refused.error().message();
}

TEST(tensor_parallel_lm, a_rank_whose_forward_fails_fails_the_step_naming_it) {
  const std::string name = "nemotron_h_tiny_hybrid";
  auto lm = models::tensor_parallel_lm::make(
      {}, 2,
      [&name](const models::run_options& run) -> result<std::unique_ptr<models::causal_lm>> {
        auto m = load_tp_rank(name, run);
        if (!m || run.tensor_parallel->rank() != 1)
          return m;
        return std::unique_ptr<models::causal_lm>(
            std::make_unique<failing_model>(std::move(*m), 3, "injected failure"));
      },
      30s);
  ASSERT_TRUE(lm.has_value()) << lm.error().message();
  auto e = engine_over(std::unique_ptr<models::causal_lm>(std::move(*lm)));
  ASSERT_NE(e, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto done = engine::run_to_completion(*e, first_requests(name, 8));
  std::string seen;
  if (!done) {
    seen = done.error().message();
  } else {
    for (const auto& c : *done) {
      for (const auto& err : c.errors) {
        if (!err.empty())
          seen = err;
      }
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // not the 30 s timeout
  EXPECT_NE(seen.find("tensor-parallel rank 1: injected failure"), std::string::npos) << seen;
  // The group stays broken: the next request fails too, at once.
  auto later = engine::run_to_completion(*e, {greedy_request({5, 6, 7}, 2)});
  const bool failed = !later || !later->front().errors[0].empty();
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace mstar::test
