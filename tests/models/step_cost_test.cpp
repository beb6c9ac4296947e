// The roofline's step cost (models/step_cost.hpp): a tiny Nemotron-H and a
// tiny Qwen3.5 against numbers worked out by hand below, and the weights
// and recurrent state it counts against what memory_facts reads from real
// checkpoints' safetensors headers.
#include "models/step_cost.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "models/memory_facts.hpp"
#include "models/safetensors.hpp"

namespace mstar::models {
namespace {

using json = nlohmann::json;

const std::string cost_fixtures = std::string{MSTAR_FIXTURES_DIR} + "/models";

// Hidden 8, vocab 16, one layer of each kind: Mamba-2 with 2 heads of 4, a
// state of 3 in 1 group (d_inner 8, conv_dim 8 + 2*3 = 14, in_proj 8 + 14 +
// 2 = 24), attention with 2 query heads and 1 KV head of 4 (q 8, kv 4 wide),
// an MLP of 12.
cost_model cost_tiny_nemotron_h() {
  const json config{{"vocab_size", 16},
                    {"hidden_size", 8},
                    {"hybrid_override_pattern", "M*-"},
                    {"num_attention_heads", 2},
                    {"num_key_value_heads", 1},
                    {"head_dim", 4},
                    {"intermediate_size", 12},
                    {"mamba_num_heads", 2},
                    {"mamba_head_dim", 4},
                    {"ssm_state_size", 3},
                    {"n_groups", 1},
                    {"conv_kernel", 4},
                    {"use_conv_bias", true}};
  auto parsed = nemotron_h_config::parse(config.dump());
  EXPECT_TRUE(parsed) << parsed.error().message();
  return cost_model_of(*parsed, mstar::dtype::bfloat16);
}

TEST(step_cost, counts_a_tiny_nemotron_h_model_by_hand) {
  const auto m = cost_tiny_nemotron_h();
  // in_proj 24x8 + out_proj 8x8; q, o 8x8 and k, v 4x8; up 12x8, down 8x12.
  EXPECT_EQ(m.gemm_params, 256 + 192 + 192);
  // Final norm and 3 pre-norms (32); conv 14x4 + bias 14, dt_bias / A_log / D (6), gated norm 8.
  EXPECT_EQ(m.vector_params, 32 + 56 + 14 + 6 + 8);
  EXPECT_EQ(m.head_params(), 128);
  EXPECT_EQ(m.widest_projection, 24);
  // ssm 2x4x3 + conv 14x3 floats.
  EXPECT_EQ(m.state_bytes, 4 * (24 + 42));
  // 5 H P N + 2 W conv_dim.
  EXPECT_EQ(m.scan_flops, 5 * 24 + 2 * 4 * 14);
}

TEST(step_cost, a_decode_step_reads_every_weight_once_and_each_rows_kv_and_state) {
  const auto c = cost_of(cost_tiny_nemotron_h(), {2, 1, 5});
  // bf16 matrices (640 + head 128), f32 vectors (116) and 2 embedding rows of 8 floats.
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * 768 + 4 * 116 + 4 * 8 * 2);
  // One attention layer: K and V of 1 head of 4 in bf16 (16 bytes a position),
  // 2 rows reading 5 cached + 1 new positions and writing 1.
  EXPECT_DOUBLE_EQ(c.kv_bytes, 16 * 2 * (5 + 1 + 1));
  // One Mamba-2 layer's 264 bytes, read and written, per row.
  EXPECT_DOUBLE_EQ(c.state_bytes, 264 * 2 * 2);
  EXPECT_DOUBLE_EQ(c.gemm_flops, 2 * 640 * 2 + 2 * 128 * 2);
  // 4 Hq D = 32 a key; each row's query sees 5 + 1 keys.
  EXPECT_DOUBLE_EQ(c.attention_flops, 32 * 2 * 6);
  EXPECT_DOUBLE_EQ(c.scan_flops, 232 * 2);
  EXPECT_DOUBLE_EQ(c.bytes(), 2064 + 224 + 1056);
  EXPECT_DOUBLE_EQ(c.flops(), 3072 + 384 + 464);
}

TEST(step_cost, a_prefill_step_counts_the_causal_half_and_writes_fresh_state) {
  const auto c = cost_of(cost_tiny_nemotron_h(), {1, 3, 0});
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * 768 + 4 * 116 + 4 * 8 * 3);
  EXPECT_DOUBLE_EQ(c.kv_bytes, 16 * (3 + 3));
  EXPECT_DOUBLE_EQ(c.state_bytes, 264);  // written, not read: the row starts fresh
  // Every token through the GEMMs, the LM head once for the row.
  EXPECT_DOUBLE_EQ(c.gemm_flops, 2 * 640 * 3 + 2 * 128);
  // Queries see 1, 2 and 3 keys.
  EXPECT_DOUBLE_EQ(c.attention_flops, 32 * 6);
  EXPECT_DOUBLE_EQ(c.scan_flops, 232 * 3);
}

TEST(step_cost, the_mean_decode_step_averages_the_growing_context) {
  const auto m = cost_tiny_nemotron_h();
  // Prompts of 4, 3 tokens generated: two decode steps, at contexts 4 and 5.
  const auto c = mean_decode_cost(m, 2, 4, 3);
  EXPECT_DOUBLE_EQ(c.kv_bytes, 16 * 2 * ((4 + 2) + (5 + 2)) / 2.0);
  EXPECT_DOUBLE_EQ(c.attention_flops, 32 * 2 * (5 + 6) / 2.0);
  EXPECT_DOUBLE_EQ(c.weight_bytes, cost_of(m, {2, 1, 4}).weight_bytes);
  EXPECT_DOUBLE_EQ(mean_decode_cost(m, 2, 4, 1).bytes(), 0.0);
}

