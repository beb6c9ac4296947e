// Qwen3.5 on the GPU with long prompts: the CUDA model against the CPU model
// on the same random checkpoint, written here at a shape the committed
// fixtures do not have (delta-net key heads of 64, so bfloat16 prefill rows
// of 320 tokens or more run the chunked delta rule; an MLP wider than the
// attention's query width; no `mrope_section`, as a text-only checkpoint may
// leave it out). Steps of up to 2,300 prompt tokens, one long row and many
// short ones: work buffers sized per step must hold what each kernel writes
// (a too-small one gave non-finite logits from 256 tokens on).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/local_engine.hpp"
#include "models/load.hpp"
#include "tests/engine/engine_support.hpp"
#include "tests/gpu/gpu_support.hpp"
#include "tests/support/random.hpp"
#include "tests/support/safetensors_writer.hpp"

namespace mstar::test::gpu {
namespace {

namespace fs = std::filesystem;
using engine::completion;
using engine::local_engine;
using engine::request_spec;

// The checkpoint's shape: hidden 128, 4 layers (delta net, attention, ...),
// delta nets of 2 key heads x 64 and 4 value heads x 64, attention of 2 query
// heads x 64 (query width 128) over 1 KV head, MLP 384.
constexpr std::int64_t long_hidden = 128, long_vocab = 512, long_inter = 384;
constexpr std::int64_t long_heads = 2, long_kv_heads = 1, long_head_dim = 64;
constexpr std::int64_t long_k_heads = 2, long_v_heads = 4, long_k_dim = 64, long_v_dim = 64;

nlohmann::json long_config() {
  return {
      {"architectures", {"Qwen3_5ForCausalLM"}},
      {"model_type", "qwen3_5_text"},
      {"vocab_size", long_vocab},
      {"hidden_size", long_hidden},
      {"intermediate_size", long_inter},
      {"num_hidden_layers", 4},
      {"layer_types", {"linear_attention", "full_attention", "linear_attention", "full_attention"}},
      {"num_attention_heads", long_heads},
      {"num_key_value_heads", long_kv_heads},
      {"head_dim", long_head_dim},
      {"linear_num_key_heads", long_k_heads},
      {"linear_num_value_heads", long_v_heads},
      {"linear_key_head_dim", long_k_dim},
      {"linear_value_head_dim", long_v_dim},
      {"linear_conv_kernel_dim", 4},
      {"hidden_act", "silu"},
      {"rms_norm_eps", 1e-6},
      {"tie_word_embeddings", false},
      {"eos_token_id", 2},
      {"rope_parameters",
       {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}}}};
}

// Writes the checkpoint into `dir`: projections N(0, 1/sqrt(fan-in)),
// zero-centred norms N(0, 0.1), decays and steps as transformers draws them.
bool write_long_checkpoint(const fs::path& dir) {
  std::mt19937 rng(2026);
  safetensors_writer w;
  const auto proj = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
    w.add(name, {rows, cols},
          random_floats(static_cast<std::size_t>(rows * cols), rng,
                        1.0F / std::sqrt(static_cast<float>(cols))));
  };
  const auto small = [&](const std::string& name, std::vector<std::int64_t> shape, float scale,
                         float mean) {
    std::size_t n = 1;
    for (const auto d : shape)
      n *= static_cast<std::size_t>(d);
    auto v = random_floats(n, rng, scale);
    for (auto& x : v)
      x += mean;
    w.add(name, std::move(shape), std::move(v));
  };
  const std::int64_t cd = 2 * long_k_heads * long_k_dim + long_v_heads * long_v_dim;
  const std::int64_t vd = long_v_heads * long_v_dim;
  w.add("model.embed_tokens.weight", {long_vocab, long_hidden},
        random_floats(static_cast<std::size_t>(long_vocab * long_hidden), rng, 1.0F));
  small("model.norm.weight", {long_hidden}, 0.1F, 0.0F);
  proj("lm_head.weight", long_vocab, long_hidden);
  for (int i = 0; i < 4; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    small(p + "input_layernorm.weight", {long_hidden}, 0.1F, 0.0F);
    small(p + "post_attention_layernorm.weight", {long_hidden}, 0.1F, 0.0F);
    proj(p + "mlp.gate_proj.weight", long_inter, long_hidden);
    proj(p + "mlp.up_proj.weight", long_inter, long_hidden);
    proj(p + "mlp.down_proj.weight", long_hidden, long_inter);
    if (i % 2 == 0) {
      const std::string a = p + "linear_attn.";
      proj(a + "in_proj_qkv.weight", cd, long_hidden);
      proj(a + "in_proj_z.weight", vd, long_hidden);
      proj(a + "in_proj_b.weight", long_v_heads, long_hidden);
      proj(a + "in_proj_a.weight", long_v_heads, long_hidden);
      small(a + "conv1d.weight", {cd, 1, 4}, 0.5F, 0.0F);
      small(a + "dt_bias", {long_v_heads}, 0.1F, 0.0F);
      std::vector<float> a_log(static_cast<std::size_t>(long_v_heads));
      std::uniform_real_distribution<float> decay(1.0F, 16.0F);
      for (auto& x : a_log)
        x = std::log(decay(rng));
      w.add(a + "A_log", {long_v_heads}, std::move(a_log));
      small(a + "norm.weight", {long_v_dim}, 0.1F, 1.0F);
      proj(a + "out_proj.weight", long_hidden, vd);
    } else {
      const std::string a = p + "self_attn.";
      proj(a + "q_proj.weight", 2 * long_heads * long_head_dim, long_hidden);
      proj(a + "k_proj.weight", long_kv_heads * long_head_dim, long_hidden);
      proj(a + "v_proj.weight", long_kv_heads * long_head_dim, long_hidden);
      proj(a + "o_proj.weight", long_hidden, long_heads * long_head_dim);
      small(a + "q_norm.weight", {long_head_dim}, 0.1F, 0.0F);
      small(a + "k_norm.weight", {long_head_dim}, 0.1F, 0.0F);
    }
  }
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << long_config().dump(2);
  return w.write(dir / "model.safetensors");
}

