// The recurrent state pool: construction and layout, slot handout, padding
// rows and the sink (reference §5.1), the request lifecycle, and geometry
// blocks feeding the pool (§5.4-5.5), with the invariants checked after
// every operation.
#include "resources/recurrent/pool.hpp"

#include <gtest/gtest.h>
#include <set>
#include <string>
#include <vector>

#include "resources/recurrent/geometry.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;
using ints = std::vector<std::int32_t>;
using shape = std::vector<std::int64_t>;

std::string dummy(int capture_slot, int i) {
  return "__cg_LLM_" + std::to_string(capture_slot) + "_" + std::to_string(i) + "__";
}

TEST(recurrent_pool_make, refuses_an_invalid_config_naming_the_pool) {
  recurrent_state_config none{2, {}, 4, false};
  const auto empty = recurrent_state_pool::make("gdn", none);
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message().find("gdn"), std::string::npos);
  EXPECT_NE(empty.error().message().find("must declare a block"), std::string::npos);
  recurrent_state_config one_slot{2, padding_test_blocks(), 1, false};
  EXPECT_FALSE(recurrent_state_pool::make("gdn", one_slot));
  one_slot.disable_sink_slot = true;  // without the sink one slot is usable
  EXPECT_TRUE(recurrent_state_pool::make("gdn", one_slot));
}

TEST_F(recurrent_pool_test, lays_each_block_out_layer_major_with_slot_major_views) {
  const auto state0 = pool_->block("state", 0).value();
  const auto state1 = pool_->block("state", 1).value();
  const auto conv0 = pool_->block("conv", 0).value();
  EXPECT_EQ(state0.shape, (shape{6, 4, 16, 16}));
  EXPECT_EQ(state0.strides_bytes, (shape{4 * 16 * 16 * 4, 16 * 16 * 4, 16 * 4, 4}));
  EXPECT_EQ(state0.dtype, dtype::float32);
  EXPECT_EQ(state1.data - state0.data, 6 * 4 * 16 * 16 * 4);  // [layer][slot][*shape]
  EXPECT_EQ(conv0.shape, (shape{6, 96, 3}));
  EXPECT_EQ(conv0.strides_bytes, (shape{96 * 3 * 2, 3 * 2, 2}));
  EXPECT_EQ(conv0.dtype, dtype::bfloat16);
}

TEST_F(recurrent_pool_test, names_a_missing_block_or_layer) {
  const auto missing = pool_->block("ssm", 0);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
  EXPECT_NE(missing.error().message().find("no block 'ssm'"), std::string::npos);
  EXPECT_NE(missing.error().message().find("conv, state"), std::string::npos);
  const auto layer = pool_->block("conv", 2);
  ASSERT_FALSE(layer);
  EXPECT_EQ(layer.error().code(), errc::out_of_range);
  EXPECT_NE(layer.error().message().find("no layer 2"), std::string::npos);
  EXPECT_FALSE(pool_->block("conv", -1));
}

TEST_F(recurrent_pool_test, takes_the_sink_first_and_hands_out_ascending_slots) {
  EXPECT_EQ(pool_->pad_index(), recurrent_state_pool::sink_slot);
  EXPECT_EQ(pool_->free_list(), (ints{5, 4, 3, 2, 1}));
  run(rstep({{"a", "main", 3}, {"b", "main", 2}, {"c", "main", 1}}));
  EXPECT_EQ(slot("a"), 1);
  EXPECT_EQ(slot("b"), 2);
  EXPECT_EQ(slot("c"), 3);
  EXPECT_EQ(pool_->num_free_slots(), 2);
}

TEST_F(recurrent_pool_test, without_a_sink_hands_out_slot_zero_and_pads_with_minus_one) {
  make(config_of(4, /*sink=*/false));
  EXPECT_EQ(pool_->pad_index(), recurrent_state_pool::no_slot);
  EXPECT_EQ(pool_->free_list(), (ints{3, 2, 1, 0}));
  step_context ctx;
  ctx.padding_rows = {"pad0", "pad1"};
  const auto p = run(rstep({{"a", "main", 1}, {"pad0", "main", 1}, {"pad1", "main", 1}}), ctx);
  EXPECT_EQ(rows(p).slot_indices, (ints{0, -1, -1}));
  EXPECT_EQ(pool_->num_free_slots(), 3);
}

