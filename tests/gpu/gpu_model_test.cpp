// The Nemotron-H on the GPU (`--device cuda`) against the committed
// transformers fixtures: float32 weights give the fixture's greedy tokens
// and logits within a budget; bfloat16 weights (the serving precision) give
// the fixture's tokens at every step (a different one only at a near tie)
// with each step's logits within a normalised budget. The pools live on
// device arenas throughout and keep their books. Launch / finish: step N+1
// launched before step N finished, its rows fed N's draws on the device,
// gives the tokens of blocking forwards fed on the host; the engine in
// overlap mode runs the batches and draws the ids of sync mode step by
// step over a random workload (tests/engine/lockstep.hpp).
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <gtest/gtest.h>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "engine/local_engine.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/cuda/recurrent.hpp"
#include "models/nemotron_h.hpp"
#include "models/safetensors.hpp"
#include "tests/engine/lockstep.hpp"
#include "tests/gpu/gpu_support.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::test::gpu {
namespace {

using namespace mstar::models;
using engine::local_engine;
using engine::request_spec;

// max |gpu - transformers| per logit with float32 weights (the CPU sees 1.2e-5).
constexpr double f32_logits_tolerance = 1e-3;
// max |gpu - transformers| / max |transformers| per step with bf16 weights.
constexpr double bf16_logits_budget = 5e-2;

using test::fixture_prompt;
using test::load_expected;
using test::model_dir;

std::vector<request_spec> greedy(const std::vector<fixture_prompt>& expected) {
  std::vector<request_spec> out;
  for (const auto& e : expected) {
    request_spec r;
    r.prompt = e.prompt;
    r.stop.max_tokens = static_cast<std::int32_t>(e.generated.size());
    r.stop.ignore_eos = true;
    out.push_back(r);
  }
  return out;
}

// What one request of a batch produced, as these tests compare it.
struct generated {
  std::vector<resources::token_id> generated_ids;
  std::vector<std::vector<float>> step_logits;
  std::int64_t matched_tokens = 0;
};

// Runs `reqs` together through the engine (logits kept on request).
result<std::vector<generated>> generate(local_engine& e, std::vector<request_spec> reqs,
                                        bool keep_logits = false) {
  for (auto& r : reqs)
    r.keep_logits = keep_logits;
  auto done = engine::run_to_completion(e, std::move(reqs));
  if (!done)
    return done.error();
  std::vector<generated> out;
  for (auto& c : *done) {
    if (c.finished[0] == engine::finish_reason::error) {
      return make_error(errc::internal, c.id + ": " + c.errors[0]);
    }
    out.push_back({std::move(c.tokens[0]), std::move(c.logits[0]), c.counts.cached_tokens});
  }
  return out;
}

// Two runs of one request that must agree bit for bit: the same tokens and
// every step's logits equal.
void expect_same_bits(const generated& a, const generated& b) {
  EXPECT_EQ(a.generated_ids, b.generated_ids);
  ASSERT_EQ(a.step_logits.size(), b.step_logits.size());
  for (std::size_t s = 0; s < a.step_logits.size(); ++s)
    EXPECT_EQ(a.step_logits[s], b.step_logits[s]) << "step " << s;
}

std::unique_ptr<local_engine> load_on_gpu(const std::string& name, mstar::dtype dtype,
                                          pool_options pools = {}, bool graphs = true) {
  run_options run;
  run.device = "cuda";
  run.dtype = dtype;
  run.cuda_graphs = graphs;
  auto model = nemotron_h_model::load(model_dir(name), run);
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  EXPECT_NE((*model)->device_name().find("cuda:0"), std::string::npos);
  engine::engine_config config;
  config.pools = pools;
  auto e = local_engine::make(std::move(*model), config);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  if (!e)
    return nullptr;
  auto& p = (*e)->pools();
  if (p.kv() != nullptr) {
    EXPECT_EQ(p.kv()->storage().kind(), kernels::memory_kind::device);
  }
  if (p.recurrent() != nullptr) {
    EXPECT_EQ(p.recurrent()->storage("ssm")->kind(), kernels::memory_kind::device);
  }
  return std::move(*e);
}

void expect_pools_whole(local_engine& e) {
  auto ok = e.pools().check_invariants();  // reads the device: freed slots are zero
  EXPECT_TRUE(ok.has_value()) << ok.error().message();
}

// Max |a - b| over a step and the largest |b|.
std::pair<double, double> diff(std::span<const float> a, std::span<const float> b) {
  double d = 0, m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
    m = std::max(m, std::abs(static_cast<double>(b[i])));
  }
  return {d, m};
}

class gpu_model_parity : public ::testing::TestWithParam<std::string> {};

TEST_P(gpu_model_parity, float32_weights_give_the_fixture_tokens_and_logits) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected(GetParam());
  auto model = load_on_gpu(GetParam(), mstar::dtype::float32);
  ASSERT_NE(model, nullptr);
  const auto vocab = static_cast<std::size_t>(model->model().vocab_size());
  auto got = generate(*model, greedy(expected), /*keep_logits=*/true);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    EXPECT_EQ((*got)[i].generated_ids, expected[i].generated);
    for (std::size_t s = 0; s < (*got)[i].step_logits.size(); ++s) {
      const auto [d, m] =
          diff((*got)[i].step_logits[s], {expected[i].step_logits.data() + s * vocab, vocab});
      worst = std::max(worst, d);
      EXPECT_LT(d, f32_logits_tolerance) << "step " << s;
    }
  }
  std::printf("[ measured ] %s float32 on the GPU: max |logit - transformers| %.3g\n",
              GetParam().c_str(), worst);
  expect_pools_whole(*model);
  // Greedy ids taken on the device (no logits cross) give the same tokens,
  // one prompt at a time.
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto reqs = greedy(expected);
    auto one = generate(*model, {reqs[i]});
    ASSERT_TRUE(one.has_value()) << one.error().message();
    EXPECT_EQ(one->front().generated_ids, expected[i].generated) << "prompt " << i;
  }
  expect_pools_whole(*model);
}

