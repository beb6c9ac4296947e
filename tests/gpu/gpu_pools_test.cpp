// The pools on device arenas: every arena operation against the host arena
// byte for byte, and the KV + recurrent random walk with both pools' bytes in
// device memory (copies, forks and zeroing run as kernels on the stream).
#include <algorithm>
#include <gtest/gtest.h>
#include <numeric>
#include <random>

#include "kernels/cuda/device_arena.hpp"
#include "tests/gpu/gpu_support.hpp"
#include "tests/resources/recurrent/pool_random_walk.hpp"

namespace mstar::test::gpu {
namespace {

using kernels::arena;

std::vector<std::byte> bytes_of(const arena& a) {
  std::vector<std::byte> out(a.size());
  EXPECT_TRUE(a.read(0, out).has_value());
  return out;
}

// Distinct page ids drawn from [0, pages).
std::vector<std::int32_t> distinct(std::mt19937& rng, int pages, int n) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(pages));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<std::size_t>(n));
  return all;
}

TEST(gpu_device_arena, every_operation_matches_the_host_arena_byte_for_byte) {
  MSTAR_REQUIRE_GPU();
  auto stream = kernels::cuda::stream::make().value();
  // 64-byte tokens (16 floats) x 4 slots x 3 layers.
  const kernels::kv_geometry geometry{4, 3, 1, 16, mstar::dtype::float32};
  const kernels::slot_block block{geometry.page_bytes() * 20, 3, 8, 40};
  const std::size_t bytes = geometry.page_bytes() * 20 + 3 * 8 * 40;
  auto host = kernels::make_host_arena(bytes);
  auto dev = kernels::cuda::make_device_arena(bytes, stream.get()).value();
  ASSERT_EQ(dev->kind(), kernels::memory_kind::device);
  EXPECT_EQ(bytes_of(*dev), bytes_of(*host));  // both start zeroed
  std::mt19937 rng{20261130};
  std::vector<std::byte> noise(bytes);
  for (auto& b : noise)
    b = std::byte{static_cast<unsigned char>(rng())};
  ASSERT_TRUE(host->write(0, noise).has_value());
  ASSERT_TRUE(dev->write(0, noise).has_value());
  auto staging_host = kernels::make_host_arena(geometry.page_bytes() * 8);
  auto staging_dev =
      kernels::cuda::make_device_arena(geometry.page_bytes() * 8, stream.get()).value();
  for (int op = 0; op < 400; ++op) {
    SCOPED_TRACE("op " + std::to_string(op));
    const int kind = static_cast<int>(rng() % 9);
    if (kind == 0) {  // disjoint lists
      auto ids = distinct(rng, 20, 8);
      const std::span<const std::int32_t> s{ids.data(), 4}, d{ids.data() + 4, 4};
      host->copy_pages(geometry, s, d);
      dev->copy_pages(geometry, s, d);
    } else if (kind == 1) {  // a chain: each destination is the next entry's source
      auto ids = distinct(rng, 20, 5);
      const std::span<const std::int32_t> s{ids.data(), 4}, d{ids.data() + 1, 4};
      host->copy_pages(geometry, s, d);
      dev->copy_pages(geometry, s, d);
    } else if (kind == 2) {
      const auto src = static_cast<std::int32_t>(rng() % 20),
                 dst = static_cast<std::int32_t>(rng() % 20);
      const std::size_t slots = 1 + rng() % geometry.page_size;
      host->copy_slots(geometry, src, dst, slots);
      dev->copy_slots(geometry, src, dst, slots);
    } else if (kind == 3) {
      auto ids = distinct(rng, 20, 3);
      host->zero_pages(geometry, ids);
      dev->zero_pages(geometry, ids);
    } else if (kind == 4) {  // pack from one place, unpack elsewhere
      auto from = distinct(rng, 20, 6), to = distinct(rng, 20, 6);
      host->pack_pages(geometry, from, staging_host->data());
      dev->pack_pages(geometry, from, staging_dev->data());
      host->unpack_pages(geometry, to, staging_host->data());
      dev->unpack_pages(geometry, to, staging_dev->data());
    } else if (kind == 5) {
      const auto src = static_cast<std::int32_t>(rng() % 8),
                 dst = static_cast<std::int32_t>(rng() % 8);
      host->copy_slot(block, src, dst);
      dev->copy_slot(block, src, dst);
    } else if (kind == 6) {
      const auto s = static_cast<std::int32_t>(rng() % 8);
      host->zero_slot(block, s);
      dev->zero_slot(block, s);
    } else {
      const auto a = static_cast<std::int32_t>(rng() % 8), b = static_cast<std::int32_t>(rng() % 8);
      host->pack_slot(block, a, staging_host->data());
      dev->pack_slot(block, a, staging_dev->data());
      host->unpack_slot(block, b, staging_host->data());
      dev->unpack_slot(block, b, staging_dev->data());
    }
    if (op % 20 == 19) {
      ASSERT_TRUE(dev->synchronize().has_value());
      ASSERT_EQ(bytes_of(*dev), bytes_of(*host));
    }
  }
  ASSERT_TRUE(dev->status().has_value());
  EXPECT_EQ(bytes_of(*dev), bytes_of(*host));
  std::vector<std::byte> past(8);
  EXPECT_FALSE(dev->read(bytes - 4, past).has_value());  // out of range
}

class gpu_pool_walk : public resources::test::recurrent_walk {};

TEST_F(gpu_pool_walk, both_pools_keep_their_books_on_device_arenas) {
  MSTAR_REQUIRE_GPU();
  auto stream = kernels::cuda::stream::make().value();
  run({20240611U, 7U}, 1500, 700, 5, kernels::cuda::device_arena_factory(stream.get()));
  ASSERT_EQ(rec_->storage("state")->kind(), kernels::memory_kind::device);
  ASSERT_EQ(kv_->storage().kind(), kernels::memory_kind::device);
  kv_.reset();  // arenas go before the stream they run on
  rec_.reset();
}

}  // namespace
}  // namespace mstar::test::gpu
