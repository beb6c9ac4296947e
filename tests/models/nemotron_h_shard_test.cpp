// The tensor-parallel split of Nemotron-H (models/nemotron_h_shard.hpp): the
// ranges each rank holds, that the ranks' parts tile every weight, the
// refusals naming the field, and the recurrent pool blocks per rank.
#include "models/nemotron_h_shard.hpp"

#include <gtest/gtest.h>
#include <numeric>

#include "resources/recurrent/geometry.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::models {
namespace {

nemotron_h_config hybrid_config() {
  auto c = nemotron_h_config::load(test::model_dir("nemotron_h_tiny_hybrid"));
  EXPECT_TRUE(c.has_value()) << c.error().message();
  return *c;  // H 8, P 16, N 16, G 2, heads 4 / KV 2 of 16, MLP 128, vocab 512, hidden 64
}

// A weight whose every element names its own index.
std::vector<float> iota_of(std::int64_t n) {
  std::vector<float> w(static_cast<std::size_t>(n));
  std::iota(w.begin(), w.end(), 0.0F);
  return w;
}

TEST(nemotron_h_shard, splits_every_part_of_the_hybrid_fixture_by_heads) {
  const auto c = hybrid_config();
  auto p = plan_shard(c, 1, 2);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->local.mamba_num_heads, 4);
  EXPECT_EQ(p->local.n_groups, 1);
  EXPECT_EQ(p->local.num_attention_heads, 2);
  EXPECT_EQ(p->local.num_key_value_heads, 1);
  EXPECT_EQ(p->local.intermediate_size, 64);
  EXPECT_EQ(p->local.vocab_size, 512);  // the embedding stays whole
  // in_proj [z 128 | x 128 | B 32 | C 32 | dt 8]: rank 1 holds the second half of each.
  const std::vector<index_range> rows{{64, 64}, {192, 64}, {272, 16}, {304, 16}, {324, 4}};
  EXPECT_EQ(p->in_proj_rows, rows);
  const std::vector<index_range> conv{{64, 64}, {144, 16}, {176, 16}};
  EXPECT_EQ(p->conv_channels, conv);
  EXPECT_EQ(p->mamba_heads, (index_range{4, 4}));
  EXPECT_EQ(p->q_rows, (index_range{32, 32}));
  EXPECT_EQ(p->kv_rows, (index_range{16, 16}));
  EXPECT_EQ(p->mlp_rows, (index_range{64, 64}));
  EXPECT_EQ(p->vocab, (index_range{256, 256}));
  EXPECT_EQ(p->local.in_proj_size(), 64 + 64 + 16 + 16 + 4);
}

TEST(nemotron_h_shard, the_ranks_parts_tile_each_weight) {
  const auto c = hybrid_config();
  const std::int64_t hid = c.hidden_size;
  nemotron_h_layer full;
  full.kind = layer_kind::mamba2;
  full.in_proj = iota_of(c.in_proj_size() * hid);
  full.conv_w = iota_of(c.conv_dim() * c.conv_kernel);
  full.conv_b = iota_of(c.conv_dim());
  full.dt_bias = full.a_log = full.d = iota_of(c.mamba_num_heads);
  full.gnorm = iota_of(c.d_inner());
  full.out_proj = iota_of(hid * c.d_inner());
  std::vector<float> out_cols;
  std::int64_t in_proj_rows = 0;
  for (int r = 0; r < 2; ++r) {
    auto p = plan_shard(c, r, 2);
    ASSERT_TRUE(p.has_value());
    const auto l = shard_layer(*p, c, full);
    ASSERT_EQ(static_cast<std::int64_t>(l.in_proj.size()), p->local.in_proj_size() * hid);
    in_proj_rows += p->local.in_proj_size();
    // The rank's dt rows are rows 2·d_inner + 2·G·N + its heads of the full matrix.
    const auto dt_row = 2 * c.d_inner() + 2 * c.n_groups * c.ssm_state_size + 4 * r;
    EXPECT_EQ(l.in_proj[static_cast<std::size_t>((p->local.in_proj_size() - 4) * hid)],
              static_cast<float>(dt_row * hid));
    EXPECT_EQ(l.conv_b.size(), static_cast<std::size_t>(p->local.conv_dim()));
    EXPECT_EQ(l.a_log[0], static_cast<float>(4 * r));
    // out_proj keeps its rows and takes the rank's input columns.
    ASSERT_EQ(static_cast<std::int64_t>(l.out_proj.size()), hid * 64);
    EXPECT_EQ(l.out_proj[64], static_cast<float>(c.d_inner() + 64 * r));  // row 1, column 0
    out_cols.push_back(l.out_proj[0]);
  }
  // The two parts hold every row once between them.
  EXPECT_EQ(in_proj_rows, c.in_proj_size());
  EXPECT_EQ(out_cols, (std::vector<float>{0.0F, 64.0F}));
}

TEST(nemotron_h_shard, pads_a_vocabulary_that_does_not_divide) {
  auto c = hybrid_config();
  c.vocab_size = 513;
  auto p0 = plan_shard(c, 0, 2);
  auto p1 = plan_shard(c, 1, 2);
  ASSERT_TRUE(p0.has_value() && p1.has_value());
  EXPECT_EQ(p0->vocab_chunk, 257);
  EXPECT_EQ(p0->vocab, (index_range{0, 257}));
  EXPECT_EQ(p1->vocab, (index_range{257, 256}));
}

TEST(nemotron_h_shard, refuses_a_split_naming_the_field) {
  auto c = hybrid_config();
  auto groups = plan_shard(c, 0, 4);  // G 2
  ASSERT_FALSE(groups.has_value());
  EXPECT_NE(groups.error().message().find("field 'n_groups': 2 does not split across "
                                          "tensor_parallel 4"),
            std::string::npos)
      << groups.error().message();
  c.n_groups = 4;
  auto kv = plan_shard(c, 0, 4);  // KV heads 2: a GQA group would be cut
  ASSERT_FALSE(kv.has_value());
  EXPECT_NE(kv.error().message().find("'num_key_value_heads'"), std::string::npos);
  EXPECT_NE(kv.error().message().find("GQA"), std::string::npos);
  auto heads = plan_shard(hybrid_config(), 0, 3);
  ASSERT_FALSE(heads.has_value());
  EXPECT_NE(heads.error().message().find("'mamba_num_heads': 8"), std::string::npos);
  auto rank = plan_shard(hybrid_config(), 2, 2);
  ASSERT_FALSE(rank.has_value());
  EXPECT_NE(rank.error().message().find("rank 2 is not one of 2 ranks"), std::string::npos);
}

TEST(nemotron_h_shard, the_sharded_pool_blocks_are_the_ranks_own_geometry) {
  const auto c = hybrid_config();
  auto p = plan_shard(c, 0, 2);
  ASSERT_TRUE(p.has_value());
  auto full = c.to_mamba2_geometry().to_blocks(dtype::float32, dtype::float32);
  ASSERT_TRUE(full.has_value());
  auto blocks = shard_blocks(*p, *full);
  ASSERT_TRUE(blocks.has_value()) << blocks.error().message();
  EXPECT_EQ(blocks->at("ssm").shape(), (std::vector<std::int64_t>{4, 16, 16}));
  EXPECT_EQ(blocks->at("conv").shape(), (std::vector<std::int64_t>{64 + 2 * 16, 3}));
  // Sharding is idempotent: a pool and its backend may both shard the one config.
  auto again = shard_blocks(*p, *blocks);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->at("conv").shape(), blocks->at("conv").shape());
}

}  // namespace
}  // namespace mstar::models