TEST_P(gpu_model_parity, bfloat16_weights_follow_the_fixture_tokens_and_logits) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected(GetParam());
  auto model = load_on_gpu(GetParam(), mstar::dtype::bfloat16);
  ASSERT_NE(model, nullptr);
  const auto vocab = static_cast<std::size_t>(model->model().vocab_size());
  // Every step, not only the first: while the GPU's tokens equal the
  // fixture's, each step's logits stay within the budget and its token is
  // the fixture's. A different token is allowed only where the fixture's
  // logits nearly tie (the GPU's pick within twice the budget of the
  // fixture's); the steps after it follow other tokens and are not compared.
  auto got = generate(*model, greedy(expected), /*keep_logits=*/true);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  double worst = 0;
  std::size_t same = 0, compared = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const auto& g = (*got)[i];
    const auto& e = expected[i];
    ASSERT_EQ(g.generated_ids.size(), e.generated.size());
    ASSERT_EQ(g.step_logits.size(), e.generated.size());
    bool diverged = false;
    for (std::size_t s = 0; s < e.generated.size() && !diverged; ++s) {
      const float* want = e.step_logits.data() + s * vocab;
      const auto [d, m] = diff(g.step_logits[s], {want, vocab});
      worst = std::max(worst, d / m);
      ++compared;
      EXPECT_LT(d / m, bf16_logits_budget) << "step " << s;
      if (g.generated_ids[s] != e.generated[s]) {
        diverged = true;
        const double gap = static_cast<double>(want[e.generated[s]]) - want[g.generated_ids[s]];
        EXPECT_LE(gap, 2 * bf16_logits_budget * m)
            << "step " << s << ": token " << g.generated_ids[s] << " instead of " << e.generated[s]
            << ", which leads by " << gap << " in the fixture";
      }
    }
    same += diverged ? 0 : 1;
  }
  std::printf(
      "[ measured ] %s bfloat16 on the GPU: normalised logit error at most %.3g over %zu "
      "steps; every token equal in %zu of %zu prompts\n",
      GetParam().c_str(), worst, compared, same, expected.size());
  expect_pools_whole(*model);
}

INSTANTIATE_TEST_SUITE_P(tiny, gpu_model_parity,
                         ::testing::Values("nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn"));

// Batch-1 decode with bf16 weights folds each norm into the GEMV after it
// and each output projection's add into its GEMV (models/cuda: layer_io);
// the folded kernels compute the unfolded ones' values, so every prompt run
// alone gives the same tokens and the same logits bit for bit with the fold
// off (MSTAR_FUSED_NORM=0, read when the model is made).
TEST(gpu_model_fused_norms, batch_one_decode_equals_the_separate_norm_launches_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  for (const char* name : {"nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn"}) {
    SCOPED_TRACE(name);
    const auto expected = load_expected(name);
    ASSERT_EQ(setenv("MSTAR_FUSED_NORM", "0", 1), 0);
    auto separate = load_on_gpu(name, mstar::dtype::bfloat16);
    ASSERT_EQ(unsetenv("MSTAR_FUSED_NORM"), 0);
    auto folded = load_on_gpu(name, mstar::dtype::bfloat16);
    ASSERT_NE(separate, nullptr);
    ASSERT_NE(folded, nullptr);
    const auto reqs = greedy(expected);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("prompt " + std::to_string(i));
      auto a = generate(*separate, {reqs[i]}, true);
      auto b = generate(*folded, {reqs[i]}, true);
      ASSERT_TRUE(a.has_value()) << a.error().message();
      ASSERT_TRUE(b.has_value()) << b.error().message();
      expect_same_bits((*a)[0], (*b)[0]);
    }
    expect_pools_whole(*folded);
  }
}

// A hybrid_override_pattern's layers: M Mamba-2, * attention, - MLP.
std::vector<layer_kind> layers_of(std::string_view pattern) {
  std::vector<layer_kind> out;
  for (const char ch : pattern) {
    out.push_back(ch == 'M'   ? layer_kind::mamba2
                  : ch == '*' ? layer_kind::attention
                              : layer_kind::mlp);
  }
  return out;
}

// The tiny fixtures' gated-norm groups are 64 channels, which
// gated_rms_norm's warp form does not take, so their Mamba-2 out_proj keeps
// its two launches folded or not. These random-weight shapes have groups of
// 256 and 128 (in_proj rows a whole number of float4s), so the folded step
// also norms y inside out_proj's GEMV (gated_rms_norm_linear_bf16).
nemotron_h_config gated_fold_config(std::int64_t n_groups) {
  nemotron_h_config c;
  c.vocab_size = 512;
  c.hidden_size = 128;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 16;
  c.intermediate_size = 256;
  c.mamba_num_heads = 32;
  c.mamba_head_dim = 16;  // d_inner 512
  c.ssm_state_size = 16;
  c.n_groups = n_groups;
  c.chunk_size = 8;
  c.layers = layers_of("M*M-M*-");
  return c;
}

std::unique_ptr<local_engine> random_on_gpu(const nemotron_h_config& c) {
  run_options run;
  run.device = "cuda";
  run.dtype = mstar::dtype::bfloat16;
  auto model = nemotron_h_model::random(c, 7, run);
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  auto e = local_engine::make(std::move(*model), engine::engine_config{});
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

// random_on_gpu with each (name, value) of `env` in the environment while
// the model is made (where it reads its A/B switches; an empty value is
// left unset), every name unset after.
std::unique_ptr<local_engine> random_on_gpu_with(
    const nemotron_h_config& c, std::initializer_list<std::pair<const char*, const char*>> env) {
  for (const auto& [name, value] : env) {
    if (*value != '\0') {
      EXPECT_EQ(setenv(name, value, 1), 0);
    }
  }
  auto e = random_on_gpu(c);
  for (const auto& [name, value] : env)
    EXPECT_EQ(unsetenv(name), 0);
  return e;
}

// random_on_gpu with `off`=0 in the environment while the model is made.
std::unique_ptr<local_engine> random_on_gpu_without(const nemotron_h_config& c, const char* off) {
  return random_on_gpu_with(c, {{off, "0"}});
}

// Prompts of 5 and 17 tokens (token i: 3 + i * step mod 250), eight
// tokens each: `separate` and `folded` give the same tokens and logits bit
// for bit.
void expect_same_prompts_bit_for_bit(local_engine& separate, local_engine& folded,
                                     std::size_t step) {
  for (const std::size_t length : {std::size_t{5}, std::size_t{17}}) {
    SCOPED_TRACE("prompt of " + std::to_string(length));
    request_spec r;
    for (std::size_t i = 0; i < length; ++i)
      r.prompt.push_back(static_cast<resources::token_id>(3 + (i * step) % 250));
    r.stop.max_tokens = 8;
    r.stop.ignore_eos = true;
    auto a = generate(separate, {r}, true);
    auto b = generate(folded, {r}, true);
    ASSERT_TRUE(a.has_value()) << a.error().message();
    ASSERT_TRUE(b.has_value()) << b.error().message();
    expect_same_bits((*a)[0], (*b)[0]);
  }
}

TEST(gpu_model_fused_norms, batch_one_decode_folds_the_gated_norm_bit_for_bit_in_groups_of_128) {
  MSTAR_REQUIRE_GPU();
  if (!kernels::cuda::gated_rms_norm_warp_form())
    GTEST_SKIP() << "MSTAR_GATED_NORM_WARP=0: the gated norm is never folded";
  for (const std::int64_t n_groups : {2, 4}) {
    const auto config = gated_fold_config(n_groups);
    SCOPED_TRACE("groups of " + std::to_string(config.gated_norm_group_size()));
    auto separate = random_on_gpu_without(config, "MSTAR_FUSED_NORM");
    auto folded = random_on_gpu(config);
    ASSERT_NE(separate, nullptr);
    ASSERT_NE(folded, nullptr);
    ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*separate, *folded, 37));
    expect_pools_whole(*folded);
  }
}