TEST_F(recurrent_pool_test, refuses_a_full_pool_one_slot_short_having_taken_nothing) {
  run(rstep({{"a", "main", 1}, {"b", "main", 1}, {"c", "main", 1}}));
  const auto before = pool_->free_list();
  step_context ctx;
  const auto s = rstep({{"d", "main", 1}, {"e", "main", 1}, {"f", "draft", 1}});
  const auto out = admit(s, ctx);
  ASSERT_FALSE(out.ok);
  const auto& why = std::get<allocation_failed>(*out.reason);
  EXPECT_EQ(why.message, "recurrent state pool is full: 5 usable slots, none free for f/draft");
  EXPECT_EQ(why.pages_short, 1);
  EXPECT_EQ(why.label, "draft");
  EXPECT_EQ(why.rid, "f");
  EXPECT_EQ(pool_->free_list(), before);
  EXPECT_FALSE(pool_->slot_of("d"));
  EXPECT_FALSE(pool_->slot_of("e"));
}

TEST_F(recurrent_pool_test, keeps_one_slot_per_label_and_resumes_after_commit) {
  const auto prefill = run(rstep({{"a", "main", 5}, {"a", "draft", 5}}));
  EXPECT_EQ(rows(prefill, "main").has_state, (std::vector<std::uint8_t>{0}));
  EXPECT_EQ(rows(prefill, "draft").slot_indices, (ints{2}));
  EXPECT_TRUE(pool_->has_state("a", "main"));
  for (int i = 0; i < 3; ++i) {
    const auto decode = run(rstep({{"a", "main", 1}}));
    EXPECT_EQ(rows(decode).slot_indices, (ints{1}));
    EXPECT_EQ(rows(decode).has_state, (std::vector<std::uint8_t>{1}));
    EXPECT_EQ(decode->labels.size(), 1U);
  }
  EXPECT_EQ(pool_->num_free_slots(), 3);
}

TEST_F(recurrent_pool_test, refuses_one_stream_written_twice_in_a_step) {
  step_context ctx;
  const auto before = pool_->free_list();
  const auto out = admit(rstep({{"a", "main", 1}, {"b", "main", 1}, {"a", "main", 2}}), ctx);
  ASSERT_FALSE(out.ok);
  EXPECT_TRUE(std::holds_alternative<admit_runtime_error>(*out.reason));
  EXPECT_EQ(pool_->free_list(), before);
}

TEST_F(recurrent_pool_test, padding_rows_address_the_sink_in_both_capture_slots) {
  pool_->build_accelerator_graph_buffers(2, 8, 4096);
  std::vector<std::string> dummies;
  for (int cs = 0; cs < 2; ++cs) {
    for (int i = 2; i < 8; ++i) {
      dummies.push_back(dummy(cs, i));
      pool_->ingest_request(dummies.back());
    }
  }
  for (int step = 0; step < 3; ++step) {
    for (int cs = 0; cs < 2; ++cs) {
      step_context ctx;
      ctx.lease = graph_lease{cs, 8};
      auto s = rstep({{"a", "main", step == 0 ? 7 : 1}, {"b", "main", step == 0 ? 4 : 1}});
      for (int i = 2; i < 8; ++i) {
        s.segments.push_back({dummy(cs, i), "main", 1});
        ctx.padding_rows.insert(dummy(cs, i));
      }
      ASSERT_TRUE(admit(s, ctx).ok);
      EXPECT_EQ(pool_->num_free_slots(), 3);
      const auto p = plan(s, ctx);
      const auto& r = rows(p);
      EXPECT_EQ(r.num_rows, 8);
      EXPECT_EQ(r.slot_indices.size(), 8U);
      EXPECT_NE(r.slot_indices[0], r.slot_indices[1]);
      EXPECT_NE(r.slot_indices[0], recurrent_state_pool::sink_slot);
      EXPECT_NE(r.slot_indices[1], recurrent_state_pool::sink_slot);
      for (int i = 2; i < 8; ++i) {
        EXPECT_EQ(r.slot_indices[static_cast<std::size_t>(i)], recurrent_state_pool::sink_slot);
        EXPECT_EQ(r.has_state[static_cast<std::size_t>(i)], 0);
      }
      commit(s, ctx);
    }
  }
  for (const auto& d : dummies)
    EXPECT_FALSE(pool_->slot_of(d)) << d;
  EXPECT_TRUE(pool_->has_state("a"));
  EXPECT_TRUE(pool_->has_state("b"));
}