const fs::path& long_checkpoint() {
  static const fs::path dir = [] {
    const fs::path d =
        fs::temp_directory_path() / ("mstar-gpu-qwen3_5-long-" + std::to_string(::getpid()));
    if (!write_long_checkpoint(d))
      ADD_FAILURE() << "could not write " << d;
    return d;
  }();
  return dir;
}

std::unique_ptr<local_engine> long_engine(const std::string& device, mstar::dtype dtype) {
  models::run_options run;
  run.device = device;
  run.dtype = dtype;
  auto model = models::load_causal_lm(long_checkpoint(), run);
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  engine::engine_config config;
  config.pools.max_num_pages = 1024;
  config.pools.max_slots = 24;
  config.pools.prefix_cache = false;
  config.scheduler.max_batched_tokens = 4096;  // each batch below in one prefill step
  config.scheduler.max_running = 16;
  auto e = local_engine::make(std::move(*model), config);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

// Rows of these prompt lengths, each making 3 tokens with their logits.
std::vector<request_spec> long_batch(const std::vector<int>& lengths, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(3, static_cast<int>(long_vocab) - 1);
  std::vector<request_spec> out;
  for (const int n : lengths) {
    std::vector<engine::token_id> prompt(static_cast<std::size_t>(n));
    for (auto& t : prompt)
      t = id(rng);
    out.push_back(test::greedy_request(std::move(prompt), 3, true));
  }
  return out;
}

struct long_case {
  const char* name;
  std::vector<int> lengths;
};
const long_case long_cases[] = {
    {"1 x 256", {256}},
    {"1 x 1100", {1100}},
    {"8 x 40", {40, 40, 40, 40, 40, 40, 40, 40}},
    {"2 x 600 + 3 x 17 + 1 x 333", {600, 17, 600, 17, 17, 333}},
    {"16 x 32 + 1 x 1800", {32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 1800}},
};

// max |gpu - cpu| / max |cpu| over the steps whose earlier tokens agree
// (later steps may follow other tokens); the steps compared counted.
double long_logit_error(const completion& gpu, const completion& cpu, std::size_t& compared) {
  double worst = 0;
  for (std::size_t s = 0; s < cpu.logits[0].size() && s < gpu.logits[0].size(); ++s) {
    if (s > 0 && gpu.tokens[0][s - 1] != cpu.tokens[0][s - 1])
      break;
    double m = 0, d = 0;
    const auto& want = cpu.logits[0][s];
    const auto& got = gpu.logits[0][s];
    for (std::size_t v = 0; v < want.size(); ++v) {
      m = std::max(m, std::abs(static_cast<double>(want[v])));
      d = std::max(d, std::abs(static_cast<double>(got[v]) - want[v]));
    }
    worst = std::max(worst, d / std::max(m, 1e-30));
    ++compared;
  }
  return worst;
}

std::vector<completion> long_run(local_engine& e, std::vector<request_spec> reqs) {
  auto done = engine::run_to_completion(e, std::move(reqs));
  EXPECT_TRUE(done.has_value()) << done.error().message();
  return done ? std::move(*done) : std::vector<completion>{};
}

// float32 on the GPU: the sequential delta rule and cuBLAS's sums in other
// orders than the CPU's; bfloat16: the qwen3_5 parity tests' logit budget.
constexpr double long_f32_budget = 2e-3;
constexpr double long_bf16_budget = 0.15;

TEST(gpu_qwen3_5_long_prompts, match_the_cpu_model_in_float32_and_bfloat16) {
  MSTAR_REQUIRE_GPU();
  auto cpu = long_engine("cpu", mstar::dtype::float32);
  auto f32 = long_engine("cuda", mstar::dtype::float32);
  auto bf16 = long_engine("cuda", mstar::dtype::bfloat16);
  ASSERT_TRUE(cpu && f32 && bf16);
  std::uint32_t seed = 1;
  for (const auto& c : long_cases) {
    SCOPED_TRACE(c.name);
    const auto reqs = long_batch(c.lengths, seed++);
    const auto want = long_run(*cpu, reqs);
    ASSERT_EQ(want.size(), reqs.size());
    for (auto* gpu : {f32.get(), bf16.get()}) {
      const bool is_f32 = gpu == f32.get();
      const auto got = long_run(*gpu, reqs);
      ASSERT_EQ(got.size(), reqs.size());
      double worst = 0;
      std::size_t compared = 0;
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        SCOPED_TRACE("row " + std::to_string(i));
        for (const auto& step : got[i].logits[0]) {
          ASSERT_TRUE(
              std::all_of(step.begin(), step.end(), [](float v) { return std::isfinite(v); }));
        }
        const double e = long_logit_error(got[i], want[i], compared);
        worst = std::max(worst, e);
        EXPECT_LT(e, is_f32 ? long_f32_budget : long_bf16_budget);
      }
      EXPECT_GE(compared, reqs.size());  // every row's first step at least
      std::printf(
          "[ measured ] qwen3_5 long prompts %s, %s on the GPU: normalised logit error "
          "at most %.3g over %zu steps\n",
          c.name, is_f32 ? "float32" : "bfloat16", worst, compared);
      auto ok = gpu->pools().check_invariants();
      EXPECT_TRUE(ok.has_value()) << ok.error().message();
    }
  }
  std::error_code ignored;
  fs::remove_all(long_checkpoint(), ignored);
}

}  // namespace
}  // namespace mstar::test::gpu