// A batch-1 step also folds the MLP's activation (relu2) and the
// attention output's rounding to bf16 into the GEMV after them
// (cuda_common.hpp's f32_folds: activation_linear_bf16), each Mamba-2
// layer's conv step into its in_proj GEMV (conv_fold_enabled), the token's
// lookup into the first layer's GEMVs (embed_fold_enabled), each attention
// layer's K / V append into its q / k / v GEMV (append_fold_enabled) and
// runs the MLP's activation in its up GEMV's epilogue (mlp_epilogue_enabled),
// all on by default. With any one of them turned off (MSTAR_ACT_FOLD=0,
// MSTAR_BF16_FOLD=0, MSTAR_CONV_FOLD=0, MSTAR_EMBED_FOLD=0,
// MSTAR_KV_APPEND_FOLD=0, MSTAR_MLP_EPILOGUE=0, read when the model is made)
// every prompt gives the same tokens and logits bit for bit.
TEST(gpu_model_fused_norms,
     batch_one_decode_folds_activation_rounding_conv_and_lookup_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  const auto config = gated_fold_config(4);  // MLP and attention layers
  auto folded = random_on_gpu(config);
  ASSERT_NE(folded, nullptr);
  for (const char* off : {"MSTAR_ACT_FOLD", "MSTAR_BF16_FOLD", "MSTAR_CONV_FOLD",
                          "MSTAR_EMBED_FOLD", "MSTAR_KV_APPEND_FOLD", "MSTAR_MLP_EPILOGUE"}) {
    SCOPED_TRACE(std::string{off} + "=0");
    auto separate = random_on_gpu_without(config, off);
    ASSERT_NE(separate, nullptr);
    ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*separate, *folded, 29));
    expect_pools_whole(*separate);
  }
  expect_pools_whole(*folded);
}

// Requests of `lengths` prompt tokens (token i: 3 + (i * mul + length) mod
// 250), each drawing `base + length % spread` tokens, EOS ignored.
std::vector<request_spec> ramp_requests(std::initializer_list<std::size_t> lengths, std::size_t mul,
                                        std::int32_t base, std::int32_t spread) {
  std::vector<request_spec> reqs;
  for (const std::size_t length : lengths) {
    request_spec r;
    for (std::size_t i = 0; i < length; ++i)
      r.prompt.push_back(static_cast<resources::token_id>(3 + (i * mul + length) % 250));
    r.stop.max_tokens = base + static_cast<std::int32_t>(length) % spread;
    r.stop.ignore_eos = true;
    reqs.push_back(r);
  }
  return reqs;
}

// `reqs` through `a` and `b`, each alone and then together (the batch
// shrinking as the shorter ones end), ids drawn on the device: the same
// tokens, every request's whole budget.
void expect_same_drawn_tokens(local_engine& a, local_engine& b,
                              const std::vector<request_spec>& reqs) {
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i) + ", drawn");
    auto x = generate(a, {reqs[i]});
    auto y = generate(b, {reqs[i]});
    ASSERT_TRUE(x.has_value()) << x.error().message();
    ASSERT_TRUE(y.has_value()) << y.error().message();
    EXPECT_EQ((*x)[0].generated_ids, (*y)[0].generated_ids);
    EXPECT_EQ((*y)[0].generated_ids.size(), static_cast<std::size_t>(reqs[i].stop.max_tokens));
  }
  SCOPED_TRACE("together");
  auto x = generate(a, reqs);
  auto y = generate(b, reqs);
  ASSERT_TRUE(x.has_value()) << x.error().message();
  ASSERT_TRUE(y.has_value()) << y.error().message();
  ASSERT_EQ(x->size(), y->size());
  for (std::size_t i = 0; i < x->size(); ++i)
    EXPECT_EQ((*x)[i].generated_ids, (*y)[i].generated_ids) << "request " << i;
}

// A batch-1 greedy step draws its token in the LM head's GEMV
// (argmax_fold_enabled, on by default; MSTAR_ARGMAX_FOLD=0 while `plain` is
// made) instead of an argmax launch after it: the same tokens and logits bit for
// bit, whether the logits are kept or only the ids are drawn (decode graphs
// replaying the fold step after step, each launch leaving its state ready
// for the next), and two rows at once (the argmax launch) between
// one-row steps change nothing.
TEST(gpu_model_fused_norms, batch_one_greedy_steps_draw_in_the_head_gemv_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  const auto config = gated_fold_config(4);
  auto plain = random_on_gpu_without(config, "MSTAR_ARGMAX_FOLD");
  auto drawn = random_on_gpu(config);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(drawn, nullptr);
  ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*plain, *drawn, 23));
  ASSERT_NO_FATAL_FAILURE(
      expect_same_drawn_tokens(*plain, *drawn, ramp_requests({5, 33}, 41, 20, 7)));
  expect_pools_whole(*drawn);
}

// Side downloads (on unless MSTAR_SIDE_DOWNLOAD=0: each forward's draws
// cross to pinned memory on a second stream after an event, so the next
// forward does not queue behind the copy) change where the copy runs, never
// what it copies: the same requests, alone and together, draw the same
// tokens, logits kept (those stay on the step's stream) or not.
TEST(gpu_model_side_download, draws_copied_on_a_second_stream_are_the_same_tokens) {
  MSTAR_REQUIRE_GPU();
  const auto config = gated_fold_config(4);
  auto plain = random_on_gpu_without(config, "MSTAR_SIDE_DOWNLOAD");
  auto side = random_on_gpu(config);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(side, nullptr);
  ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*plain, *side, 19));
  ASSERT_NO_FATAL_FAILURE(
      expect_same_drawn_tokens(*plain, *side, ramp_requests({6, 21, 40}, 43, 12, 9)));
  expect_pools_whole(*side);
}

