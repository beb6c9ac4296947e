// The engine's request lifecycle on the fixture models: cancellation, stop
// rules, parallel samples, log-probabilities, requests that cannot fit,
// token-id-only models and bad requests. Every test ends with the pools
// conserved and, once idle, holding nothing for requests.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <optional>
#include <set>

#include "engine/sampler.hpp"
#include "models/nemotron_h.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/models/temp_folder.hpp"

namespace mstar::engine {
namespace {

constexpr const char* hybrid = "nemotron_h_tiny_hybrid";

std::vector<token_id> prompt_of(int len, token_id start = 10) {
  std::vector<token_id> p;
  for (int i = 0; i < len; ++i)
    p.push_back(start + static_cast<token_id>(i * 7 % 200));
  return p;
}

// Steps until idle (bounded), collecting every delta.
std::vector<delta> drain(local_engine& e) {
  std::vector<delta> all;
  for (int i = 0; i < 10000 && !e.idle(); ++i) {
    auto d = e.step();
    EXPECT_TRUE(d.has_value()) << d.error().message();
    if (!d)
      break;
    all.insert(all.end(), d->begin(), d->end());
  }
  EXPECT_TRUE(e.idle());
  return all;
}

// A row the forward drew no token for (sampled -1) fails its request alone,
// naming why; the row beside it takes its token. The scheduler makes each
// row's delta in place and takes it out again on such a refusal: one delta
// each, the failed one carrying no token.
TEST(local_engine, a_row_with_no_drawn_token_fails_its_request_alone) {
  model_facts facts;
  facts.vocab_size = 32;
  scheduler sched{scheduler_config{}, facts};
  for (const char* id : {"a", "b"}) {
    request_spec r;
    r.id = id;
    r.prompt = {3, 4, 5};
    r.stop.max_tokens = 4;
    r.stop.ignore_eos = true;
    ASSERT_TRUE(sched.add(std::move(r)).has_value());
  }
  for (const auto& reg : sched.admissions().registrations)
    sched.set_cached(reg.rid, 0);
  const auto step = sched.schedule();
  ASSERT_EQ(step.rows.size(), 2U);
  models::forward_output out;
  out.sampled = {-1, 7};
  const auto res = sched.on_ran(step, out);
  ASSERT_EQ(res.deltas.size(), 2U);
  EXPECT_EQ(res.deltas[0].id, "a");
  EXPECT_TRUE(res.deltas[0].tokens.empty());
  EXPECT_EQ(res.deltas[0].finished, finish_reason::error);
  EXPECT_NE(res.deltas[0].error.find("no token can be drawn"), std::string::npos)
      << res.deltas[0].error;
  EXPECT_EQ(res.deltas[1].id, "b");
  EXPECT_EQ(res.deltas[1].tokens, std::vector<token_id>{7});
  EXPECT_FALSE(res.deltas[1].finished.has_value());
  EXPECT_EQ(res.actions.release, std::vector<request_id>{"a"});
}

TEST(local_engine, cancels_mid_prefill_and_mid_decode_and_frees_everything) {
  engine_config config;
  config.scheduler.max_batched_tokens = 8;  // a 40-token prompt takes 5 steps
  auto e = test::fixture_engine(hybrid, config);
  ASSERT_NE(e, nullptr);
  auto long_prompt = e->submit(test::greedy_request(prompt_of(40), 50));
  auto decoding = e->submit(test::greedy_request(prompt_of(3), 50));
  ASSERT_TRUE(long_prompt && decoding);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(e->step().has_value());
  EXPECT_TRUE(e->cancel(*long_prompt));  // still prefilling
  EXPECT_TRUE(e->cancel(*decoding));     // decoding already
  EXPECT_FALSE(e->cancel("no-such-request"));
  const auto all = drain(*e);
  std::map<request_id, finish_reason> ends;
  for (const auto& d : all) {
    if (d.finished)
      ends[d.id] = *d.finished;
  }
  EXPECT_EQ(ends.at(*long_prompt), finish_reason::cancelled);
  EXPECT_EQ(ends.at(*decoding), finish_reason::cancelled);
  test::expect_pools_empty(*e);
}

TEST(local_engine, stops_at_a_stop_string_spanning_tokens_without_returning_it) {
  auto e = test::fixture_engine(hybrid);
  ASSERT_NE(e, nullptr);
  // The greedy text of a prompt, then a stop string made of two printable
  // byte tokens in a row: the match spans a token boundary.
  for (int len = 1; len < 60; ++len) {
    auto free_run = run_to_completion(*e, {test::greedy_request(prompt_of(len), 16)});
    ASSERT_TRUE(free_run.has_value());
    const auto& text = free_run->front().text[0];
    const auto& ids = free_run->front().tokens[0];
    auto printable = [](token_id id) { return id >= 3 + 33 && id < 3 + 127; };
    for (std::size_t i = 1; i + 1 < ids.size(); ++i) {
      if (!printable(ids[i]) || !printable(ids[i + 1]))
        continue;
      const std::string stop{static_cast<char>(ids[i] - 3), static_cast<char>(ids[i + 1] - 3)};
      const auto at = text.find(stop);
      auto r = test::greedy_request(prompt_of(len), 16);
      r.stop.stop_strings = {stop};
      auto stopped = run_to_completion(*e, {r});
      ASSERT_TRUE(stopped.has_value());
      EXPECT_EQ(stopped->front().finished[0], finish_reason::stop);
      EXPECT_EQ(stopped->front().text[0], text.substr(0, at)) << "stop string '" << stop << "'";
      const auto& got = stopped->front().tokens[0];
      ASSERT_LE(got.size(), ids.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), ids.begin()));
      EXPECT_EQ(got.back() - 3, static_cast<token_id>(static_cast<unsigned char>(stop[1])));
      test::expect_pools_empty(*e);
      return;
    }
  }
  FAIL() << "no prompt produced printable text to cut a stop string from";
}

