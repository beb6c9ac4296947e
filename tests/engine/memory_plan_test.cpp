// engine/memory_plan: pool sizes from a device's memory. Exact numbers for
// the published Nemotron-H 8B geometry and a Qwen3.5 geometry on a 139.8 GiB
// H200, the refusals, explicit sizes kept, and models/memory_facts read from
// the fixture checkpoints against the pools the loaded models ask for.
#include "engine/memory_plan.hpp"

#include <gtest/gtest.h>

#include "engine/pool_memory.hpp"
#include "models/load.hpp"
#include "models/memory_facts.hpp"
#include "tests/support/model_fixtures.hpp"

namespace {

using mstar::engine::memory_plan_request;
using mstar::engine::plan_pool_memory;

constexpr std::uint64_t gib = std::uint64_t{1} << 30;

// What cudaMemGetInfo reports on the H200 is about 139.8 GiB.
constexpr std::uint64_t h200_bytes = 150'109'106'995;

// NVIDIA-Nemotron-H-8B-Base-8K in bf16: 4 attention layers x K,V x 16 tokens
// x 8 KV heads x 128 x 2 bytes a page; 24 Mamba-2 layers x (conv 10240 x 3
// + SSM 128 x 64 x 128) f32 a slot; weights and workspace as memory-plan
// reads them from bench/make_checkpoint.py's headers.
memory_plan_request nemotron_h_8b() {
  memory_plan_request r;
  r.device_total_bytes = h200_bytes;
  r.fraction = 0.9;
  r.weight_bytes = 17'278'750'720;
  r.workspace_bytes = 870'711'680;
  r.page_bytes = 4 * 2 * 16 * 8 * 128 * 2;
  r.slot_bytes = 24 * (10240 * 3 * 4 + 128 * 64 * 128 * 4);
  r.page_size = 16;
  r.context_tokens = 8192;
  r.checkpoint_slots = 64;
  return r;
}

TEST(memory_plan, sizes_the_nemotron_h_8b_shape_on_an_h200_at_8k_context) {
  const auto r = nemotron_h_8b();
  ASSERT_EQ(r.page_bytes, 262'144u);
  ASSERT_EQ(r.slot_bytes, 103'612'416u);
  auto p = plan_pool_memory(r);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->budget_bytes, 116'948'733'895u);  // floor(0.9 x total) - weights - workspace
  EXPECT_EQ(p->pages_per_request, 512);
  // (budget - sink page - 65 slots) / (512 pages + 1 slot) = 463.4
  EXPECT_EQ(p->max_requests, 463);
  EXPECT_EQ(p->slots, 464);
  // 1 + 463 x 512 pages, and the 93.8 MiB left over: 375 more pages.
  EXPECT_EQ(p->pages, 237'432);
  EXPECT_LE(p->pool_bytes, p->budget_bytes);
  EXPECT_GT(p->pool_bytes + r.page_bytes, p->budget_bytes);
}

TEST(memory_plan, counts_memory_in_use_before_the_weights) {
  auto r = nemotron_h_8b();
  r.in_use_bytes = 2 * gib;
  auto p = plan_pool_memory(r);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->budget_bytes, 116'948'733'895u - 2 * gib);
  EXPECT_EQ(p->max_requests, 454);  // 2 GiB is 9.03 requests of 226.8 MiB
}

TEST(memory_plan, sizes_a_qwen3_5_geometry) {
  // Qwen3.5-0.8B widths: 4 full-attention layers (2 KV heads of 256, bf16),
  // 12 delta-net layers (conv 8192 x 3, state 32 x 128 x 128, f32).
  memory_plan_request r;
  r.device_total_bytes = h200_bytes;
  r.fraction = 0.5;
  r.weight_bytes = 2 * gib;
  r.workspace_bytes = gib;
  r.page_bytes = 4 * 2 * 16 * 2 * 256 * 2;
  r.slot_bytes = 12 * (8192 * 3 * 4 + 32 * 128 * 128 * 4);
  r.context_tokens = 32768;
  r.checkpoint_slots = 64;
  auto p = plan_pool_memory(r);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->budget_bytes, 75'054'553'497u - 3 * gib);
  EXPECT_EQ(p->pages_per_request, 2048);
  // per request 2048 x 131072 + 26345472 = 294780928; fixed 131072 + 65 x 26345472
  EXPECT_EQ(p->max_requests, (p->budget_bytes - 131'072 - 65 * 26'345'472) / 294'780'928);
  EXPECT_EQ(p->max_requests, 237);
  EXPECT_EQ(p->slots, 238);
  EXPECT_GE(p->pages, 1 + 237 * 2048);
}

TEST(memory_plan, keeps_explicit_slots_and_gives_the_rest_to_pages) {
  auto r = nemotron_h_8b();
  r.slots = 65;
  auto p = plan_pool_memory(r);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->slots, 65);
  EXPECT_EQ(p->max_requests, 64);
  const std::uint64_t left = p->budget_bytes - (65 + 64) * r.slot_bytes;
  EXPECT_EQ(p->pages, static_cast<std::int64_t>(left / r.page_bytes));
}

TEST(memory_plan, keeps_explicit_pages_and_sizes_slots_for_them) {
  auto r = nemotron_h_8b();
  r.pages = 1 + 10 * 512 + 7;
  auto p = plan_pool_memory(r);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->pages, 1 + 10 * 512 + 7);
  EXPECT_EQ(p->max_requests, 10);
  EXPECT_EQ(p->slots, 11);
}

TEST(memory_plan, refuses_a_budget_that_holds_no_request) {
  auto r = nemotron_h_8b();
  r.device_total_bytes = 24 * gib;  // the weights and checkpoints take it all
  auto p = plan_pool_memory(r);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code(), mstar::errc::out_of_range);
  EXPECT_NE(p.error().message().find("fixed part"), std::string::npos) << p.error().message();

  r.device_total_bytes = 18 * gib;  // less than the weights
  p = plan_pool_memory(r);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find("nothing is left"), std::string::npos) << p.error().message();

  r.device_total_bytes = 27 * gib;  // the fixed part fits, one request does not
  r.context_tokens = 1 << 20;
  p = plan_pool_memory(r);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find("one request of 1048576 tokens"), std::string::npos)
      << p.error().message();
}

