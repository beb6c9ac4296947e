#include "resources/kv/prefix_index.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <initializer_list>
#include <limits>
#include <optional>
#include <vector>

#include "tests/resources/kv/prefix_index_test_support.hpp"

namespace mstar::resources {
namespace {

using test::key;
using test::keys;
using test::pages;
using test::pool;

constexpr std::int32_t all = std::numeric_limits<std::int32_t>::max();

TEST(prefix_index, lookup_walks_from_the_first_key_and_stops_at_the_first_miss) {
  pool p{8};
  const page_id a = p.cache(1);
  const page_id b = p.cache(2, a);
  p.cache(3, b);
  EXPECT_EQ(p.index.lookup(keys({1, 2, 9, 3})), (pages{a, b}));
  EXPECT_EQ(p.index.lookup(keys({2, 3})).size(), 2U);  // any indexed run matches
  EXPECT_TRUE(p.index.lookup(keys({9, 1})).empty());
  EXPECT_TRUE(p.index.lookup({}).empty());
  EXPECT_EQ(p.index.page_for(key(2)), b);
  EXPECT_EQ(p.index.page_for(key(9)), std::nullopt);
  p.expect_sound();
}

TEST(prefix_index, lookup_stamps_the_match_so_the_other_leaf_goes_first) {
  pool p{8};
  const page_id old_leaf = p.cache(1);
  const page_id new_leaf = p.cache(2);
  EXPECT_EQ(p.index.lookup(keys({1})), (pages{old_leaf}));
  p.expect_sound();
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_TRUE(p.index.indexes(old_leaf));
  EXPECT_FALSE(p.index.indexes(new_leaf));
}

TEST(prefix_index, lookup_stamps_every_page_of_the_run_not_only_its_end) {
  pool p{8};
  const page_id head = p.cache(1);
  p.cache(2, head);
  const page_id other = p.take();
  ASSERT_TRUE(p.index.insert(key(3), other, std::nullopt));  // newer than head's insert
  (void)p.index.lookup(keys({1, 2}));                        // head now newer than other
  EXPECT_EQ(p.index.evict(1), 1);  // other is held: the tail goes, head becomes a leaf
  p.expect_sound();
  p.drop(other);
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_TRUE(p.index.indexes(head));
  EXPECT_FALSE(p.index.indexes(other));
}

TEST(prefix_index, peek_matches_like_lookup_without_stamping) {
  pool p{8};
  const page_id old_leaf = p.cache(1);
  const page_id new_leaf = p.cache(2);
  EXPECT_EQ(p.index.peek(keys({1, 2})), (pages{old_leaf, new_leaf}));
  p.expect_sound();
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_FALSE(p.index.indexes(old_leaf));
  EXPECT_TRUE(p.index.indexes(new_leaf));
}

TEST(prefix_index, insert_seals_and_retains_the_page_for_the_index) {
  pool p{4};
  const page_id page = p.take();
  ASSERT_TRUE(p.index.insert(key(1), page, std::nullopt));
  p.expect_sound();
  EXPECT_TRUE(p.arena.sealed(page));
  EXPECT_EQ(p.arena.owners(page), 2);
  EXPECT_EQ(p.index.size(), 1);
  EXPECT_EQ(p.index.key_of(page), key(1));
  EXPECT_EQ(p.index.evictable(), 0);  // the writer still holds it
  p.drop(page);
  EXPECT_EQ(p.index.evictable(), 1);
}

TEST(prefix_index, the_first_writer_of_a_key_wins) {
  pool p{4};
  const page_id winner = p.cache(1);
  const page_id loser = p.take();
  EXPECT_FALSE(p.index.insert(key(1), loser, std::nullopt));
  p.expect_sound();
  EXPECT_EQ(p.index.page_for(key(1)), winner);
  EXPECT_FALSE(p.index.indexes(loser));
  EXPECT_EQ(p.arena.owners(loser), 1);
  EXPECT_FALSE(p.arena.sealed(loser));
}

TEST(prefix_index, a_page_carries_only_one_key) {
  pool p{4};
  const page_id page = p.cache(1);
  EXPECT_FALSE(p.index.insert(key(2), page, std::nullopt));
  p.expect_sound();
  EXPECT_EQ(p.index.key_of(page), key(1));
  EXPECT_EQ(p.index.page_for(key(2)), std::nullopt);
  EXPECT_EQ(p.arena.owners(page), 1);
}

TEST(prefix_index, a_parent_must_be_indexed) {
  pool p{6};
  const page_id stranger = p.take();
  const page_id page = p.take();
  EXPECT_FALSE(p.index.insert(key(1), page, stranger));
  EXPECT_FALSE(p.index.insert(key(1), page, page));
  EXPECT_FALSE(p.index.insert(key(1), page, page_id{99}));
  p.expect_sound();
  EXPECT_EQ(p.index.size(), 0);
  EXPECT_EQ(p.arena.owners(page), 1);
}

TEST(prefix_index, the_sink_free_pages_and_strangers_to_the_arena_are_not_indexed) {
  pool p{4};
  EXPECT_FALSE(p.index.insert(key(1), sink_page, std::nullopt));
  EXPECT_FALSE(p.index.insert(key(1), page_id{3}, std::nullopt));  // free
  EXPECT_FALSE(p.index.insert(key(1), page_id{4}, std::nullopt));
  EXPECT_FALSE(p.index.insert(key(1), page_id{-1}, std::nullopt));
  p.expect_sound();
  EXPECT_EQ(p.index.size(), 0);
  EXPECT_EQ(p.arena.owners(sink_page), 1);
}

TEST(prefix_index, evict_drops_least_recently_used_leaves_first) {
  pool p{8};
  const page_id a = p.cache(1);
  const page_id b = p.cache(2);
  const page_id c = p.cache(3);
  (void)p.index.lookup(keys({2}));
  (void)p.index.lookup(keys({1}));
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_FALSE(p.index.indexes(c));
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_FALSE(p.index.indexes(b));
  EXPECT_TRUE(p.index.indexes(a));
  EXPECT_EQ(p.arena.free_list().back(), b);
}

TEST(prefix_index, evict_drops_tails_before_heads) {
  pool p{8};
  const page_id head = p.cache(1);
  const page_id mid = p.cache(2, head);
  const page_id tail = p.cache(3, mid);
  (void)p.index.lookup(keys({1, 2, 3}));
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_FALSE(p.index.indexes(tail));
  EXPECT_EQ(p.index.lookup(keys({1, 2, 3})), (pages{head, mid}));
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_EQ(p.index.lookup(keys({1, 2, 3})), (pages{head}));
}

TEST(prefix_index, a_parent_becomes_a_leaf_after_its_last_child_goes) {
  pool p{8};
  const page_id parent = p.cache(1);
  p.cache(2, parent);
  p.cache(3, parent);
  EXPECT_EQ(p.index.evict(2), 2);
  p.expect_sound();
  EXPECT_TRUE(p.index.indexes(parent));
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_EQ(p.index.size(), 0);
  EXPECT_EQ(p.arena.num_free(), 7);
}

TEST(prefix_index, one_pass_frees_a_whole_chain_leaf_by_leaf) {
  pool p{8};
  const page_id head = p.cache(1);
  p.cache(3, p.cache(2, head));
  EXPECT_EQ(p.index.evictable(), 3);
  EXPECT_EQ(p.index.evict(all), 3);
  p.expect_sound();
  EXPECT_EQ(p.index.size(), 0);
}

TEST(prefix_index, a_pool_full_of_cache_only_pages_frees_what_a_live_request_needs) {
  pool p{9};
  page_id parent = p.cache(0);
  for (int k = 1; k < 8; ++k)
    parent = p.cache(k, k % 3 == 0 ? std::nullopt : std::optional{parent});
  ASSERT_EQ(p.arena.num_free(), 0);
  pages live;
  EXPECT_FALSE(p.arena.try_allocate(3, live));
  EXPECT_EQ(p.index.evict(3), 3);
  p.expect_sound();
  EXPECT_EQ(p.take_n(3).size(), 3U);
  p.expect_sound();
  EXPECT_EQ(p.index.size(), 5);
}

TEST(prefix_index, a_pool_full_of_live_pages_still_fails) {
  pool p{6};
  const page_id a = p.take();
  ASSERT_TRUE(p.index.insert(key(1), a, std::nullopt));
  EXPECT_EQ(p.take_n(4).size(), 4U);
  EXPECT_EQ(p.index.evict(all), 0);
  p.expect_sound();
  pages more;
  EXPECT_FALSE(p.arena.try_allocate(1, more));
  EXPECT_TRUE(p.index.indexes(a));
}

TEST(prefix_index, leased_pages_survive_evict_of_everything) {
  pool p{10};
  const page_id a = p.cache(1);
  const page_id b = p.cache(2, a);
  const page_id c = p.cache(3, b);
  const page_id d = p.cache(4);
  p.cache(5, d);
  const pages lease = p.index.lookup(keys({1, 2}));
  for (const page_id page : lease)
    p.hold(page);
  EXPECT_EQ(p.index.evictable(), 3);
  EXPECT_EQ(p.index.evict(all), 3);
  p.expect_sound();
  EXPECT_EQ(p.index.lookup(keys({1, 2, 3})), (pages{a, b}));
  EXPECT_FALSE(p.index.indexes(c));
  EXPECT_EQ(p.arena.owners(a), 2);
  EXPECT_EQ(p.arena.owners(b), 2);
}

TEST(prefix_index, an_all_live_pool_is_scanned_once_per_pass_and_frees_nothing) {
  pool p{10};
  for (int k = 0; k < 6; ++k)
    ASSERT_TRUE(p.index.insert(key(k), p.take(), std::nullopt));
  for (int pass = 0; pass < 3; ++pass) {
    const auto before = p.index.candidates_examined();
    EXPECT_EQ(p.index.evict(all), 0);
    p.expect_sound();
    EXPECT_EQ(p.index.candidates_examined() - before, 6U);
  }
  EXPECT_EQ(p.index.size(), 6);
}

TEST(prefix_index, passed_over_leaves_are_found_by_the_next_evict) {
  pool p{6};
  const page_id page = p.take();
  ASSERT_TRUE(p.index.insert(key(1), page, std::nullopt));
  EXPECT_EQ(p.index.evict(1), 0);
  p.expect_sound();
  p.drop(page);
  EXPECT_EQ(p.index.evict(1), 1);
  p.expect_sound();
  EXPECT_EQ(p.arena.owners(page), 0);
}

TEST(prefix_index, passing_over_a_leaf_leaves_its_parents_child_count_alone) {
  pool p{6};
  const page_id parent = p.cache(1);
  const page_id child = p.take();
  ASSERT_TRUE(p.index.insert(key(2), child, parent));
  EXPECT_EQ(p.index.evictable(), 0);  // the live child pins its parent
  EXPECT_EQ(p.index.evict(all), 0);
  p.expect_sound();  // child counts are checked here
  EXPECT_TRUE(p.index.indexes(parent));
  p.drop(child);
  EXPECT_EQ(p.index.evictable(), 2);
  EXPECT_EQ(p.index.evict(all), 2);
  p.expect_sound();
}

TEST(prefix_index, clear_releases_every_page_and_the_destructor_does_too) {
  pool p{6};
  const page_id shared = p.take();
  ASSERT_TRUE(p.index.insert(key(1), shared, std::nullopt));
  p.cache(2, shared);
  p.index.clear();
  p.expect_sound();
  EXPECT_EQ(p.index.size(), 0);
  EXPECT_EQ(p.arena.owners(shared), 1);
  EXPECT_EQ(p.arena.num_free(), 4);
  {
    prefix_index scoped{p.arena};
    ASSERT_TRUE(scoped.insert(key(3), shared, std::nullopt));
    EXPECT_EQ(p.arena.owners(shared), 2);
  }
  EXPECT_EQ(p.arena.owners(shared), 1);
  p.expect_sound();
}

}  // namespace
}  // namespace mstar::resources
