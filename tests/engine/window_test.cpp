// Windowed generation through the engine (request_spec::window; seed 000's
// WindowSchedule, reference kv-keys-windowing §2.6 and §3.6.6): a window's
// last commit declares its retention, the KV pool releases whole pages
// behind the context horizon, and the prompt stays. On the attention-only
// fixture (no RoPE: a token's position enters nowhere but the causal order)
// every step's logits must equal an independent from-scratch forward in
// which each token attends to exactly the tokens the pool held when it ran.
// (Not a forward over the retained tokens alone: from the second attention
// layer on, a retained token's cached K and V carry what it saw when it ran,
// released tokens included; that is what a bounded cache computes.) The pages a request holds stay
// bounded however long it generates, where an unwindowed request that
// outgrows the pool fails with a clear error; overlap scheduling gives the
// tokens of sync; a sequence recomputed after a preemption (or resumed from
// generated tokens) sees what its decode saw, since its chunks are cut at
// window ends.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/safetensors.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::engine {
namespace {

constexpr std::int64_t page = 4;

engine_config small_pools(schedule_mode mode, std::int64_t pages, bool prefix_cache = true) {
  engine_config config;
  config.schedule = mode;
  config.pools.page_size = page;
  config.pools.max_num_pages = pages;
  config.pools.max_slots = 7;
  config.pools.prefix_cache = prefix_cache;
  config.scheduler.max_batched_tokens = 64;
  config.scheduler.max_running = 6;
  return config;
}

request_spec windowed(std::vector<token_id> prompt, std::int32_t tokens, window_params w,
                      bool keep_logits = false) {
  auto r = test::greedy_request(std::move(prompt), tokens, keep_logits);
  r.window = w;
  return r;
}

const std::vector<token_id> prompt6{5, 17, 33, 101, 7, 250};

// The KV stream of `rid` as the pool holds it now (zeros when it holds none).
resources::kv_stream_info stream_of(local_engine& e, const request_id& rid) {
  auto info = e.pools().kv()->stream(rid, "main");
  return info.value_or(resources::kv_stream_info{});
}

// An independent forward of an attention-only Nemotron-H fixture, from the
// math in plain loops (as tests/fixtures/nemotron_h_numpy_reference.py; no
// cache, no kernels of ours): every token of `ids` runs, and token i attends
// to exactly the tokens j <= i that `visible(i, j)` admits. Returns the
// logits after each token, [ids.size()][vocab].
template <class Visible>
std::vector<std::vector<float>> masked_forward(const std::string& model,
                                               const std::vector<token_id>& ids, Visible visible) {
  const auto dir = test::model_dir(model);
  std::ifstream config_file{dir / "config.json"};
  const auto cfg = nlohmann::json::parse(config_file);
  auto ckpt = models::safetensors_checkpoint::open(dir);
  EXPECT_TRUE(ckpt.has_value());
  auto weight = [&](const std::string& name) {
    auto t = ckpt->get(name);
    EXPECT_TRUE(t.has_value()) << name;
    return *models::to_float32(**t);
  };
  const auto D = cfg.at("hidden_size").get<std::size_t>();
  const auto V = cfg.at("vocab_size").get<std::size_t>();
  const auto nh = cfg.at("num_attention_heads").get<std::size_t>();
  const auto nkv = cfg.at("num_key_value_heads").get<std::size_t>();
  const auto hd = cfg.at("head_dim").get<std::size_t>();
  const auto eps = cfg.at("layer_norm_epsilon").get<float>();
  const auto T = ids.size();
  using matrix = std::vector<std::vector<float>>;
  // y[t] = W x[t], W [out][in] row-major.
  auto linear = [](const matrix& x, const std::vector<float>& w, std::size_t out) {
    const std::size_t in = x.front().size();
    matrix y(x.size(), std::vector<float>(out));
    for (std::size_t t = 0; t < x.size(); ++t) {
      for (std::size_t o = 0; o < out; ++o) {
        double acc = 0;
        for (std::size_t i = 0; i < in; ++i)
          acc += static_cast<double>(w[o * in + i]) * x[t][i];
        y[t][o] = static_cast<float>(acc);
      }
    }
    return y;
  };
  auto rms_norm = [&](const matrix& x, const std::vector<float>& w) {
    matrix y = x;
    for (auto& row : y) {
      double ss = 0;
      for (const float v : row)
        ss += static_cast<double>(v) * v;
      const auto scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps));
      for (std::size_t i = 0; i < D; ++i)
        row[i] = w[i] * (row[i] * scale);
    }
    return y;
  };
  const auto embed = weight("backbone.embeddings.weight");
  matrix h(T, std::vector<float>(D));
  for (std::size_t t = 0; t < T; ++t)
    std::copy_n(embed.begin() + static_cast<std::ptrdiff_t>(ids[t] * D), D, h[t].begin());
  const auto kinds = cfg.at("layers_block_type").get<std::vector<std::string>>();
  for (std::size_t l = 0; l < kinds.size(); ++l) {
    const std::string pre = fmt::format("backbone.layers.{}.", l);
    const auto x = rms_norm(h, weight(pre + "norm.weight"));
    matrix out;
    if (kinds[l] == "attention") {
      const auto q = linear(x, weight(pre + "mixer.q_proj.weight"), nh * hd);
      const auto k = linear(x, weight(pre + "mixer.k_proj.weight"), nkv * hd);
      const auto v = linear(x, weight(pre + "mixer.v_proj.weight"), nkv * hd);
      matrix heads(T, std::vector<float>(nh * hd, 0.0F));
      for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t a = 0; a < nh; ++a) {
          const std::size_t g = a / (nh / nkv);
          std::vector<double> score(T, -1e300);
          double top = -1e300;
          for (std::size_t j = 0; j <= t; ++j) {
            if (j != t && !visible(t, j))
              continue;
            double dot = 0;
            for (std::size_t d = 0; d < hd; ++d)
              dot += static_cast<double>(q[t][a * hd + d]) * k[j][g * hd + d];
            score[j] = dot / std::sqrt(static_cast<double>(hd));
            top = std::max(top, score[j]);
          }
          double sum = 0;
          for (std::size_t j = 0; j <= t; ++j) {
            score[j] = score[j] <= -1e299 ? 0.0 : std::exp(score[j] - top);
            sum += score[j];
          }
          for (std::size_t j = 0; j <= t; ++j) {
            for (std::size_t d = 0; d < hd; ++d) {
              heads[t][a * hd + d] +=
                  static_cast<float>(score[j] / sum * static_cast<double>(v[j][g * hd + d]));
            }
          }
        }
      }
      out = linear(heads, weight(pre + "mixer.o_proj.weight"), D);
    } else {
      EXPECT_EQ(kinds[l], "mlp") << "an attention-only fixture has attention and MLP layers";
      const auto inner = cfg.at("intermediate_size").get<std::size_t>();
      auto up = linear(x, weight(pre + "mixer.up_proj.weight"), inner);
      for (auto& row : up) {
        for (auto& u : row)
          u = u > 0 ? u * u : 0.0F;
      }
      out = linear(up, weight(pre + "mixer.down_proj.weight"), D);
    }
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t i = 0; i < D; ++i)
        h[t][i] += out[t][i];
    }
  }
  return linear(rms_norm(h, weight("backbone.norm_f.weight")), weight("lm_head.weight"), V);
}

