// Recurrent slots between two agents over each transport: every (block,
// layer, slot) lands where the plan says, between pools of different sizes,
// and slot checksums computed by the sender verify on the receiver.
#include <gtest/gtest.h>

#include "tests/transport/support.hpp"
#include "transport/agent.hpp"
#include "transport/checksum.hpp"

namespace mstar::transport {
namespace {

using test::fill_pattern;
using test::holds_pattern;

class agent_slots : public ::testing::TestWithParam<std::string> {};

TEST_P(agent_slots, every_block_layer_and_slot_lands_byte_exact) {
  auto a = test::make_agent("prefill", GetParam());
  auto b = test::make_agent("decode", GetParam());
  ASSERT_TRUE(a && b);
  // Two blocks of three layers; the decode pool holds fewer slots.
  const std::vector<arena_layout> src_blocks{arena_layout::recurrent("ssm", 3, 8, 4096),
                                             arena_layout::recurrent("conv", 3, 8, 1536)};
  const std::vector<arena_layout> dst_blocks{arena_layout::recurrent("ssm", 3, 5, 4096),
                                             arena_layout::recurrent("conv", 3, 5, 1536)};
  std::vector<kernels::host_arena> src, dst;
  std::vector<arena_pair> binding;
  for (std::size_t k = 0; k < 2; ++k) {
    src.emplace_back(src_blocks[k].bytes());
    dst.emplace_back(dst_blocks[k].bytes());
    fill_pattern(src[k].data(), src[k].size(), static_cast<std::uint32_t>(20 + k));
    auto s = a->register_arena(src[k].data(), src_blocks[k]);
    auto d = b->register_arena(dst[k].data(), dst_blocks[k]);
    ASSERT_TRUE(s && d);
    auto remote = b->attach(*a->describe(*s));
    ASSERT_TRUE(remote) << describe(remote.error());
    binding.push_back({*d, *remote});
  }
  ASSERT_TRUE(a->start_progress_thread());
  const std::vector<unit_pair> pairs{{6, 2}, {1, 4}, {3, 0}};
  auto plan = plan_slots(src_blocks, dst_blocks, pairs);
  ASSERT_TRUE(plan) << describe(plan.error());
  EXPECT_EQ(plan->ranges.size(), 2U * 3U * pairs.size()) << "one range per (block, layer, slot)";
  auto h = b->start(direction::read, *plan, binding, test::in_seconds(20));
  ASSERT_TRUE(h) << describe(h.error());
  auto done = b->wait(*h);
  ASSERT_TRUE(done) << describe(done.error());

  for (std::size_t k = 0; k < 2; ++k) {
    const auto sb = src_blocks[k].unit_bytes;
    for (std::uint64_t layer = 0; layer < 3; ++layer) {
      for (const auto& p : pairs) {
        EXPECT_TRUE(holds_pattern(dst[k].data(), (layer * 5 + p.dst) * sb, (layer * 8 + p.src) * sb,
                                  sb, static_cast<std::uint32_t>(20 + k)))
            << "block " << k << " layer " << layer << " slot " << p.dst;
      }
      EXPECT_EQ(std::to_integer<int>(dst[k].data()[(layer * 5 + 1) * sb]), 0) << "slot 1 untouched";
    }
  }

  const std::byte* src_bases[] = {src[0].data(), src[1].data()};
  const std::byte* dst_bases[] = {dst[0].data(), dst[1].data()};
  const std::vector<std::int32_t> slots{6, 1, 3};
  auto sums = checksum_slots(src_blocks, src_bases, slots);
  ASSERT_TRUE(sums);
  auto ok = verify_units(*plan, dst_bases, *sums);
  EXPECT_TRUE(ok) << describe(ok.error());
  dst[1].data()[(2 * 5 + 4) * 1536 + 8] ^= std::byte{0x40};  // conv, layer 2, slot 4 (from 1)
  auto bad = verify_units(*plan, dst_bases, *sums);
  ASSERT_FALSE(bad);
  EXPECT_NE(describe(bad.error()).find("slot 4 (source slot 1)"), std::string::npos)
      << describe(bad.error());
}

INSTANTIATE_TEST_SUITE_P(transports, agent_slots, ::testing::Values("tcp", "sm"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace mstar::transport