// bench/make_checkpoint.py's 0.56B widths (hidden 2048; 64 Mamba heads of
// 64, state 128, 8 groups; MLP 8192; 16 query heads of 128) over six
// layers and an 8,192-token vocabulary: kernels long enough for a chained
// kernel's blocks to start while the one before is still writing.
nemotron_h_config wide_config() {
  nemotron_h_config c;
  c.vocab_size = 8192;
  c.hidden_size = 2048;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.intermediate_size = 8192;
  c.mamba_num_heads = 64;
  c.mamba_head_dim = 64;
  c.ssm_state_size = 128;
  c.n_groups = 8;
  c.layers = layers_of("M-M*M-");
  return c;
}

// One engine, the same 16 requests four times, then one of them alone four
// times: the same tokens every run. A chained kernel that read its inputs
// through the read-only path (`__ldg`) after its wait drew different tokens
// from run to run at these widths (session 45: the SSD update's x, B and C,
// in the rows whose blocks started first); common.cuh's load_coherent is
// the rule now. The random weights' logits lie close together, so a flipped
// bit anywhere soon shows as a different token.
TEST(gpu_model_repeats, a_wide_model_draws_the_same_tokens_every_run) {
  MSTAR_REQUIRE_GPU();
  auto e = random_on_gpu(wide_config());
  ASSERT_NE(e, nullptr);
  std::vector<request_spec> batch;
  for (std::size_t i = 0; i < 16; ++i)
    batch.push_back(ramp_requests({32}, 7 + 2 * i, 48, 1)[0]);
  for (const std::size_t n : {std::size_t{16}, std::size_t{1}}) {
    const std::vector<request_spec> reqs(batch.begin(), batch.begin() + static_cast<long>(n));
    std::vector<std::vector<resources::token_id>> first;
    for (int run = 0; run < 4; ++run) {
      SCOPED_TRACE(std::to_string(n) + " requests, run " + std::to_string(run));
      auto got = generate(*e, reqs);
      ASSERT_TRUE(got.has_value()) << got.error().message();
      ASSERT_EQ(got->size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ((*got)[i].generated_ids.size(), 48U);
        if (run == 0)
          first.push_back((*got)[i].generated_ids);
        else
          EXPECT_EQ((*got)[i].generated_ids, first[i]) << "request " << i;
      }
    }
  }
  expect_pools_whole(*e);
}

// Whether ssd_update_gated_norm takes a one-row decode step (the only one
// the model folds) of `c`'s Mamba-2 layers laid out as the model lays them
// out (the gate z and the SSD's inputs slices of an in_proj_size()-float
// row): so the fold tests below run the fold, not the launches it replaces.
bool ssd_norm_fold_takes(const nemotron_h_config& c) {
  using kernels::cuda::device_buffer;
  constexpr std::int32_t rows = 1;
  auto any = device_buffer::make(static_cast<std::size_t>(c.in_proj_size() * 4 + 64));
  EXPECT_TRUE(any.has_value());
  if (!any)
    return false;
  auto* f = any->as<float>();
  const std::vector<std::int32_t> slots(static_cast<std::size_t>(rows), 0);
  kernels::ssd_update_params p;
  p.w = {f,
         f,
         f,
         static_cast<std::int32_t>(c.mamba_num_heads),
         static_cast<std::int32_t>(c.mamba_head_dim),
         static_cast<std::int32_t>(c.ssm_state_size),
         static_cast<std::int32_t>(c.n_groups)};
  p.in = {f, f, f, f, c.in_proj_size(), c.in_proj_size(), c.in_proj_size()};
  p.y = f;
  p.batch = rows;
  p.state = f;
  p.slot_indices = slots;
  const kernels::cuda::ssd_gated_norm_fold fold{
      f, c.in_proj_size(), f, 1e-5F, c.gated_norm_group_size(), any->as<std::uint16_t>()};
  return kernels::cuda::ssd_update_gated_norm_fits(p, fold);
}

// The gated norm folded into the SSD update (on by default; MSTAR_SSD_NORM_FOLD=0
// while `plain` is made: a norm group's heads meet in a cluster, out_proj
// reads the bf16 row) gives the tokens and logits of its two launches bit
// for bit: prompts at batch 1 (where the unfolded step norms y in out_proj's
// GEMV), the same requests alone and together (more rows: both engines
// launch gated_rms_norm, then cuBLAS), at groups of 128 and 256 (two and
// four heads) with state 64, and at the 0.56B's widths (groups of 512,
// state 128), where chained kernels overlap.
TEST(gpu_model_ssd_norm_fold, the_gated_norm_in_the_ssd_update_gives_the_same_bits) {
  MSTAR_REQUIRE_GPU();
  for (const std::int64_t n_groups : {2, 4}) {
    auto config = gated_fold_config(n_groups);
    config.ssm_state_size = 64;  // the fold's SSD update takes N 64 and 128,
    config.mamba_num_heads = 8;  // norm groups of at most eight heads (a cluster)
    config.mamba_head_dim = 64;
    SCOPED_TRACE("groups of " + std::to_string(config.gated_norm_group_size()));
    ASSERT_TRUE(ssd_norm_fold_takes(config));
    auto plain = random_on_gpu_without(config, "MSTAR_SSD_NORM_FOLD");
    auto folded = random_on_gpu(config);
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(folded, nullptr);
    ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*plain, *folded, 31));
    ASSERT_NO_FATAL_FAILURE(
        expect_same_drawn_tokens(*plain, *folded, ramp_requests({6, 21, 40}, 47, 10, 9)));
    expect_pools_whole(*folded);
  }
  SCOPED_TRACE("the 0.56B's widths");
  const auto wide = wide_config();
  ASSERT_TRUE(ssd_norm_fold_takes(wide));
  auto plain = random_on_gpu_without(wide, "MSTAR_SSD_NORM_FOLD");
  auto folded = random_on_gpu(wide);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(folded, nullptr);
  ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*plain, *folded, 13));
  ASSERT_NO_FATAL_FAILURE(
      expect_same_drawn_tokens(*plain, *folded, ramp_requests({9, 30}, 53, 24, 5)));
  expect_pools_whole(*folded);
}