TEST(windowed_generation, every_step_attends_to_exactly_the_retained_tokens) {
  // Windows of 2 units of 2 tokens, 3 units of context: a window ends every
  // 4 output tokens and keeps 6 behind it (whole pages of 4 are released).
  // The tokens a step's query attends to are what the pool held before the
  // step: the KV of every retained token is the one computed when it ran
  // (with what was visible then), so the reference masks each token's
  // attention to exactly the tokens held when it ran, at its own position.
  const window_params w{2, 3, 0, 2};
  const std::string model = "nemotron_h_tiny_attn";
  auto e = test::fixture_engine(model, small_pools(schedule_mode::sync, 64));
  ASSERT_NE(e, nullptr);
  auto id = e->submit(windowed(prompt6, 40, w, /*keep_logits=*/true));
  ASSERT_TRUE(id.has_value()) << id.error().message();
  std::vector<token_id> all = prompt6;  // the stream's tokens, prompt then output
  // Per token (as a query): the range [from, to) of tokens released when it ran.
  std::vector<std::pair<std::int64_t, std::int64_t>> hidden(all.size(), {0, 0});
  std::vector<std::vector<float>> got;  // the logits that chose each output token
  std::int64_t max_released = 0, max_pages = 0;
  while (!e->idle()) {
    const auto before = stream_of(*e, *id);  // what this step's attention reads
    auto deltas = e->step();
    ASSERT_TRUE(deltas.has_value()) << deltas.error().message();
    test::expect_pools_whole(*e);
    max_pages = std::max(max_pages, static_cast<std::int64_t>(stream_of(*e, *id).pages.size()));
    for (const auto& d : *deltas) {
      ASSERT_TRUE(d.error.empty()) << d.error;
      for (std::size_t k = 0; k < d.tokens.size(); ++k) {
        // The step's query is the last token of `all`: the pool had
        // released [start, start + released) of the stream (the page that
        // straddles the protected prompt's end stays).
        const auto start = (before.protected_prefix + page - 1) / page * page;
        hidden.back() = {start, start + before.released};
        max_released = std::max(max_released, before.released);
        got.push_back(d.logits[k]);
        all.push_back(d.tokens[k]);
        hidden.emplace_back(0, 0);
      }
      if (d.finished) {
        EXPECT_EQ(*d.finished, finish_reason::length);
        EXPECT_GT(d.counts.kv_pages_peak, 0);
        EXPECT_LE(d.counts.kv_pages_peak, 6);
      }
    }
  }
  ASSERT_EQ(got.size(), 40U);
  all.pop_back();  // the last output token is never fed
  const auto want = masked_forward(model, all, [&](std::size_t t, std::size_t j) {
    const auto jj = static_cast<std::int64_t>(j);
    return jj < hidden[t].first || jj >= hidden[t].second;
  });
  float worst_all = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    const auto& ref = want[prompt6.size() - 1 + k];
    ASSERT_EQ(got[k].size(), ref.size());
    float worst = 0;
    for (std::size_t v = 0; v < ref.size(); ++v)
      worst = std::max(worst, std::abs(got[k][v] - ref[v]));
    worst_all = std::max(worst_all, worst);
    EXPECT_LT(worst, 2e-4F) << fmt::format("output token {}: logits differ by {}", k, worst);
  }
  EXPECT_GE(max_released, 24) << "the window never released the old context";
  // Prompt pages (2) + 6 tokens of context + a window of 4, page-rounded.
  EXPECT_LE(max_pages, 6);
  std::printf(
      "[ measured ] 40 tokens, windows of 4, context 6: at most %lld pages held, %lld "
      "tokens released before the last step, logits within %.2e of the masked "
      "reference\n",
      static_cast<long long>(max_pages), static_cast<long long>(max_released),
      static_cast<double>(worst_all));
  test::expect_pools_empty(*e);
}