TEST(step_cost, counts_a_tiny_qwen3_5_model_by_hand) {
  // Hidden 8, MLP 6, a delta-net layer (1 key head, 2 value heads of 4: conv_dim
  // 2*4 + 8 = 16, in_proj 16 + 8 + 2*2 = 28) and a gated attention layer (2
  // query heads, 1 KV head of 16).
  const json config{{"model_type", "qwen3_5_text"},
                    {"vocab_size", 16},
                    {"hidden_size", 8},
                    {"intermediate_size", 6},
                    {"num_hidden_layers", 2},
                    {"layer_types", {"linear_attention", "full_attention"}},
                    {"num_attention_heads", 2},
                    {"num_key_value_heads", 1},
                    {"head_dim", 16},
                    {"linear_num_key_heads", 1},
                    {"linear_num_value_heads", 2},
                    {"linear_key_head_dim", 4},
                    {"linear_value_head_dim", 4},
                    {"linear_conv_kernel_dim", 4},
                    {"rope_parameters",
                     {{"rope_type", "default"},
                      {"rope_theta", 10000.0},
                      {"partial_rotary_factor", 0.5},
                      {"mrope_section", {2, 1, 1}}}}};
  auto parsed = qwen3_5_config::parse(config.dump());
  ASSERT_TRUE(parsed) << parsed.error().message();
  const auto m = cost_model_of(*parsed, mstar::dtype::bfloat16);
  // MLPs 2 x 3x6x8; in_proj 28x8 + out_proj 8x8; q 64x8 (with its gate), k, v 16x8, o 8x32.
  EXPECT_EQ(m.gemm_params, 288 + 288 + 1024);
  // Final norm, 2 norms a layer; conv 16x4, dt_bias and A_log 2 each, gated norm 4; q/k norms.
  EXPECT_EQ(m.vector_params, 8 + 32 + 64 + 4 + 4 + 32);
  EXPECT_EQ(m.widest_projection, 64);
  EXPECT_EQ(m.state_bytes, 4 * (2 * 4 * 4 + 16 * 3));
  EXPECT_EQ(m.scan_flops, 7 * 32 + 2 * 4 * 16);
  const auto c = cost_of(m, {1, 1, 3});
  EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * (1600 + 128) + 4 * 144 + 4 * 8);
  EXPECT_DOUBLE_EQ(c.kv_bytes, 64 * (3 + 1 + 1));
  EXPECT_DOUBLE_EQ(c.state_bytes, 320 * 2);
  EXPECT_DOUBLE_EQ(c.gemm_flops, 2 * 1600 + 2 * 128);
  EXPECT_DOUBLE_EQ(c.attention_flops, 4 * 32 * 4);
  EXPECT_DOUBLE_EQ(c.scan_flops, 352);
}

TEST(step_cost, places_a_step_under_the_ceiling_that_bounds_it) {
  const auto c = cost_of(cost_tiny_nemotron_h(), {2, 1, 5});  // 3,344 bytes, 3,920 FLOPs
  const auto slow_memory = place(c, 1e-6, 1e10, 1e12);
  EXPECT_DOUBLE_EQ(slow_memory.bytes_per_s, 3.344e9);
  EXPECT_DOUBLE_EQ(slow_memory.bandwidth_fraction, 0.3344);
  EXPECT_DOUBLE_EQ(slow_memory.compute_fraction, 0.00392);
  EXPECT_EQ(slow_memory.bound, "bandwidth");
  EXPECT_EQ(place(c, 1e-6, 1e10, 1e9).bound, "compute");
  EXPECT_EQ(place(c, 0, 1e10, 1e9).bound, "");
}

// The weights counted from config.json alone are the checkpoint's, as the
// CUDA backend uploads them (the whole embedding table in place of the
// looked-up rows), and the recurrent state is the pool's slot.
void expect_cost_matches_checkpoint(const std::string& folder) {
  SCOPED_TRACE(folder);
  auto m = cost_model_of(folder, mstar::dtype::bfloat16);
  ASSERT_TRUE(m) << m.error().message();
  auto ckpt = safetensors_checkpoint::open(folder);
  ASSERT_TRUE(ckpt) << ckpt.error().message();
  std::int64_t params = 0;
  const auto bytes = device_weight_bytes(*ckpt, mstar::dtype::bfloat16, params);
  const std::int64_t table = m->vocab * m->hidden;
  const auto tokens = cost_of(*m, {1, 1, 0});
  EXPECT_DOUBLE_EQ(
      tokens.weight_bytes - 4.0 * static_cast<double>(m->hidden) + 4.0 * static_cast<double>(table),
      static_cast<double>(bytes));
  auto facts = memory_facts_of(folder, mstar::dtype::bfloat16, {}, 16, 1);
  ASSERT_TRUE(facts) << facts.error().message();
  ASSERT_TRUE(facts->pools.recurrent.has_value());
  EXPECT_EQ(static_cast<std::uint64_t>(m->state_bytes * m->recurrent_layers),
            facts->pools.recurrent->slot_bytes());
}

TEST(step_cost, matches_the_weights_and_state_of_real_checkpoints) {
  expect_cost_matches_checkpoint(MSTAR_EMBEDDED_MODEL_DIR);
  expect_cost_matches_checkpoint(cost_fixtures + "/nemotron_h_tiny_hybrid");
  expect_cost_matches_checkpoint(cost_fixtures + "/qwen3_5_tiny_text");
}

}  // namespace
}  // namespace mstar::models
