#include "resources/recurrent/geometry.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <string_view>

#include "tests/support/matchers.hpp"

namespace mstar::resources {
namespace {

using mstar::test::contains;

using shape = std::vector<std::int64_t>;

constexpr mamba2_geometry nemotron_h{128, 80, 128, 8, 4};
constexpr delta_net_geometry qwen_like{16, 32, 128, 128, 4};

recurrent_blocks sharded(recurrent_blocks blocks, std::int64_t num_shards) {
  for (auto& [name, block] : blocks) {
    EXPECT_TRUE(block.shard(num_shards)) << name;
  }
  return blocks;
}

TEST(mamba2_geometry, derives_nemotron_h_widths) {
  EXPECT_EQ(nemotron_h.d_inner(), 10240);
  EXPECT_EQ(nemotron_h.conv_dim(), 12288);
}

TEST(mamba2_geometry, builds_nemotron_h_blocks_with_fp32_ssm_and_bf16_conv) {
  const auto blocks = nemotron_h.to_blocks();
  ASSERT_TRUE(blocks) << blocks.error().to_string();
  ASSERT_EQ(blocks->size(), 2U);
  const auto& ssm = blocks->at("ssm");
  const auto& conv = blocks->at("conv");
  EXPECT_EQ(ssm.shape(), (shape{128, 80, 128}));
  EXPECT_EQ(ssm.dtype(), dtype::float32);
  EXPECT_EQ(ssm.shard_dims(), (std::vector<std::size_t>{0}));
  EXPECT_EQ(ssm.nbytes(), 5'242'880U);
  EXPECT_EQ(conv.shape(), (shape{12288, 3}));
  EXPECT_EQ(conv.dtype(), dtype::bfloat16);
  EXPECT_EQ(conv.shard_dims(), (std::vector<std::size_t>{0}));
  EXPECT_EQ(conv.nbytes(), 73'728U);
}

TEST(mamba2_geometry, sizes_a_27_layer_nemotron_h_slot_at_about_137_mib) {
  auto blocks = nemotron_h.to_blocks();
  ASSERT_TRUE(blocks);
  const auto config = recurrent_state_config::make(27, std::move(*blocks));
  ASSERT_TRUE(config) << config.error().to_string();
  EXPECT_EQ(config->slot_bytes(), 143'548'416U);
  EXPECT_EQ(config->slot_bytes() >> 20, 136U);  // 136.9 MiB
}

TEST(mamba2_geometry, honours_the_requested_dtypes) {
  const auto blocks = nemotron_h.to_blocks(dtype::bfloat16, dtype::float16);
  ASSERT_TRUE(blocks);
  EXPECT_EQ(blocks->at("ssm").dtype(), dtype::bfloat16);
  EXPECT_EQ(blocks->at("conv").dtype(), dtype::float16);
}

TEST(mamba2_geometry, round_trips_through_blocks) {
  const auto blocks = nemotron_h.to_blocks();
  ASSERT_TRUE(blocks);
  const auto back = mamba2_geometry::from_blocks(*blocks);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, nemotron_h);
}

TEST(mamba2_geometry, round_trips_a_small_geometry_with_a_bf16_state) {
  constexpr mamba2_geometry small{4, 8, 16, 2, 4};
  const auto blocks = small.to_blocks(dtype::bfloat16);
  ASSERT_TRUE(blocks);
  EXPECT_EQ(blocks->at("conv").shape(), (shape{96, 3}));
  const auto back = mamba2_geometry::from_blocks(*blocks);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, small);
}

TEST(mamba2_geometry, round_trips_through_blocks_when_sharded_by_eight) {
  const auto blocks = nemotron_h.to_blocks();
  ASSERT_TRUE(blocks);
  const recurrent_blocks per_rank = sharded(*blocks, 8);
  EXPECT_EQ(per_rank.at("ssm").shape(), (shape{16, 80, 128}));
  EXPECT_EQ(per_rank.at("conv").shape(), (shape{1536, 3}));
  const auto back = mamba2_geometry::from_blocks(per_rank);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, (mamba2_geometry{16, 80, 128, 1, 4}));
}