TEST(windowed_generation, the_masked_reference_is_the_engine_when_nothing_is_released) {
  // The reference itself, checked where no window applies: causal
  // attention over every token gives the engine's logits.
  const std::string model = "nemotron_h_tiny_attn";
  auto e = test::fixture_engine(model, small_pools(schedule_mode::sync, 64));
  ASSERT_NE(e, nullptr);
  auto done = run_to_completion(*e, {test::greedy_request(prompt6, 8, true)});
  ASSERT_TRUE(done.has_value()) << done.error().message();
  auto all = prompt6;
  all.insert(all.end(), done->front().tokens[0].begin(), done->front().tokens[0].end() - 1);
  const auto want = masked_forward(model, all, [](std::size_t, std::size_t) { return true; });
  for (std::size_t k = 0; k < 8; ++k) {
    const auto& got = done->front().logits[0][k];
    float worst = 0;
    for (std::size_t v = 0; v < got.size(); ++v)
      worst = std::max(worst, std::abs(got[v] - want[prompt6.size() - 1 + k][v]));
    EXPECT_LT(worst, 2e-4F) << k;
  }
}

TEST(windowed_generation, pages_stay_bounded_where_an_unwindowed_request_fails) {
  // 24 pages of 4 tokens: 92 tokens of room; the request makes 400.
  auto e = test::fixture_engine("nemotron_h_tiny_hybrid", small_pools(schedule_mode::sync, 24));
  ASSERT_NE(e, nullptr);
  const window_params w{4, 4, 0, 4};
  auto done = run_to_completion(*e, {windowed(prompt6, 400, w)});
  ASSERT_TRUE(done.has_value()) << done.error().message();
  ASSERT_EQ(done->size(), 1U);
  const auto& c = done->front();
  EXPECT_EQ(c.finished[0], finish_reason::length) << c.errors[0];
  EXPECT_EQ(c.tokens[0].size(), 400U);
  // Prompt pages (2) + 16 tokens of context + a window of 16, page-rounded.
  EXPECT_LE(c.counts.kv_pages_peak, 2 + 4 + 4 + 1);
  EXPECT_GT(c.counts.kv_pages_peak, 2);
  test::expect_pools_empty(*e);

  auto whole = run_to_completion(*e, {test::greedy_request(prompt6, 400)});
  ASSERT_TRUE(whole.has_value()) << whole.error().message();
  EXPECT_EQ(whole->front().finished[0], finish_reason::error);
  EXPECT_NE(whole->front().errors[0].find("does not fit in the pools even alone"),
            std::string::npos)
      << whole->front().errors[0];
  test::expect_pools_empty(*e);
  std::printf("[ measured ] 400 tokens in 24 pages: windowed peak %lld pages; unwindowed: %s\n",
              static_cast<long long>(c.counts.kv_pages_peak), whole->front().errors[0].c_str());
}