// The plan kernel (MSTAR_PLAN_KERNEL=1: the step's plan read over the bus
// by one kernel that also writes the loopback draws, in place of the upload
// and the gather; =2, the default: in a decode graph that kernel is also the
// graph's first node, set to each step's plan) moves no id against the
// upload and the gather (=0): alone, with side downloads and with the plan
// inlined in the kernel's parameters (MSTAR_PLAN_INLINE=1), the same
// requests, alone and together, draw the same tokens, and every prompt
// gives the same logits.
TEST(gpu_model_plan_kernel, plans_read_by_a_kernel_draw_the_same_tokens) {
  MSTAR_REQUIRE_GPU();
  const auto config = gated_fold_config(4);
  auto plain =
      random_on_gpu_with(config, {{"MSTAR_SIDE_DOWNLOAD", "0"}, {"MSTAR_PLAN_KERNEL", "0"}});
  ASSERT_NE(plain, nullptr);
  for (const char* mode : {"1", "2"}) {
    for (const int form : {0, 1, 2}) {
      // form 0 alone, 1 with side downloads, 2 with the plan inlined in the
      // kernel's parameters (MSTAR_PLAN_INLINE=1).
      const bool side = form == 1;
      SCOPED_TRACE(std::string{"MSTAR_PLAN_KERNEL="} + mode +
                   (side        ? ", with side downloads"
                    : form == 2 ? ", inlined"
                                : ", alone"));
      auto kernel = random_on_gpu_with(config, {{"MSTAR_PLAN_KERNEL", mode},
                                                {"MSTAR_SIDE_DOWNLOAD", side ? "1" : "0"},
                                                {"MSTAR_PLAN_INLINE", form == 2 ? "1" : "0"}});
      ASSERT_NE(kernel, nullptr);
      ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*plain, *kernel, 17));
      ASSERT_NO_FATAL_FAILURE(
          expect_same_drawn_tokens(*plain, *kernel, ramp_requests({7, 26, 3}, 47, 11, 8)));
      expect_pools_whole(*kernel);
    }
  }
}

// `reqs` one at a time, then together, through an engine made of `config`
// after `set_up` ran (what the engine's graphs and launches capture), every
// step's logits kept; each run's requests in order, then the batch's.
std::vector<std::vector<generated>> runs_alone_and_together(const nemotron_h_config& config,
                                                            const std::vector<request_spec>& reqs,
                                                            const std::function<void()>& set_up) {
  set_up();
  std::vector<std::vector<generated>> out;
  auto e = random_on_gpu(config);
  EXPECT_NE(e, nullptr);
  if (e == nullptr)
    return out;
  for (const auto& r : reqs) {
    auto one = generate(*e, {r}, true);
    EXPECT_TRUE(one.has_value()) << one.error().message();
    if (one)
      out.push_back(std::move(*one));
  }
  auto together = generate(*e, reqs, true);
  EXPECT_TRUE(together.has_value()) << together.error().message();
  if (together)
    out.push_back(std::move(*together));
  expect_pools_whole(*e);
  return out;
}

// Two runs_alone_and_together of the same `reqs`: the same tokens and
// logits bit for bit, request by request.
void expect_same_runs(const std::vector<std::vector<generated>>& a,
                      const std::vector<std::vector<generated>>& b, std::size_t requests) {
  ASSERT_EQ(a.size(), requests + 1);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i < requests ? "prompt " + std::to_string(i) : std::string{"together"});
    ASSERT_EQ(a[i].size(), b[i].size());
    for (std::size_t j = 0; j < a[i].size(); ++j)
      expect_same_bits(a[i][j], b[i][j]);
  }
}

// Two reads moved before the work they wait on in a decode step (both
// opt-in): the SSD update's slots and states before its chained wait
// (MSTAR_SSD_EARLY=1, read when the model is made) and the accumulating
// GEMVs' residual right after theirs (kernels::cuda::gemv_residual_early).
// The same requests, one at a time and together, give the same tokens and
// logits bit for bit; each engine runs whole under one setting (graphs keep
// what their capture saw).
TEST(gpu_model_early_reads, ssd_states_and_residuals_read_early_give_the_same_bits) {
  MSTAR_REQUIRE_GPU();
  const bool before = kernels::cuda::gemv_residual_early();
  const auto config = gated_fold_config(4);
  const auto reqs = ramp_requests({6, 19, 2}, 53, 5, 6);
  const auto plain = runs_alone_and_together(config, reqs, [] {
    kernels::cuda::set_gemv_residual_early(false);
    EXPECT_EQ(unsetenv("MSTAR_SSD_EARLY"), 0);
  });
  // The early state reads count on the GEMVs' late release.
  const auto early = runs_alone_and_together(config, reqs, [] {
    kernels::cuda::set_gemv_residual_early(true);
    kernels::cuda::set_gemv_chain_late(true);
    EXPECT_TRUE(kernels::cuda::gemv_releases_after_wait());
    EXPECT_EQ(setenv("MSTAR_SSD_EARLY", "1", 1), 0);
  });
  kernels::cuda::set_gemv_chain_late(false);
  kernels::cuda::set_gemv_residual_early(before);
  EXPECT_EQ(unsetenv("MSTAR_SSD_EARLY"), 0);
  expect_same_runs(plain, early, reqs.size());
}

// A one-token step projects q, k and v in one product over their
// concatenated rows (nemotron_h_cuda's qkv); each output row is the same
// dot as in its own product, so with MSTAR_QKV_FUSED=0 (three products,
// read when the model is made) every prompt gives the same tokens and
// logits bit for bit.
TEST(gpu_model_fused_qkv, one_token_steps_project_qkv_in_one_product_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  const auto config = gated_fold_config(4);  // attention layers among the others
  auto separate = random_on_gpu_without(config, "MSTAR_QKV_FUSED");
  auto fused = random_on_gpu(config);
  ASSERT_NE(separate, nullptr);
  ASSERT_NE(fused, nullptr);
  ASSERT_NO_FATAL_FAILURE(expect_same_prompts_bit_for_bit(*separate, *fused, 31));
  expect_pools_whole(*fused);
}