TEST(mamba2_geometry, rejects_a_conv_width_that_does_not_match_the_ssm) {
  recurrent_blocks blocks = *nemotron_h.to_blocks();
  blocks.insert_or_assign("conv", recurrent_block_config{{12000, 3}, dtype::bfloat16, {0}});
  const auto back = mamba2_geometry::from_blocks(blocks);
  ASSERT_FALSE(back);
  const std::string& message = back.error().message();
  EXPECT_TRUE(contains(message, "does not match"));
  EXPECT_TRUE(contains(message, "[12000, 3]"));
  EXPECT_TRUE(contains(message, "[128, 80, 128]"));
  EXPECT_TRUE(contains(message, "= 1760"));
  EXPECT_TRUE(contains(message, "2*N = 256"));
}

TEST(mamba2_geometry, rejects_a_conv_no_wider_than_the_heads) {
  recurrent_blocks blocks = *nemotron_h.to_blocks();
  blocks.insert_or_assign("conv", recurrent_block_config{{10240, 3}, dtype::bfloat16, {0}});
  const auto back = mamba2_geometry::from_blocks(blocks);
  ASSERT_FALSE(back);
  EXPECT_TRUE(contains(back.error().message(), "= 0, which is not a positive multiple"));
}

TEST(mamba2_geometry, rejects_a_shard_that_splits_a_group) {
  // Two groups over four ranks: every axis divides, but a rank would hold half a group.
  const auto blocks = mamba2_geometry{8, 4, 8, 2, 4}.to_blocks();
  ASSERT_TRUE(blocks);
  const auto back = mamba2_geometry::from_blocks(sharded(*blocks, 4));
  ASSERT_FALSE(back);
  EXPECT_TRUE(contains(back.error().message(), "does not match"));
}

TEST(mamba2_geometry, rejects_delta_net_blocks_for_want_of_an_ssm_block) {
  const auto blocks = qwen_like.to_blocks();
  ASSERT_TRUE(blocks);
  const auto back = mamba2_geometry::from_blocks(*blocks);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().message(), "not a Mamba-2 state pool: no 'ssm' block, got [conv, state]");
}

TEST(mamba2_geometry, rejects_blocks_without_a_conv_block) {
  recurrent_blocks blocks = *nemotron_h.to_blocks();
  blocks.erase("conv");
  const auto back = mamba2_geometry::from_blocks(blocks);
  ASSERT_FALSE(back);
  EXPECT_TRUE(contains(back.error().message(), "no 'conv' block, got [ssm]"));
}

TEST(mamba2_geometry, rejects_blocks_of_the_wrong_rank) {
  recurrent_blocks blocks = *nemotron_h.to_blocks();
  blocks.insert_or_assign("ssm", recurrent_block_config{{128, 80}, dtype::float32, {0}});
  const auto bad_ssm = mamba2_geometry::from_blocks(blocks);
  ASSERT_FALSE(bad_ssm);
  EXPECT_TRUE(contains(bad_ssm.error().message(), "ssm block must have rank 3"));
  blocks = *nemotron_h.to_blocks();
  blocks.insert_or_assign("conv", recurrent_block_config{{12288}, dtype::bfloat16, {0}});
  const auto bad_conv = mamba2_geometry::from_blocks(blocks);
  ASSERT_FALSE(bad_conv);
  EXPECT_TRUE(contains(bad_conv.error().message(), "conv block must have rank 2"));
}

TEST(mamba2_geometry, refuses_to_build_blocks_for_a_bad_field_naming_it) {
  const auto no_groups = mamba2_geometry{4, 8, 16, 0, 4}.to_blocks();
  ASSERT_FALSE(no_groups);
  EXPECT_TRUE(contains(no_groups.error().message(), "n_groups must be at least 1, got 0"));
  const auto one_tap = mamba2_geometry{4, 8, 16, 2, 1}.to_blocks();
  ASSERT_FALSE(one_tap);
  EXPECT_TRUE(contains(one_tap.error().message(), "conv_kernel_size must be at least 2, got 1"));
}