TEST(memory_plan, refuses_a_fraction_outside_the_unit_interval) {
  for (const double f : {0.0, -0.5, 1.01}) {
    auto r = nemotron_h_8b();
    r.fraction = f;
    auto p = plan_pool_memory(r);
    ASSERT_FALSE(p) << f;
    EXPECT_EQ(p.error().code(), mstar::errc::invalid_argument);
    EXPECT_NE(p.error().message().find("--gpu-memory-fraction"), std::string::npos);
  }
  auto r = nemotron_h_8b();
  r.fraction = 1.0;
  EXPECT_TRUE(plan_pool_memory(r));
}

// The facts memory-plan reads from a folder are the pools the loaded model
// asks for (on the CPU: float32 KV), and its weights counted at 4 bytes.
void expect_facts_match_the_model(const std::string& fixture) {
  const auto dir = mstar::test::model_dir(fixture);
  mstar::models::pool_options options;
  options.max_num_pages = 100;
  options.max_slots = 9;
  auto facts = mstar::models::memory_facts_of(dir, mstar::dtype::float32, options, 512, 64);
  ASSERT_TRUE(facts) << facts.error().message();
  auto model = mstar::models::load_causal_lm(dir);
  ASSERT_TRUE(model) << model.error().message();
  auto spec = (*model)->pools(options);
  ASSERT_TRUE(spec);
  ASSERT_EQ(facts->pools.kv.has_value(), spec->kv.has_value());
  ASSERT_EQ(facts->pools.recurrent.has_value(), spec->recurrent.has_value());
  if (spec->kv) {
    EXPECT_EQ(facts->pools.kv->total_bytes(), spec->kv->total_bytes());
  }
  if (spec->recurrent) {
    EXPECT_EQ(facts->pools.recurrent->slot_bytes(), spec->recurrent->slot_bytes());
    EXPECT_EQ(facts->pools.recurrent->checkpoint_slots, spec->recurrent->checkpoint_slots);
  }
  EXPECT_EQ(facts->weight_bytes, 4 * static_cast<std::uint64_t>(facts->parameters));
  EXPECT_GT(facts->workspace_bytes, mstar::models::device_fixed_reserve_bytes);
  const auto r = mstar::engine::plan_request_of(*facts);
  EXPECT_EQ(r.weight_bytes, facts->weight_bytes);
  EXPECT_EQ(r.page_size, 16);
}

TEST(memory_facts, match_the_nemotron_h_model_pools) {
  expect_facts_match_the_model("nemotron_h_tiny_hybrid");
}

TEST(memory_facts, match_the_qwen3_5_model_pools) {
  expect_facts_match_the_model("qwen3_5_tiny_text");
}

TEST(memory_facts, count_matrices_in_bf16_and_the_rest_in_f32) {
  const auto dir = mstar::test::model_dir("nemotron_h_tiny_hybrid");
  auto ckpt = mstar::models::safetensors_checkpoint::open(dir);
  ASSERT_TRUE(ckpt);
  std::uint64_t expected = 0;
  for (const auto& name : ckpt->names()) {
    const auto* t = ckpt->find(name);
    const bool matrix = t->shape.size() == 2 && name.find("embed") == std::string::npos;
    expected += static_cast<std::uint64_t>(t->numel()) * (matrix ? 2 : 4);
  }
  std::int64_t params = 0;
  EXPECT_EQ(mstar::models::device_weight_bytes(*ckpt, mstar::dtype::bfloat16, params), expected);
  auto model = mstar::models::load_causal_lm(dir);
  ASSERT_TRUE(model);
  EXPECT_EQ(params, (*model)->num_parameters());
}

TEST(memory_facts, refuse_a_folder_without_a_checkpoint) {
  auto facts =
      mstar::models::memory_facts_of("/nonexistent-mstar", mstar::dtype::bfloat16, {}, 512, 64);
  ASSERT_FALSE(facts);
  EXPECT_NE(facts.error().message().find("/nonexistent-mstar"), std::string::npos)
      << facts.error().message();
}

}  // namespace