TEST_F(recurrent_pool_test, one_request_in_a_wide_bucket_takes_one_slot) {
  make(config_of(3));
  step_context ctx;
  auto s = rstep({{"a", "main", 1}});
  for (int i = 1; i < 32; ++i) {
    s.segments.push_back({dummy(0, i), "main", 1});
    ctx.padding_rows.insert(dummy(0, i));
  }
  const auto p = run(s, ctx);
  EXPECT_EQ(pool_->num_free_slots(), 1);
  EXPECT_EQ(rows(p).num_rows, 32);
}

TEST_F(recurrent_pool_test, capture_admits_nothing_and_addresses_the_sink) {
  make(config_of(2));
  step_context ctx;
  ctx.capture = true;
  auto s = rstep({});
  for (int i = 0; i < 16; ++i) {
    s.segments.push_back({dummy(0, i), "main", 1});
    pool_->ingest_request(dummy(0, i));
  }
  const auto p = run(s, ctx);
  EXPECT_EQ(pool_->num_free_slots(), 1);
  EXPECT_EQ(rows(p).slot_indices, ints(16, recurrent_state_pool::sink_slot));
  for (int i = 0; i < 16; ++i)
    EXPECT_FALSE(pool_->slot_of(dummy(0, i)));
}

TEST_F(recurrent_pool_test, zero_span_rows_reserve_nothing_and_address_the_pad) {
  const auto p = run(rstep({{"a", "main", 0}, {"b", "main", 2}, {"c", "main", -1}}));
  EXPECT_FALSE(pool_->slot_of("a"));
  EXPECT_FALSE(pool_->slot_of("c"));
  EXPECT_EQ(rows(p).slot_indices, (ints{0, 1, 0}));
  // A held stream addressed without new tokens also reads the pad.
  const auto idle = run(rstep({{"b", "main", 0}}));
  EXPECT_EQ(rows(idle).slot_indices, (ints{0}));
  EXPECT_TRUE(pool_->has_state("b"));
}

TEST_F(recurrent_pool_test, resetting_a_request_without_slots_changes_nothing) {
  make(config_of(3));
  pool_->ingest_request("pad");
  run(rstep({{"real", "main", 1}}));
  pool_->reset_request("pad", false);
  pool_->reset_request("never-ingested", true);
  check();
  EXPECT_EQ(pool_->num_free_slots(), 1);
  pool_->remove_request("real");
  check();
  EXPECT_EQ(pool_->num_free_slots(), 2);
}

TEST_F(recurrent_pool_test, reset_without_free_zeroes_and_keeps_the_slot) {
  run(rstep({{"a", "main", 4}}));
  fill_slot(*pool_, slot("a"), 7);
  pool_->reset_request("a", false);
  check();
  EXPECT_EQ(slot("a"), 1);
  EXPECT_FALSE(pool_->has_state("a"));
  EXPECT_TRUE(slot_holds(*pool_, 1, std::nullopt));
  EXPECT_EQ(pool_->num_free_slots(), 4);
}

TEST_F(recurrent_pool_test, remove_zeroes_every_label_and_the_last_freed_goes_out_first) {
  run(rstep({{"a", "main", 4}, {"a", "draft", 4}, {"b", "main", 1}}));
  fill_slot(*pool_, slot("a", "main"), 1);
  fill_slot(*pool_, slot("a", "draft"), 2);
  fill_slot(*pool_, slot("b"), 3);
  pool_->remove_request("a");
  check();                                            // also proves both freed slots read zero
  EXPECT_EQ(pool_->free_list(), (ints{5, 4, 2, 1}));  // labels freed in name order
  EXPECT_TRUE(slot_holds(*pool_, slot("b"), 3));
  run(rstep({{"c", "main", 1}}));
  EXPECT_EQ(slot("c"), 1);
  EXPECT_TRUE(slot_holds(*pool_, 1, std::nullopt));
}