TEST(local_engine, stops_after_a_stop_token_id_and_returns_it) {
  auto e = test::fixture_engine(hybrid);
  ASSERT_NE(e, nullptr);
  auto free_run = run_to_completion(*e, {test::greedy_request(prompt_of(9), 8)});
  ASSERT_TRUE(free_run.has_value());
  const auto& ids = free_run->front().tokens[0];
  auto r = test::greedy_request(prompt_of(9), 8);
  r.stop.stop_token_ids = {ids[3]};
  auto stopped = run_to_completion(*e, {r});
  ASSERT_TRUE(stopped.has_value());
  const auto first =
      static_cast<std::size_t>(std::find(ids.begin(), ids.end(), ids[3]) - ids.begin());
  EXPECT_EQ(stopped->front().tokens[0],
            std::vector<token_id>(ids.begin(), ids.begin() + first + 1));
  EXPECT_EQ(stopped->front().finished[0], finish_reason::stop);
}

TEST(local_engine, n_samples_share_a_prompt_and_draw_differently) {
  auto e = test::fixture_engine(hybrid);
  ASSERT_NE(e, nullptr);
  auto greedy = test::greedy_request(prompt_of(7), 6);
  greedy.sampling.n = 3;
  auto sampled = greedy;
  sampled.sampling.temperature = 1.0F;
  sampled.sampling.seed = 5;
  auto done = run_to_completion(*e, {greedy, sampled});
  ASSERT_TRUE(done.has_value());
  const auto& g = (*done)[0];
  const auto& s = (*done)[1];
  ASSERT_EQ(g.tokens.size(), 3U);
  EXPECT_EQ(g.tokens[0], g.tokens[1]);
  EXPECT_EQ(g.tokens[0], g.tokens[2]);
  std::set<std::vector<token_id>> distinct(s.tokens.begin(), s.tokens.end());
  EXPECT_GT(distinct.size(), 1U) << "three seeded samples came out identical";
  for (const auto& t : s.tokens)
    EXPECT_EQ(t.size(), 6U);
  EXPECT_EQ(g.counts.prompt_tokens, 7);
  EXPECT_EQ(g.counts.completion_tokens, 6);
  // Seeded sampling is reproducible.
  auto again = run_to_completion(*e, {sampled});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->front().tokens, s.tokens);
  test::expect_pools_empty(*e);
}

TEST(local_engine, reports_top_logprobs_with_the_greedy_token_first) {
  auto e = test::fixture_engine(hybrid);
  ASSERT_NE(e, nullptr);
  auto r = test::greedy_request(prompt_of(5), 4);
  r.sampling.logprobs = 3;
  ASSERT_TRUE(e->submit(r).has_value());
  int tokens = 0;
  for (const auto& d : drain(*e)) {
    ASSERT_EQ(d.top_logprobs.size(), d.tokens.size());
    for (std::size_t i = 0; i < d.tokens.size(); ++i, ++tokens) {
      ASSERT_EQ(d.top_logprobs[i].size(), 3U);
      EXPECT_EQ(d.top_logprobs[i][0].id, d.tokens[i]);
      EXPECT_EQ(d.chosen_logprobs[i].logprob, d.top_logprobs[i][0].logprob);
      EXPECT_LE(d.top_logprobs[i][0].logprob, 0.0F);
      EXPECT_GE(d.top_logprobs[i][0].logprob, d.top_logprobs[i][1].logprob);
    }
  }
  EXPECT_EQ(tokens, 4);
}

TEST(local_engine, fails_a_request_that_cannot_fit_alone_and_serves_the_others) {
  engine_config config;
  config.pools.page_size = 4;
  config.pools.max_num_pages = 6;  // 5 usable pages: 20 tokens
  auto e = test::fixture_engine(hybrid, config);
  ASSERT_NE(e, nullptr);
  auto done = run_to_completion(
      *e, {test::greedy_request(prompt_of(40), 4), test::greedy_request(prompt_of(5), 4)});
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ((*done)[0].finished[0], finish_reason::error);
  EXPECT_NE((*done)[0].errors[0].find("does not fit in the pools even alone"), std::string::npos)
      << (*done)[0].errors[0];
  EXPECT_EQ((*done)[1].finished[0], finish_reason::length);
  EXPECT_EQ((*done)[1].tokens[0].size(), 4U);
  test::expect_pools_empty(*e);
}