// Chained launches (kernels::cuda::chained_launches: each decode kernel may
// start while the one before drains, a GEMV streaming its first weights)
// change when kernels start, never what they compute: the same requests,
// one at a time and together, give the same tokens and logits bit for bit
// with every launch plain, and with the GEMVs' late release. Graphs are
// captured in the engine's first steps, so each engine runs whole under one
// setting.
TEST(gpu_model_chained, decode_with_chained_launches_equals_plain_launches_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  const bool before = kernels::cuda::chained_launches();
  const auto config = gated_fold_config(4);
  const auto reqs = ramp_requests({5, 17, 9}, 37, 4, 5);
  const auto plain =
      runs_alone_and_together(config, reqs, [] { kernels::cuda::set_chained_launches(false); });
  const auto chained =
      runs_alone_and_together(config, reqs, [] { kernels::cuda::set_chained_launches(true); });
  // The GEMVs' release after their dots (`late`) in place of the default
  // `wave` (one-wave grids release at their start): the same bits too.
  const auto late = runs_alone_and_together(config, reqs, [] {
    kernels::cuda::set_chained_launches(true);
    kernels::cuda::set_gemv_chain_late(true);
  });
  kernels::cuda::set_gemv_chain_late(false);
  kernels::cuda::set_chained_launches(before);
  expect_same_runs(plain, chained, reqs.size());
  expect_same_runs(plain, late, reqs.size());
}

TEST(gpu_model_graphs, replayed_decode_graphs_match_launching_every_kernel) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  auto eager = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::float32, {}, false);
  auto graphed = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::float32, {}, true);
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(graphed, nullptr);
  // Different budgets per request: the batch shrinks as requests finish, so
  // several row counts get their own graph; run twice so graphs replay.
  auto reqs = greedy(expected);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    reqs[i].stop.max_tokens = static_cast<std::int32_t>(2 + i);
  auto a = generate(*eager, reqs, true);
  ASSERT_TRUE(a.has_value()) << a.error().message();
  for (int round = 0; round < 2; ++round) {
    auto b = generate(*graphed, reqs, true);
    ASSERT_TRUE(b.has_value()) << b.error().message();
    double worst = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ((*a)[i].generated_ids, (*b)[i].generated_ids) << "prompt " << i;
      for (std::size_t s = 0; s < (*a)[i].step_logits.size(); ++s)
        worst = std::max(worst, diff((*b)[i].step_logits[s], (*a)[i].step_logits[s]).first);
    }
    EXPECT_LT(worst, 1e-4) << "round " << round;
    std::printf("[ measured ] graphs vs eager, round %d: max |logit diff| %.3g\n", round, worst);
  }
  expect_pools_whole(*graphed);
}

TEST(gpu_model_sampling, tokens_drawn_on_the_device_match_the_cpu_sampler) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  auto gpu = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::float32);
  auto cpu_model = nemotron_h_model::load(model_dir("nemotron_h_tiny_hybrid"));
  ASSERT_NE(gpu, nullptr);
  ASSERT_TRUE(cpu_model.has_value());
  auto cpu = local_engine::make(std::move(*cpu_model), {});
  ASSERT_TRUE(cpu.has_value());
  auto reqs = greedy(expected);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = 0.8F;
    reqs[i].sampling.top_k = static_cast<std::int32_t>(i % 3 == 0 ? 0 : 20);
    reqs[i].sampling.top_p = i % 2 == 0 ? 1.0F : 0.9F;
    reqs[i].sampling.seed = 1000 + i;
  }
  reqs[1].sampling.temperature = 0.0F;        // one greedy row among sampled ones
  auto on_device = generate(*gpu, reqs);      // drawn by the device sampler
  auto on_host = generate(*gpu, reqs, true);  // GPU logits, drawn on the host
  auto reference = generate(**cpu, reqs);     // CPU logits, drawn on the host
  ASSERT_TRUE(on_device.has_value()) << on_device.error().message();
  ASSERT_TRUE(on_host.has_value());
  ASSERT_TRUE(reference.has_value());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ((*on_device)[i].generated_ids, (*reference)[i].generated_ids) << "prompt " << i;
    EXPECT_EQ((*on_host)[i].generated_ids, (*reference)[i].generated_ids) << "prompt " << i;
  }
  expect_pools_whole(*gpu);
}

TEST(gpu_model_warm_up, leaves_the_pools_as_they_were_and_the_tokens_unchanged) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_attn");
  auto model = load_on_gpu("nemotron_h_tiny_attn", mstar::dtype::bfloat16);
  ASSERT_NE(model, nullptr);
  const auto* kv = model->pools().kv();
  const auto free_pages = kv->num_free_pages();
  const auto cached_pages = kv->num_cached_pages();
  auto warmed = model->warm_up();
  ASSERT_TRUE(warmed.has_value()) << warmed.error().message();
  EXPECT_EQ(kv->num_free_pages(), free_pages);
  EXPECT_EQ(kv->num_cached_pages(), cached_pages);
  expect_pools_whole(*model);
  auto fresh = load_on_gpu("nemotron_h_tiny_attn", mstar::dtype::bfloat16);
  ASSERT_NE(fresh, nullptr);
  const auto reqs = greedy(expected);
  auto a = generate(*model, reqs);
  auto b = generate(*fresh, reqs);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  for (std::size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ((*a)[i].generated_ids, (*b)[i].generated_ids) << "prompt " << i;
}

TEST(gpu_model_prefix_reuse, cached_pages_on_the_device_give_the_same_tokens) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_attn");
  pool_options pools;
  pools.page_size = 4;
  auto model = load_on_gpu("nemotron_h_tiny_attn", mstar::dtype::float32, pools);
  ASSERT_NE(model, nullptr);
  const auto reqs = greedy(expected);
  auto first = generate(*model, reqs);
  ASSERT_TRUE(first.has_value());
  auto second = generate(*model, reqs);
  ASSERT_TRUE(second.has_value());
  std::int64_t matched = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    matched += (*second)[i].matched_tokens;
    EXPECT_EQ((*second)[i].generated_ids, expected[i].generated) << "prompt " << i;
  }
  EXPECT_GT(matched, 0);
  expect_pools_whole(*model);
}

// One step driven directly on an engine's model and pools (no scheduler),
// as the engine runs it: admit and plan here, run, then commit (or roll
// back a step that did not run).
struct direct_step {
  engine::step_record rec;
  step_plans plans;
};

result<direct_step> admit_and_plan(local_engine& e, std::span<const step_row> rows) {
  direct_step d;
  for (const auto& r : rows)
    d.rec.ctx.request_ids.push_back(r.rid);
  d.rec.request = std::make_shared<const step_request>(e.model().declare(rows));
  if (!e.pools().admit(d.rec).ok())
    return make_error(errc::internal, "the pools refused a step");
  auto plans = e.pools().plan(d.rec);
  if (!plans)
    return plans.error();
  d.plans = std::move(*plans);
  return d;
}

