// Transfer plans: runs of consecutive pages coalesce, large ranges split at
// the chunk size, recurrent slots give one range per (block, layer, slot)
// with each side's own slot count, and bad pairs are refused by name.
#include "transport/plan.hpp"

#include <gtest/gtest.h>

#include "tests/support/matchers.hpp"

namespace mstar::transport {
namespace {

using mstar::test::contains;

arena_layout kv(std::uint64_t pages, std::uint64_t page_bytes = 1000) {
  return arena_layout{arena_kind::kv_pages, "kv", 1, pages, page_bytes};
}

TEST(plan_pages, runs_where_both_ids_ascend_coalesce_into_one_range) {
  const std::vector<unit_pair> pairs{{7, 2}, {5, 0}, {6, 1}, {9, 9}, {10, 11}};
  auto plan = plan_pages(kv(16), kv(12), pairs);
  ASSERT_TRUE(plan);
  const std::vector<byte_range> want{
      {0, 5000, 0, 3000}, {0, 9000, 9000, 1000}, {0, 10000, 11000, 1000}};
  EXPECT_EQ(plan->ranges, want);
  EXPECT_EQ(plan->total_bytes, 5000U);
  ASSERT_EQ(plan->units.size(), 5U);
  EXPECT_EQ(plan->units[0].src, 5);
  EXPECT_EQ(plan->units[4].dst, 11);
  EXPECT_EQ(plan->parts.size(), 5U);
  EXPECT_EQ(plan->unit_name(), "page");
}

TEST(plan_pages, ranges_above_the_chunk_size_split_into_chunks) {
  std::vector<unit_pair> pairs;
  for (int i = 0; i < 10; ++i)
    pairs.push_back({i, i + 2});
  auto plan = plan_pages(kv(12), kv(12), pairs, plan_options{4500});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->ranges.size(), 3U);
  EXPECT_EQ(plan->ranges[0], (byte_range{0, 0, 2000, 4500}));
  EXPECT_EQ(plan->ranges[1], (byte_range{0, 4500, 6500, 4500}));
  EXPECT_EQ(plan->ranges[2], (byte_range{0, 9000, 11000, 1000}));
}

TEST(plan_pages, the_default_chunk_is_8_mib) {
  std::vector<unit_pair> pairs;
  for (int i = 0; i < 9; ++i)
    pairs.push_back({i, i});
  auto plan = plan_pages(kv(9, 2 << 20), kv(9, 2 << 20), pairs);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->ranges.size(), 3U);  // 18 MiB: 8 + 8 + 2
  EXPECT_EQ(plan->ranges[0].bytes, 8U << 20);
  EXPECT_EQ(plan->ranges[2].bytes, 2U << 20);
}

TEST(plan_pages, bad_pairs_and_layouts_are_refused_by_name) {
  const auto fails_with = [](caf::expected<transfer_plan> plan, std::string_view part) {
    ASSERT_FALSE(plan);
    EXPECT_TRUE(is(plan.error(), mstar::errc::invalid_argument));
    EXPECT_TRUE(contains(describe(plan.error()), part));
  };
  fails_with(plan_pages(kv(4), kv(4), std::vector<unit_pair>{{1, 1}, {4, 2}}),
             "page pair 1 (4 -> 2): source outside [0, 4)");
  fails_with(plan_pages(kv(4), kv(4), std::vector<unit_pair>{{1, -1}}), "destination outside");
  fails_with(plan_pages(kv(4), kv(4), std::vector<unit_pair>{{1, 2}, {3, 2}}),
             "destination listed twice");
  fails_with(plan_pages(kv(4, 1000), kv(4, 1024), std::vector<unit_pair>{{1, 1}}),
             "page bytes differ");
  fails_with(plan_pages(kv(4), kv(4), std::vector<unit_pair>{{1, 1}}, plan_options{0}),
             "chunk_bytes");
  fails_with(
      plan_pages(arena_layout::recurrent("ssm", 1, 4, 8), kv(4), std::vector<unit_pair>{{1, 1}}),
      "not a KV page arena");
  fails_with(plan_pages(kv(0), kv(4), std::vector<unit_pair>{}), "must be > 0");
}

TEST(plan_pages, an_empty_pair_list_plans_nothing) {
  auto plan = plan_pages(kv(4), kv(4), std::vector<unit_pair>{});
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->ranges.empty());
  EXPECT_EQ(plan->total_bytes, 0U);
}

TEST(plan_slots, one_range_per_block_layer_and_slot_with_each_sides_slot_count) {
  const std::vector<arena_layout> src{arena_layout::recurrent("ssm", 2, 8, 100),
                                      arena_layout::recurrent("conv", 2, 8, 10)};
  const std::vector<arena_layout> dst{arena_layout::recurrent("ssm", 2, 4, 100),
                                      arena_layout::recurrent("conv", 2, 4, 10)};
  auto plan = plan_slots(src, dst, std::vector<unit_pair>{{5, 1}, {6, 2}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->num_arenas, 2U);
  EXPECT_EQ(plan->unit_name(), "slot");
  // Slot 5 -> 1: ssm layer 0, ssm layer 1, conv layer 0, conv layer 1; then 6 -> 2.
  const std::vector<byte_range> want{{0, 500, 100, 100}, {0, 1300, 500, 100}, {1, 50, 10, 10},
                                     {1, 130, 50, 10},   {0, 600, 200, 100},  {0, 1400, 600, 100},
                                     {1, 60, 20, 10},    {1, 140, 60, 10}};
  EXPECT_EQ(plan->ranges, want);
  EXPECT_EQ(plan->total_bytes, 440U);
  ASSERT_EQ(plan->units.size(), 2U);
  EXPECT_EQ(plan->units[1].first_part, 4U);
  EXPECT_EQ(plan->units[1].num_parts, 4U);
}

TEST(plan_slots, slots_above_the_chunk_split_and_mismatched_blocks_are_refused) {
  const std::vector<arena_layout> big{arena_layout::recurrent("ssm", 1, 2, 1000)};
  auto plan = plan_slots(big, big, std::vector<unit_pair>{{1, 0}}, plan_options{400});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->ranges.size(), 3U);
  EXPECT_EQ(plan->ranges[2], (byte_range{0, 1800, 800, 200}));
  EXPECT_EQ(plan->parts.size(), 1U) << "a checksum reads the unchunked part";

  const std::vector<arena_layout> other{arena_layout::recurrent("conv", 1, 2, 1000)};
  auto bad = plan_slots(big, other, std::vector<unit_pair>{{1, 0}});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(describe(bad.error()), "block 0 ('ssm' / 'conv')"));
  auto none = plan_slots({}, {}, std::vector<unit_pair>{{1, 0}});
  EXPECT_FALSE(none);
  auto out = plan_slots(big, big, std::vector<unit_pair>{{2, 0}});
  ASSERT_FALSE(out);
  EXPECT_TRUE(contains(describe(out.error()), "slot pair 0 (2 -> 0)"));
}

}  // namespace
}  // namespace mstar::transport
