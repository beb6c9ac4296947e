// The replicated arena: every byte movement lands in every member, reads
// are member 0's, and a transfer is refused with a sticky error.
#include "kernels/replicated_arena.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <vector>

namespace mstar::kernels {
namespace {

std::unique_ptr<arena> three_members(std::size_t bytes) {
  auto made = replicated_arena_factory({{}, {}, {}})(bytes);
  EXPECT_TRUE(made.has_value()) << made.error().message();
  return made ? std::move(*made) : nullptr;
}

std::vector<std::byte> bytes_of(arena& a) {
  return {a.data(), a.data() + a.size()};
}

TEST(replicated_arena, every_operation_lands_in_every_member) {
  const kv_geometry g{.page_size = 2,
                      .num_layers = 1,
                      .num_kv_heads = 1,
                      .head_dim = 4,
                      .dtype = mstar::dtype::float32};
  const std::size_t pages = 4;
  auto a = three_members(pages * g.page_bytes());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(&a->member(1), a.get());
  EXPECT_EQ(&a->member(0), &a->member(0));
  EXPECT_EQ(a->data(), a->member(0).data());
  EXPECT_NE(a->member(1).data(), a->member(2).data());
  // A pattern written through the arena is in every member.
  std::vector<std::byte> pattern(a->size());
  for (std::size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = std::byte(static_cast<std::uint8_t>(i * 7 + 1));
  ASSERT_TRUE(a->write(0, pattern).has_value());
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(bytes_of(a->member(r)), pattern) << "member " << r;
  // Copies and zeroing too.
  const std::vector<std::int32_t> src{1}, dst{3}, zero{2};
  a->copy_pages(g, src, dst);
  a->zero_pages(g, zero);
  a->copy_slots(g, 0, 1, 1);
  const slot_block block{.offset = 0, .num_layers = 1, .max_slots = 4, .slot_bytes = 8};
  a->copy_slot(block, 2, 3);
  a->zero_slot(block, 0);
  ASSERT_TRUE(a->synchronize().has_value());
  const auto want = bytes_of(a->member(0));
  EXPECT_NE(want, pattern);
  for (int r = 1; r < 3; ++r)
    EXPECT_EQ(bytes_of(a->member(r)), want) << "member " << r;
  // Reads are member 0's.
  a->member(1).data()[5] = std::byte{0xEE};
  std::vector<std::byte> got(8);
  ASSERT_TRUE(a->read(0, got).has_value());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
}

TEST(replicated_arena, a_transfer_is_refused_and_changes_nothing) {
  const kv_geometry g{.page_size = 2,
                      .num_layers = 1,
                      .num_kv_heads = 1,
                      .head_dim = 4,
                      .dtype = mstar::dtype::float32};
  auto a = three_members(4 * g.page_bytes());
  ASSERT_NE(a, nullptr);
  std::vector<std::byte> staging(g.page_bytes(), std::byte{0x5A});
  const std::vector<std::int32_t> one{1};
  a->unpack_pages(g, one, staging.data());
  for (int r = 0; r < 3; ++r) {
    const auto b = bytes_of(a->member(r));
    EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; }));
  }
  auto status = a->status();
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), errc::unsupported);
  EXPECT_EQ(status.error().message(), "transfer of tensor-parallel pools is not supported yet");
  EXPECT_FALSE(a->synchronize().has_value());  // sticky
}

TEST(replicated_arena, refuses_members_of_different_sizes) {
  std::vector<std::unique_ptr<arena>> members;
  members.push_back(make_host_arena(64));
  members.push_back(make_host_arena(128));
  auto a = replicated_arena::make(std::move(members));
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().message().find("member 1 holds 128 bytes"), std::string::npos)
      << a.error().message();
}

}  // namespace
}  // namespace mstar::kernels