TEST(local_engine, a_request_resumed_after_its_first_tokens_continues_as_the_original) {
  // What a decode node does with a prefill node's first token, or a
  // re-routed request with what the failed node streamed: the output after
  // `generated` equals the uninterrupted run's, and counts include it.
  auto e = test::fixture_engine(hybrid);
  ASSERT_NE(e, nullptr);
  auto free_run = run_to_completion(*e, {test::greedy_request(prompt_of(11), 8)});
  ASSERT_TRUE(free_run.has_value());
  const auto ids = free_run->front().tokens[0];
  ASSERT_EQ(ids.size(), 8U);
  for (const std::size_t already : {std::size_t{1}, std::size_t{5}}) {
    auto r = test::greedy_request(prompt_of(11), 8);
    r.generated.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(already));
    auto id = e->submit(std::move(r));
    ASSERT_TRUE(id.has_value()) << id.error().message();
    std::vector<token_id> rest;
    std::optional<usage> counts;
    for (const auto& d : drain(*e)) {
      rest.insert(rest.end(), d.tokens.begin(), d.tokens.end());
      if (d.finished) {
        EXPECT_EQ(*d.finished, finish_reason::length);
        counts = d.counts;
      }
    }
    EXPECT_EQ(rest,
              std::vector<token_id>(ids.begin() + static_cast<std::ptrdiff_t>(already), ids.end()))
        << already << " generated";
    ASSERT_TRUE(counts.has_value());
    EXPECT_EQ(counts->prompt_tokens, 11);
    EXPECT_EQ(counts->completion_tokens, 8);
  }
  EXPECT_TRUE(e->idle());
  test::expect_pools_empty(*e);
}

TEST(local_engine, refuses_bad_requests_naming_the_field) {
  auto e = test::fixture_engine(hybrid);
  ASSERT_NE(e, nullptr);
  auto expect_refused = [&](request_spec r, const std::string& words) {
    auto id = e->submit(std::move(r));
    ASSERT_FALSE(id.has_value());
    EXPECT_NE(id.error().message().find(words), std::string::npos) << id.error().message();
  };
  expect_refused(test::greedy_request({}, 4), "empty");
  expect_refused(test::greedy_request({1, 9999}, 4), "9999");
  auto bad_p = test::greedy_request({5}, 4);
  bad_p.sampling.top_p = 0.0F;
  expect_refused(bad_p, "top_p");
  auto bad_n = test::greedy_request({5}, 4);
  bad_n.sampling.n = 0;
  expect_refused(bad_n, "n must be");
  auto done_already = test::greedy_request({5}, 2);
  done_already.generated = {7, 8};
  expect_refused(done_already, "reach max_tokens");
  auto bad_generated = test::greedy_request({5}, 4);
  bad_generated.generated = {9999};
  expect_refused(bad_generated, "generated token id 9999");
  EXPECT_TRUE(e->idle());
  test::expect_pools_empty(*e);
}

TEST(local_engine, a_model_without_a_tokenizer_serves_token_ids_and_refuses_text) {
  test::temp_folder dir;
  const auto src = test::model_dir(hybrid);
  std::filesystem::copy_file(src / "model.safetensors", dir.path() / "model.safetensors");
  auto config = nlohmann::json::parse(std::ifstream{src / "config.json"});
  config.erase("mstar_tokenizer");
  dir.write("config.json", config.dump());
  auto model = models::nemotron_h_model::load(dir.path());
  ASSERT_TRUE(model.has_value()) << model.error().message();
  EXPECT_EQ((*model)->tok(), nullptr);
  auto e = local_engine::make(std::move(*model), {});
  ASSERT_TRUE(e.has_value());
  request_spec text;
  text.text = "hello";
  auto refused = (*e)->submit(text);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("no tokenizer"), std::string::npos);
  auto done = run_to_completion(**e, {test::greedy_request(prompt_of(4), 3)});
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->front().tokens[0].size(), 3U);
  EXPECT_TRUE(done->front().text[0].empty());
}

TEST(sampler, penalties_lower_seen_tokens_as_openai_and_ctrl_define_them) {
  std::vector<float> logits{1.0F, 2.0F, -1.0F, 0.5F};
  sampling_params p;
  p.presence_penalty = 0.5F;
  p.frequency_penalty = 0.25F;
  p.repetition_penalty = 2.0F;
  const std::unordered_map<token_id, std::int32_t> counts{{1, 2}};
  const std::vector<token_id> prompt{2};
  apply_penalties(logits, p, counts, prompt);
  EXPECT_FLOAT_EQ(logits[0], 1.0F);                       // unseen
  EXPECT_FLOAT_EQ(logits[1], 2.0F / 2.0F - 0.5F - 0.5F);  // output twice: both kinds
  EXPECT_FLOAT_EQ(logits[2], -2.0F);                      // prompt only: repetition
  EXPECT_FLOAT_EQ(logits[3], 0.5F);
}

}  // namespace
}  // namespace mstar::engine
