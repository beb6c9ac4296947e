#include "resources/recurrent/config.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <string>
#include <string_view>

#include "tests/support/matchers.hpp"

namespace mstar::resources {
namespace {

using mstar::test::contains;

recurrent_blocks delta_net_blocks() {
  recurrent_blocks blocks;
  blocks.emplace("state", recurrent_block_config{{4, 16, 16}, dtype::float32, {0}});
  blocks.emplace("conv", recurrent_block_config{{128, 3}, dtype::bfloat16, {0}});
  return blocks;
}

TEST(recurrent_block_config, reports_numel_and_nbytes_of_its_shape) {
  const recurrent_block_config block{{4, 16, 16}, dtype::bfloat16, {0}};
  EXPECT_EQ(block.numel(), 1024U);
  EXPECT_EQ(block.nbytes(), 2048U);
  EXPECT_EQ(block.dtype(), dtype::bfloat16);
  EXPECT_EQ(block.shard_dims(), (std::vector<std::size_t>{0}));
}

TEST(recurrent_block_config, divides_only_its_shard_dims) {
  recurrent_block_config block{{8, 6, 4}, dtype::float32, {0, 2}};
  ASSERT_TRUE(block.shard(2));
  EXPECT_EQ(block.shape(), (std::vector<std::int64_t>{4, 6, 2}));
  EXPECT_EQ(block.unsharded_shape(), (std::vector<std::int64_t>{8, 6, 4}));
}

TEST(recurrent_block_config, shards_idempotently_from_the_unsharded_shape) {
  recurrent_block_config block{{16, 3}, dtype::float32, {0}};
  ASSERT_TRUE(block.shard(8));
  ASSERT_TRUE(block.shard(8));
  EXPECT_EQ(block.shape(), (std::vector<std::int64_t>{2, 3}));
  ASSERT_TRUE(block.shard(4));
  EXPECT_EQ(block.shape(), (std::vector<std::int64_t>{4, 3}));
  ASSERT_TRUE(block.shard(1));
  EXPECT_EQ(block.shape(), (std::vector<std::int64_t>{16, 3}));
}

TEST(recurrent_block_config, refuses_an_inexact_shard_naming_axis_size_and_count) {
  recurrent_block_config block{{12, 3}, dtype::float32, {0}};
  ASSERT_TRUE(block.shard(2));
  const recurrent_block_config before = block;
  const auto sharded = block.shard(5);
  ASSERT_FALSE(sharded);
  EXPECT_TRUE(contains(sharded.error().message(), "axis 0 of size 12"));
  EXPECT_TRUE(contains(sharded.error().message(), "not divisible by 5 shards"));
  EXPECT_EQ(block, before);
}

TEST(recurrent_block_config, changes_nothing_when_a_later_shard_axis_fails) {
  recurrent_block_config block{{8, 3}, dtype::float32, {0, 1}};
  const recurrent_block_config before = block;
  ASSERT_FALSE(block.shard(2));
  EXPECT_EQ(block, before);
}

TEST(recurrent_block_config, refuses_fewer_than_one_shard) {
  recurrent_block_config block{{8, 3}, dtype::float32, {0}};
  const auto zero = block.shard(0);
  ASSERT_FALSE(zero);
  EXPECT_TRUE(contains(zero.error().message(), "got 0"));
  EXPECT_FALSE(block.shard(-2));
}

TEST(recurrent_block_config, refuses_a_shard_dim_that_is_not_an_axis) {
  recurrent_block_config block{{8, 4}, dtype::float32, {2}};
  const auto sharded = block.shard(2);
  ASSERT_FALSE(sharded);
  EXPECT_EQ(sharded.error().code(), errc::out_of_range);
  EXPECT_TRUE(contains(sharded.error().message(), "shard dim 2 is not an axis of a rank-2"));
}

TEST(recurrent_block_config, keeps_shapes_and_shard_dims_when_the_dtype_changes) {
  recurrent_block_config block{{16, 8}, dtype::float32, {0}};
  ASSERT_TRUE(block.shard(4));
  const recurrent_block_config half = block.with_dtype(dtype::bfloat16);
  EXPECT_EQ(half.dtype(), dtype::bfloat16);
  EXPECT_EQ(half.shape(), block.shape());
  EXPECT_EQ(half.unsharded_shape(), block.unsharded_shape());
  EXPECT_EQ(half.shard_dims(), block.shard_dims());
  EXPECT_NE(half, block);
}

TEST(recurrent_block_config, divides_once_when_sharded_again_after_a_dtype_change) {
  recurrent_block_config block{{16, 8}, dtype::float32, {0}};
  ASSERT_TRUE(block.shard(4));
  recurrent_block_config half = block.with_dtype(dtype::bfloat16);
  ASSERT_TRUE(half.shard(4));
  EXPECT_EQ(half.shape(), (std::vector<std::int64_t>{4, 8}));
}

TEST(recurrent_state_config, builds_a_valid_config_and_counts_bytes_and_slots) {
  const auto config = recurrent_state_config::make(3, delta_net_blocks(), 16);
  ASSERT_TRUE(config) << config.error().to_string();
  const std::uint64_t per_layer = 4 * 16 * 16 * 4 + 128 * 3 * 2;
  EXPECT_EQ(config->slot_bytes(), 3 * per_layer);
  EXPECT_EQ(config->total_bytes(), 16 * 3 * per_layer);
  EXPECT_EQ(config->usable_slots(), 15);
}

TEST(recurrent_state_config, counts_every_slot_as_usable_without_a_sink) {
  const auto config = recurrent_state_config::make(1, delta_net_blocks(), 1, true);
  ASSERT_TRUE(config) << config.error().to_string();
  EXPECT_EQ(config->usable_slots(), 1);
}

TEST(recurrent_state_config, refuses_a_pool_without_blocks) {
  const auto config = recurrent_state_config::make(2, {});
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message(), "a recurrent state pool must declare a block");
}

TEST(recurrent_state_config, refuses_a_single_slot_when_the_sink_would_take_it) {
  const auto config = recurrent_state_config::make(2, delta_net_blocks(), 1);
  ASSERT_FALSE(config);
  EXPECT_TRUE(contains(config.error().message(), "sink slot takes one"));
}

TEST(recurrent_state_config, refuses_no_layers_and_no_slots) {
  const auto no_layers = recurrent_state_config::make(0, delta_net_blocks());
  ASSERT_FALSE(no_layers);
  EXPECT_TRUE(contains(no_layers.error().message(), "num_layers must be at least 1, got 0"));
  const auto no_slots = recurrent_state_config::make(2, delta_net_blocks(), 0, true);
  ASSERT_FALSE(no_slots);
  EXPECT_TRUE(contains(no_slots.error().message(), "max_slots must be at least 1, got 0"));
}

TEST(recurrent_state_config, refuses_a_block_with_a_non_positive_axis_naming_the_block) {
  recurrent_blocks blocks = delta_net_blocks();
  blocks.insert_or_assign("conv", recurrent_block_config{{128, 0}, dtype::bfloat16, {0}});
  const auto config = recurrent_state_config::make(2, std::move(blocks));
  ASSERT_FALSE(config);
  EXPECT_TRUE(contains(config.error().message(), "block 'conv'"));
  EXPECT_TRUE(contains(config.error().message(), "axis 1 of shape [128, 0] has size 0"));
}

TEST(recurrent_state_config, refuses_shard_dims_that_are_out_of_range_or_repeated) {
  recurrent_blocks out_of_range;
  out_of_range.emplace("state", recurrent_block_config{{4, 4}, dtype::float32, {2}});
  const auto bad_axis = recurrent_state_config::make(1, std::move(out_of_range));
  ASSERT_FALSE(bad_axis);
  EXPECT_TRUE(contains(bad_axis.error().message(), "block 'state': shard dim 2 is not an axis"));
  recurrent_blocks repeated;
  repeated.emplace("state", recurrent_block_config{{4, 4}, dtype::float32, {0, 0}});
  const auto twice = recurrent_state_config::make(1, std::move(repeated));
  ASSERT_FALSE(twice);
  EXPECT_TRUE(contains(twice.error().message(), "shard dim 0 is listed twice"));
}

TEST(recurrent_state_config, refuses_a_pool_whose_byte_count_overflows) {
  recurrent_blocks blocks;
  const std::int64_t big = std::int64_t{1} << 40;
  blocks.emplace("state", recurrent_block_config{{big, big}, dtype::float32});
  const auto config = recurrent_state_config::make(1, std::move(blocks));
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code(), errc::out_of_range);
  EXPECT_TRUE(contains(config.error().message(), "does not fit in 64 bits"));
}