TEST(delta_net_geometry, builds_k_last_state_and_conv_blocks) {
  const auto blocks = qwen_like.to_blocks();
  ASSERT_TRUE(blocks);
  EXPECT_EQ(qwen_like.conv_dim(), 2 * 16 * 128 + 32 * 128);
  EXPECT_EQ(blocks->at("state").shape(), (shape{32, 128, 128}));
  EXPECT_EQ(blocks->at("state").dtype(), dtype::float32);
  EXPECT_EQ(blocks->at("conv").shape(), (shape{qwen_like.conv_dim(), 3}));
  EXPECT_EQ(blocks->at("conv").dtype(), dtype::bfloat16);
}

TEST(delta_net_geometry, round_trips_through_blocks) {
  // K != V, so a swap of the two would not round-trip.
  constexpr delta_net_geometry uneven{2, 4, 16, 32, 4};
  const auto back = delta_net_geometry::from_blocks(*uneven.to_blocks());
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, uneven);
}

TEST(delta_net_geometry, round_trips_through_blocks_when_sharded_by_eight) {
  const auto back = delta_net_geometry::from_blocks(sharded(*qwen_like.to_blocks(), 8));
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, (delta_net_geometry{2, 4, 128, 128, 4}));
}

TEST(delta_net_geometry, rejects_mamba2_blocks_and_a_mismatched_conv) {
  const auto mamba = delta_net_geometry::from_blocks(*nemotron_h.to_blocks());
  ASSERT_FALSE(mamba);
  EXPECT_EQ(mamba.error().message(),
            "not a delta-net state pool: no 'state' block, got [conv, ssm]");
  recurrent_blocks blocks = *qwen_like.to_blocks();
  blocks.insert_or_assign("conv", recurrent_block_config{{4096 + 100, 3}, dtype::bfloat16, {0}});
  const auto mismatched = delta_net_geometry::from_blocks(blocks);
  ASSERT_FALSE(mismatched);
  EXPECT_TRUE(contains(mismatched.error().message(), "conv_dim - HV*V = 100"));
  EXPECT_TRUE(contains(mismatched.error().message(), "2*K = 256"));
}

// Head counts are multiples of the shard factor so that every rank holds
// whole heads and whole groups, as a real tensor-parallel split does.
TEST(recurrent_geometry, round_trips_random_geometries_under_random_shard_factors) {
  constexpr std::uint32_t seed = 20240611;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng{seed};
  const auto pick = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>{lo, hi}(rng);
  };
  constexpr std::int64_t factors[] = {1, 2, 4, 8};
  for (int i = 0; i < 500; ++i) {
    const std::int64_t s = factors[pick(0, 3)];
    const mamba2_geometry m{s * pick(1, 16), pick(1, 128), pick(1, 256), s * pick(1, 8),
                            pick(2, 8)};
    const mamba2_geometry m_rank{m.num_heads / s, m.head_dim, m.state_size, m.n_groups / s,
                                 m.conv_kernel_size};
    const auto m_back = mamba2_geometry::from_blocks(sharded(*m.to_blocks(), s));
    ASSERT_TRUE(m_back) << "case " << i << ": " << m_back.error().to_string();
    ASSERT_EQ(*m_back, m_rank) << "case " << i;

    const delta_net_geometry d{s * pick(1, 16), s * pick(1, 32), pick(1, 256), pick(1, 256),
                               pick(2, 8)};
    const delta_net_geometry d_rank{d.num_k_heads / s, d.num_v_heads / s, d.head_k_dim,
                                    d.head_v_dim, d.conv_kernel_size};
    const auto d_back = delta_net_geometry::from_blocks(sharded(*d.to_blocks(), s));
    ASSERT_TRUE(d_back) << "case " << i << ": " << d_back.error().to_string();
    ASSERT_EQ(*d_back, d_rank) << "case " << i;
  }
}

}  // namespace
}  // namespace mstar::resources