TEST(windowed_generation, overlap_gives_the_tokens_of_sync) {
  for (const std::string model : {"nemotron_h_tiny_attn", "nemotron_h_tiny_hybrid"}) {
    SCOPED_TRACE(model);
    std::vector<request_spec> reqs;
    reqs.push_back(windowed(prompt6, 90, {3, 2, 1, 3}));
    reqs.push_back(windowed({9, 8, 7}, 70, {2, 5, 0, 2}));
    auto seeded = windowed({40, 41, 42, 43, 44}, 60, {4, 2, 0, 1});
    seeded.sampling.temperature = 0.8F;
    seeded.sampling.seed = 11;
    seeded.sampling.n = 2;
    reqs.push_back(seeded);
    reqs.push_back(test::greedy_request({3, 4, 5}, 30));
    std::vector<std::vector<std::vector<token_id>>> outs;
    for (const auto mode : {schedule_mode::sync, schedule_mode::overlap}) {
      auto e = test::fixture_engine(model, small_pools(mode, 48));
      ASSERT_NE(e, nullptr);
      auto done = run_to_completion(*e, reqs);
      ASSERT_TRUE(done.has_value()) << done.error().message();
      std::vector<std::vector<token_id>> tokens;
      for (const auto& c : *done) {
        for (std::size_t i = 0; i < c.tokens.size(); ++i) {
          EXPECT_TRUE(c.errors[i].empty()) << c.errors[i];
          tokens.push_back(c.tokens[i]);
        }
      }
      outs.push_back(std::move(tokens));
      if (mode == schedule_mode::overlap) {
        EXPECT_GT(e->counters().ahead_steps, 0);
      }
      test::expect_pools_empty(*e);
    }
    EXPECT_EQ(outs[0], outs[1]);
  }
}

TEST(windowed_generation, a_recomputed_sequence_sees_what_its_decode_saw) {
  // A request resumed from 21 generated tokens prefills them again, as a
  // preempted sequence does: its chunks end at window ends, where the
  // retention applies, so each window's tokens attend to what they did in
  // the uninterrupted run, and the tokens after it agree.
  const window_params w{2, 3, 0, 2};
  auto e = test::fixture_engine("nemotron_h_tiny_attn", small_pools(schedule_mode::sync, 64));
  ASSERT_NE(e, nullptr);
  auto straight = run_to_completion(*e, {windowed(prompt6, 40, w)});
  ASSERT_TRUE(straight.has_value()) << straight.error().message();
  const auto& out = straight->front().tokens[0];
  ASSERT_EQ(out.size(), 40U);
  auto resumed = windowed(prompt6, 40, w);
  resumed.generated.assign(out.begin(), out.begin() + 21);
  auto again = run_to_completion(*e, {resumed});
  ASSERT_TRUE(again.has_value()) << again.error().message();
  ASSERT_TRUE(again->front().errors[0].empty()) << again->front().errors[0];
  const std::vector<token_id> rest(out.begin() + 21, out.end());
  EXPECT_EQ(again->front().tokens[0], rest);
  EXPECT_LE(again->front().counts.kv_pages_peak, 6);
  test::expect_pools_empty(*e);
}

TEST(windowed_generation, a_bad_window_is_refused_naming_the_rule) {
  auto e = test::fixture_engine("nemotron_h_tiny_hybrid", small_pools(schedule_mode::sync, 24));
  ASSERT_NE(e, nullptr);
  auto expect_refused = [&](window_params w, const std::string& says) {
    auto r = e->submit(windowed(prompt6, 10, w));
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("window"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(says), std::string::npos) << r.error().message();
  };
  expect_refused({2, 1, 2, 1}, "overlap");
  expect_refused({0, 1, 0, 1}, "window");
  expect_refused({2, -1, 0, 1}, "context");
  expect_refused({2, 1, 0, 0}, "tokens_per_unit");
  EXPECT_TRUE(e->idle());
}

}  // namespace
}  // namespace mstar::engine