TEST(recurrent_state_config, saturates_byte_counts_rather_than_wrapping) {
  recurrent_state_config config{1, delta_net_blocks(), std::numeric_limits<std::int64_t>::max()};
  EXPECT_EQ(config.total_bytes(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_FALSE(config.validate());
}

TEST(recurrent_state_config, shards_every_block_idempotently) {
  auto config = recurrent_state_config::make(2, delta_net_blocks());
  ASSERT_TRUE(config);
  ASSERT_TRUE(config->shard(2));
  ASSERT_TRUE(config->shard(2));
  EXPECT_EQ(config->blocks.at("state").shape(), (std::vector<std::int64_t>{2, 16, 16}));
  EXPECT_EQ(config->blocks.at("conv").shape(), (std::vector<std::int64_t>{64, 3}));
}

TEST(recurrent_state_config, shards_no_block_when_one_cannot_be_sharded) {
  auto config = recurrent_state_config::make(2, delta_net_blocks());
  ASSERT_TRUE(config);
  const recurrent_state_config before = *config;
  // "conv" (128) divides by 8 but "state" (4 heads) does not.
  const auto sharded = config->shard(8);
  ASSERT_FALSE(sharded);
  EXPECT_TRUE(contains(sharded.error().message(), "block 'state'"));
  EXPECT_EQ(*config, before);
}

}  // namespace
}  // namespace mstar::resources