void add_requests(local_engine& e, std::span<const std::string> rids) {
  for (const auto& rid : rids) {
    (void)e.pools().ingest(rid, nullptr);
    e.pools().apply_cached_prefix(rid, 0);
  }
}

// The first two fixture prompts prefilled together, then `steps` greedy
// decode steps, driven directly; each request's drawn ids. Blocking: each
// step a `forward`, fed the ids it drew on the host. Pipelined: step N+1
// launched before step N finished, its rows fed N's draws on the device
// (loopback) while the host feeds token 0. The rows swap places every
// step, so the loopback is not the identity.
result<std::array<std::vector<std::int32_t>, 2>> decode_directly(
    local_engine& e, const std::vector<fixture_prompt>& prompts, int steps, bool pipelined) {
  const std::array<std::string, 2> rid{"a", "b"};
  add_requests(e, rid);
  auto& model = e.model();
  const std::vector<row_sampling> draws(2);  // greedy
  std::array<std::vector<std::int32_t>, 2> drawn;
  std::array<resources::token_id, 2> fed{0, 0};  // per request
  std::array<std::size_t, 2> order{0, 1};        // the request in each row
  std::vector<step_row> rows{{rid[0], prompts[0].prompt}, {rid[1], prompts[1].prompt}};
  std::optional<std::uint64_t> in_flight;
  std::array<std::size_t, 2> in_flight_order{};
  const auto take = [&](const std::vector<std::int32_t>& ids, std::array<std::size_t, 2> o) {
    for (std::size_t k = 0; k < 2; ++k) {
      drawn[o[k]].push_back(ids[k]);
      if (!pipelined)
        fed[o[k]] = static_cast<resources::token_id>(ids[k]);
    }
  };
  for (int s = 0; s <= steps; ++s) {
    std::vector<std::int32_t> loopback;
    if (s > 0) {
      const auto before = order;
      std::swap(order[0], order[1]);
      for (std::size_t k = 0; k < 2; ++k) {
        rows[k] = {rid[order[k]], std::span{&fed[order[k]], 1}};
        // The row the previous step drew this request's token in.
        loopback.push_back(before[0] == order[k] ? 0 : 1);
      }
    }
    auto d = admit_and_plan(e, rows);
    if (!d)
      return d.error();
    if (!pipelined) {
      auto out = model.forward(rows, d->plans, draws);
      if (!out)
        return out.error();
      if (auto ok = e.pools().commit(d->rec); !ok)
        return ok.error();
      take(out->sampled, order);
      continue;
    }
    auto ticket = model.launch(rows, d->plans, draws, loopback);
    if (!ticket)
      return ticket.error();
    if (auto ok = e.pools().commit(d->rec); !ok)
      return ok.error();
    if (in_flight) {
      auto out = model.finish(*in_flight);
      if (!out)
        return out.error();
      take(out->sampled, in_flight_order);
    }
    in_flight = *ticket;
    in_flight_order = order;
  }
  if (in_flight) {
    auto out = model.finish(*in_flight);
    if (!out)
      return out.error();
    take(out->sampled, in_flight_order);
  }
  for (const auto& r : rid)
    e.pools().remove(r);
  return drawn;
}

TEST(gpu_model_launch, pipelined_steps_with_loopback_draw_the_blocking_tokens) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  ASSERT_GE(expected.size(), 2U);
  // Eager kernels and replayed decode graphs: the gather runs before both.
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "eager");
    auto blocking = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::float32, {}, graphs);
    auto pipelined = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::float32, {}, graphs);
    ASSERT_NE(blocking, nullptr);
    ASSERT_NE(pipelined, nullptr);
    constexpr int steps = 6;
    auto a = decode_directly(*blocking, expected, steps, false);
    auto b = decode_directly(*pipelined, expected, steps, true);
    ASSERT_TRUE(a.has_value()) << a.error().message();
    ASSERT_TRUE(b.has_value()) << b.error().message();
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ((*a)[i].size(), static_cast<std::size_t>(steps + 1));
      EXPECT_EQ((*a)[i], (*b)[i]) << "request " << i;
    }
    expect_pools_whole(*blocking);
    expect_pools_whole(*pipelined);
  }
}

// Direct draws (cuda_common.hpp's direct_draws_enabled: argmax and the
// sampler write each forward's slot, a decode graph a (rows, slot), no copy
// after the step) draw the ids the copied draws do (MSTAR_DIRECT_DRAWS=0,
// read when the model is made): greedy and sampled rows, one request at a
// time and all together (graphs of several row counts for both slots),
// and pipelined steps whose loopback reads the slot the step before wrote.
TEST(gpu_model_launch, direct_draws_equal_the_copied_draws) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  ASSERT_GE(expected.size(), 2U);
  auto reqs = greedy(expected);
  for (std::size_t i = 0; i < reqs.size(); i += 2) {
    reqs[i].sampling.temperature = 0.8F;
    reqs[i].sampling.top_k = 20;
    reqs[i].sampling.seed = 2000 + i;
  }
  for (const bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "eager");
    ASSERT_EQ(setenv("MSTAR_DIRECT_DRAWS", "0", 1), 0);
    auto copied = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::bfloat16, {}, graphs);
    ASSERT_EQ(unsetenv("MSTAR_DIRECT_DRAWS"), 0);
    auto direct = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::bfloat16, {}, graphs);
    ASSERT_NE(copied, nullptr);
    ASSERT_NE(direct, nullptr);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      auto a = generate(*copied, {reqs[i]});
      auto b = generate(*direct, {reqs[i]});
      ASSERT_TRUE(a.has_value()) << a.error().message();
      ASSERT_TRUE(b.has_value()) << b.error().message();
      EXPECT_EQ((*a)[0].generated_ids, (*b)[0].generated_ids) << "prompt " << i;
    }
    auto a = generate(*copied, reqs);
    auto b = generate(*direct, reqs);
    ASSERT_TRUE(a.has_value()) << a.error().message();
    ASSERT_TRUE(b.has_value()) << b.error().message();
    for (std::size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ((*a)[i].generated_ids, (*b)[i].generated_ids) << "together, prompt " << i;
    constexpr int steps = 6;
    auto pa = decode_directly(*copied, expected, steps, true);
    auto pb = decode_directly(*direct, expected, steps, true);
    ASSERT_TRUE(pa.has_value()) << pa.error().message();
    ASSERT_TRUE(pb.has_value()) << pb.error().message();
    EXPECT_EQ(*pa, *pb);
    expect_pools_whole(*copied);
    expect_pools_whole(*direct);
  }
}