TEST_F(recurrent_pool_test, ingest_is_idempotent_and_reserves_nothing) {
  pool_->ingest_request("a");
  pool_->ingest_request("a");
  check();
  EXPECT_EQ(pool_->num_free_slots(), 5);
  run(rstep({{"a", "main", 1}}));
  pool_->ingest_request("a");  // a second partition's NewRequest, after a step
  check();
  EXPECT_EQ(slot("a"), 1);
  EXPECT_TRUE(pool_->has_state("a"));
}

TEST_F(recurrent_pool_test, a_plan_names_a_label_it_has_no_rows_for) {
  const auto p = run(rstep({{"a", "main", 1}}));
  const auto missing = p->addressing("draft");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
  EXPECT_NE(missing.error().message().find("no plan for label 'draft'"), std::string::npos);
}

TEST_F(recurrent_pool_test, refuses_steps_of_another_resource_type) {
  resource_step plain;
  plain.segments = {{"a", "main", 1}};
  step_context ctx;
  EXPECT_FALSE(pool_->admit(plain, ctx).ok);
  check();
  EXPECT_FALSE(pool_->plan(plain, ctx));
  EXPECT_FALSE(pool_->commit(plain, ctx));
}

TEST(recurrent_pool_mamba2, geometry_blocks_feed_the_pool) {
  // §5.5: H=4, P=8, N=16, G=2, W=4; 2 layers, 8 slots.
  const mamba2_geometry g{4, 8, 16, 2, 4};
  auto config = recurrent_state_config::make(2, g.to_blocks().value(), 8).value();
  auto pool = recurrent_state_pool::make("mamba", config).value();
  EXPECT_EQ(pool->block("ssm", 1)->shape, (shape{8, 4, 8, 16}));
  EXPECT_EQ(pool->block("ssm", 1)->dtype, dtype::float32);
  EXPECT_EQ(pool->block("conv", 0)->shape, (shape{8, g.conv_dim(), 3}));
  EXPECT_EQ(pool->block("conv", 0)->dtype, dtype::bfloat16);
  EXPECT_EQ(mamba2_geometry::from_blocks(pool->config().blocks).value(), g);
  // The backend's plan: three distinct non-sink slots, nothing to resume.
  step_context ctx;
  const auto s = rstep({{"a", "main", 5}, {"b", "main", 3}, {"c", "main", 1}});
  ASSERT_TRUE(pool->admit(s, ctx).ok);
  const auto p = std::dynamic_pointer_cast<const recurrent_plan>(*pool->plan(s, ctx));
  const auto& r = *p->addressing().value();
  const std::set<std::int32_t> distinct(r.slot_indices.begin(), r.slot_indices.end());
  EXPECT_EQ(distinct.size(), 3U);
  EXPECT_FALSE(distinct.contains(recurrent_state_pool::sink_slot));
  EXPECT_EQ(r.has_state, (std::vector<std::uint8_t>{0, 0, 0}));
  EXPECT_TRUE(pool->check_invariants());
}

TEST(recurrent_pool_mamba2, a_nemotron_h_shaped_pool_sizes_each_layer_as_the_config_says) {
  const mamba2_geometry small{8, 16, 32, 2, 4};  // Nemotron-H's shape, shrunk
  auto config = recurrent_state_config::make(3, small.to_blocks().value(), 4).value();
  auto pool = recurrent_state_pool::make("nemotron", config).value();
  std::uint64_t per_slot = 0;
  for (const auto& name : {"ssm", "conv"}) {
    for (std::int64_t layer = 0; layer < 3; ++layer)
      per_slot += static_cast<std::uint64_t>(pool->block(name, layer)->strides_bytes[0]);
  }
  EXPECT_EQ(per_slot, config.slot_bytes());
  EXPECT_EQ(pool->block("conv", 2)->shape, (shape{4, small.conv_dim(), 3}));
}

}  // namespace
}  // namespace mstar::resources
