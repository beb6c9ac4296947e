#include "resources/recurrent/spec.hpp"

#include <gtest/gtest.h>
#include <string>
#include <string_view>

#include "resources/recurrent/geometry.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::resources {
namespace {

using mstar::test::contains;

// The preplan test's pool: HK=2, HV=4, K=V=16, W=4, so conv_dim 128; 16 slots.
recurrent_state_spec gdn_spec() {
  auto blocks = delta_net_geometry{2, 4, 16, 16, 4}.to_blocks();
  EXPECT_TRUE(blocks);
  auto config = recurrent_state_config::make(2, std::move(*blocks), 16);
  EXPECT_TRUE(config);
  return recurrent_state_spec{"gdn_state", {"llm"}, std::move(*config)};
}

recurrent_state_spec mamba2_spec() {
  auto blocks = mamba2_geometry{4, 8, 16, 2, 4}.to_blocks();
  EXPECT_TRUE(blocks);
  auto config = recurrent_state_config::make(2, std::move(*blocks), 8);
  EXPECT_TRUE(config);
  return recurrent_state_spec{"mamba_state", {"llm"}, std::move(*config)};
}

TEST(recurrent_state_spec, replaces_the_slot_count_and_leaves_blocks_untouched) {
  recurrent_state_spec spec = gdn_spec();
  const recurrent_blocks before = spec.config.blocks;
  ASSERT_TRUE(spec.apply_yaml_overrides(64));
  EXPECT_EQ(spec.config.max_slots, 64);
  EXPECT_EQ(spec.config.blocks, before);
}

TEST(recurrent_state_spec, replaces_the_state_dtype_keeping_shape_and_shard_dims) {
  recurrent_state_spec spec = gdn_spec();
  const recurrent_block_config state_before = spec.config.blocks.at("state");
  const recurrent_block_config conv_before = spec.config.blocks.at("conv");
  ASSERT_TRUE(spec.apply_yaml_overrides(std::nullopt, "bfloat16"));
  const recurrent_block_config& state = spec.config.blocks.at("state");
  EXPECT_EQ(state.dtype(), dtype::bfloat16);
  EXPECT_EQ(state.shape(), state_before.shape());
  EXPECT_EQ(state.shard_dims(), state_before.shard_dims());
  EXPECT_EQ(spec.config.blocks.at("conv"), conv_before);
  EXPECT_EQ(spec.config.max_slots, 16);
}

TEST(recurrent_state_spec, accepts_torch_spellings_of_a_dtype) {
  recurrent_state_spec spec = gdn_spec();
  ASSERT_TRUE(spec.apply_yaml_overrides(std::nullopt, "torch.bfloat16"));
  ASSERT_TRUE(spec.apply_yaml_overrides(std::nullopt, "float"));
  EXPECT_EQ(spec.config.blocks.at("state").dtype(), dtype::float32);
}

TEST(recurrent_state_spec, refuses_names_that_are_not_dtypes_naming_the_text) {
  for (const std::string name : {"float33", "nn", "Tensor", ""}) {
    recurrent_state_spec spec = gdn_spec();
    const recurrent_state_spec before = spec;
    const auto applied = spec.apply_yaml_overrides(std::nullopt, name);
    ASSERT_FALSE(applied) << name;
    EXPECT_TRUE(
        contains(applied.error().message(), "state_dtype '" + name + "' is not a supported dtype"));
    EXPECT_TRUE(contains(applied.error().message(), "gdn_state"));
    EXPECT_EQ(spec, before);
  }
}

TEST(recurrent_state_spec, refuses_a_state_dtype_for_a_mamba2_pool_naming_its_blocks) {
  recurrent_state_spec spec = mamba2_spec();
  const recurrent_state_spec before = spec;
  const auto applied = spec.apply_yaml_overrides(std::nullopt, "bfloat16");
  ASSERT_FALSE(applied);
  EXPECT_EQ(applied.error().code(), errc::not_found);
  EXPECT_TRUE(contains(applied.error().message(), "needs a 'state' block"));
  EXPECT_TRUE(contains(applied.error().message(), "has [conv, ssm]"));
  EXPECT_EQ(spec, before);
}

TEST(recurrent_state_spec, applies_nothing_when_the_dtype_is_bad_but_the_slot_count_is_fine) {
  recurrent_state_spec spec = gdn_spec();
  const recurrent_state_spec before = spec;
  ASSERT_FALSE(spec.apply_yaml_overrides(64, "float33"));
  EXPECT_EQ(spec, before);
  ASSERT_FALSE(mamba2_spec().apply_yaml_overrides(64, "bfloat16"));
}

TEST(recurrent_state_spec, applies_nothing_when_the_slot_count_fails_the_construction_checks) {
  recurrent_state_spec spec = gdn_spec();
  const recurrent_state_spec before = spec;
  const auto one_slot = spec.apply_yaml_overrides(1, "bfloat16");
  ASSERT_FALSE(one_slot);
  EXPECT_TRUE(contains(one_slot.error().message(), "gdn_state: max_slots is 1"));
  EXPECT_EQ(spec, before);
  const auto no_slots = spec.apply_yaml_overrides(0);
  ASSERT_FALSE(no_slots);
  EXPECT_TRUE(contains(no_slots.error().message(), "max_slots must be at least 1, got 0"));
  EXPECT_EQ(spec, before);
}

TEST(recurrent_state_spec, allows_a_single_slot_when_the_sink_is_disabled) {
  recurrent_state_spec spec = gdn_spec();
  spec.config.disable_sink_slot = true;
  ASSERT_TRUE(spec.apply_yaml_overrides(1));
  EXPECT_EQ(spec.config.usable_slots(), 1);
}

TEST(recurrent_state_spec, shards_once_when_the_dtype_is_overridden_after_sharding) {
  recurrent_state_spec spec = gdn_spec();
  ASSERT_TRUE(spec.config.shard(2));
  ASSERT_TRUE(spec.apply_yaml_overrides(std::nullopt, "bfloat16"));
  ASSERT_TRUE(spec.config.shard(2));
  EXPECT_EQ(spec.config.blocks.at("state").shape(), (std::vector<std::int64_t>{2, 16, 16}));
  EXPECT_EQ(spec.config.blocks.at("conv").shape(), (std::vector<std::int64_t>{64, 3}));
}

TEST(recurrent_state_spec, leaves_the_spec_alone_when_given_no_overrides) {
  recurrent_state_spec spec = gdn_spec();
  const recurrent_state_spec before = spec;
  ASSERT_TRUE(spec.apply_yaml_overrides());
  EXPECT_EQ(spec, before);
}

}  // namespace
}  // namespace mstar::resources