TEST(gpu_model_launch, refuses_a_third_outstanding_forward_and_bad_loopbacks) {
  MSTAR_REQUIRE_GPU();
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  ASSERT_GE(expected.size(), 2U);
  auto e = load_on_gpu("nemotron_h_tiny_hybrid", mstar::dtype::float32);
  ASSERT_NE(e, nullptr);
  auto& model = e->model();
  const std::array<std::string, 2> rid{"a", "b"};
  add_requests(*e, rid);
  const std::vector<row_sampling> draws(2);
  const std::vector<step_row> prefill{{rid[0], expected[0].prompt}, {rid[1], expected[1].prompt}};
  const resources::token_id zero = 0;
  const std::array<resources::token_id, 2> two{0, 0};
  const std::vector<step_row> decode{{rid[0], {&zero, 1}}, {rid[1], {&zero, 1}}};
  // Launched, committed; a refused launch rolls its admit back.
  const auto run = [&](std::span<const step_row> rows,
                       std::span<const std::int32_t> loopback) -> result<std::uint64_t> {
    auto d = admit_and_plan(*e, rows);
    if (!d)
      return d.error();
    auto ticket = model.launch(rows, d->plans, draws, loopback);
    if (!ticket) {
      e->pools().rollback(d->rec);
      return ticket.error();
    }
    if (auto ok = e->pools().commit(d->rec); !ok)
      return ok.error();
    return ticket;
  };
  auto t0 = run(prefill, {});
  ASSERT_TRUE(t0.has_value()) << t0.error().message();
  const std::vector<std::int32_t> swapped{1, 0};
  auto t1 = run(decode, swapped);
  ASSERT_TRUE(t1.has_value()) << t1.error().message();
  auto third = run(decode, swapped);
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().code(), errc::invalid_argument) << third.error().message();
  auto first = model.finish(*t0);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(first->sampled.size(), 2U);
  auto wrong = model.finish(*t0);  // finished already
  EXPECT_FALSE(wrong.has_value());
  auto second = model.finish(*t1);
  ASSERT_TRUE(second.has_value()) << second.error().message();
  // No row 2 in a forward of two rows.
  const std::vector<std::int32_t> out_of_range{2, 0};
  auto far = run(decode, out_of_range);
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.error().code(), errc::invalid_argument) << far.error().message();
  // A looped-back row feeds one token.
  const std::vector<step_row> long_row{{rid[0], two}, {rid[1], {&zero, 1}}};
  const std::vector<std::int32_t> first_row{0, -1};
  auto wide = run(long_row, first_row);
  ASSERT_FALSE(wide.has_value());
  EXPECT_EQ(wide.error().code(), errc::invalid_argument) << wide.error().message();
  // The refusals left the pipeline as it was: the last forward's draws loop back.
  auto again = run(decode, swapped);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  auto last = model.finish(*again);
  ASSERT_TRUE(last.has_value()) << last.error().message();
  EXPECT_EQ(last->sampled.size(), 2U);
  for (const auto& r : rid)
    e->pools().remove(r);
  expect_pools_whole(*e);
}

// Overlap against sync on the GPU (float32, decode graphs): the CPU
// checker's random workload (arrivals, cancellations, stop ids, n = 2,
// seeded sampling) run through both engines in lockstep; each step's batch,
// plan shapes and drawn ids must agree bit for bit, and rows that over-ran
// were dropped on the way.
class gpu_overlap : public ::testing::TestWithParam<std::string> {};

TEST_P(gpu_overlap, runs_the_batches_and_draws_of_sync_step_by_step) {
  MSTAR_REQUIRE_GPU();
  const auto engine_for = [&](engine::schedule_mode mode,
                              std::vector<lockstep::ran>& log) -> std::unique_ptr<local_engine> {
    run_options run;
    run.device = "cuda";
    run.dtype = mstar::dtype::float32;
    auto model = nemotron_h_model::load(model_dir(GetParam()), run);
    EXPECT_TRUE(model.has_value()) << model.error().message();
    if (!model)
      return nullptr;
    engine::engine_config config;
    config.schedule = mode;
    config.pools.page_size = 4;
    config.pools.max_num_pages = 96;
    config.pools.max_slots = 7;
    config.scheduler.max_batched_tokens = 24;
    config.scheduler.max_running = 6;
    config.on_step = lockstep::record_into(log);
    auto e = local_engine::make(std::move(*model), config);
    EXPECT_TRUE(e.has_value()) << e.error().message();
    return e ? std::move(*e) : nullptr;
  };
  std::int64_t ahead = 0, dropped = 0;
  for (const std::uint32_t seed : {5U, 99U, 7U, 20261202U}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng{seed};
    const auto requests = lockstep::random_requests(rng, 40);
    std::vector<lockstep::ran> sync_log, overlap_log;
    auto sync = engine_for(engine::schedule_mode::sync, sync_log);
    auto over = engine_for(engine::schedule_mode::overlap, overlap_log);
    ASSERT_NE(sync, nullptr);
    ASSERT_NE(over, nullptr);
    int steps = 0;
    lockstep::run(*sync, *over, sync_log, overlap_log, requests, rng, steps);
    if (HasFatalFailure())
      return;
    ahead += over->counters().ahead_steps;
    dropped += over->counters().dropped_rows;
    std::printf("[ measured ] %s seed %u: %d steps, %lld launched ahead, %lld rows dropped\n",
                GetParam().c_str(), seed, steps,
                static_cast<long long>(over->counters().ahead_steps),
                static_cast<long long>(over->counters().dropped_rows));
    expect_pools_whole(*sync);
    expect_pools_whole(*over);
  }
  EXPECT_GT(ahead, 0);
  // The attention-only fixture covers the rollback of over-run rows on the
  // GPU. The hybrid one's prefill chunks end at every recurrent checkpoint
  // boundary (every page of 4 here), so a sequence is still prefilling, and
  // keeps the next step from going ahead, whenever one of these seeds' rows
  // ends: none over-runs.
  if (GetParam() == "nemotron_h_tiny_attn") {
    EXPECT_GT(dropped, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(tiny, gpu_overlap,
                         ::testing::Values("nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn"));

}  // namespace
}  // namespace mstar::test::gpu
