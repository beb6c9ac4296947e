// Both pools on shared-memory arenas (kernels/arena.hpp): the KV + recurrent
// random walk keeps its books there, and a second mapping of a pool's
// segment (what a same-host peer process maps) sees the pool's bytes as they
// change, until the pool goes and takes the segment's name with it.
#include <gtest/gtest.h>
#include <unistd.h>

#include "kernels/shm_arena.hpp"
#include "tests/resources/recurrent/pool_random_walk.hpp"

namespace mstar::resources::test {
namespace {

std::string prefix(const std::string& what) {
  static int counter = 0;
  return "mstar-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + what;
}

class shared_memory_walk : public recurrent_walk {};

TEST_F(shared_memory_walk, both_pools_keep_their_books_in_shared_memory) {
  run({20240611U}, 1500, 700, 5, kernels::shared_memory_arena_factory(prefix("walk")));
  EXPECT_FALSE(kv_->storage().shared_name().empty());
  EXPECT_FALSE(rec_->storage("state")->shared_name().empty());
}

TEST(pool_shared_memory, a_second_mapping_sees_slot_writes_and_zeroing) {
  auto memory = kernels::shared_memory_arena_factory(prefix("rec"));
  auto pool = recurrent_state_pool::make("rec", config_of(4, true, tiny_blocks()), memory).value();
  const std::string name{pool->storage("state")->shared_name()};
  ASSERT_FALSE(name.empty());
  auto peer = kernels::shm_arena::open(name);
  ASSERT_TRUE(peer.has_value()) << peer.error().message();
  ASSERT_EQ(peer->size(), pool->storage("state")->size());

  pool->ingest_request("a");
  step_context ctx;
  auto step = rstep({{"a", "main", 3}});
  ASSERT_TRUE(pool->admit(step, ctx).ok);
  ASSERT_TRUE(pool->plan(step, ctx).has_value());
  ASSERT_TRUE(pool->commit(step, ctx).has_value());
  const std::int32_t slot = pool->slot_of("a", "main").value();
  fill_slot(*pool, slot, 7);
  const auto view = pool->block("state", 0).value();
  const std::byte* mine = view.data + slot * view.strides_bytes[0];
  const std::byte* theirs = peer->data() + (mine - pool->storage("state")->data());
  EXPECT_EQ(std::memcmp(mine, theirs, static_cast<std::size_t>(view.strides_bytes[0])), 0);
  EXPECT_NE(std::to_integer<int>(theirs[0]), 0);

  pool->remove_request("a");  // released slots are zeroed: the peer sees it
  EXPECT_EQ(std::to_integer<int>(theirs[0]), 0);
  ASSERT_TRUE(pool->check_invariants().has_value());

  pool.reset();  // the pool's segments lose their names; the mapping stays
  EXPECT_FALSE(kernels::shm_arena::open(name).has_value());
  EXPECT_EQ(std::to_integer<int>(theirs[0]), 0);
}

TEST(pool_shared_memory, a_taken_name_is_an_error_naming_the_segment) {
  const std::string name = prefix("taken");
  auto first = kernels::make_shared_memory_arena(name, 4096);
  ASSERT_TRUE(first.has_value());
  auto second = kv_pool::make(
      "kv",
      [] {
        kv_pool_config c;
        c.geometry.page_size = 4;
        c.max_num_pages = 8;
        c.geometry.num_layers = 1;
        c.geometry.head_dim = 4;
        return c;
      }(),
      "", [&](std::size_t bytes) { return kernels::make_shared_memory_arena(name, bytes); });
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.error().message().find(name), std::string::npos) << second.error().message();
  EXPECT_NE(second.error().message().find("kv pool 'kv'"), std::string::npos);
}

}  // namespace
}  // namespace mstar::resources::test
