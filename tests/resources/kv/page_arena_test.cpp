#include "resources/kv/page_arena.hpp"

#include <cstdint>
#include <gtest/gtest.h>
#include <vector>

namespace mstar::resources {
namespace {

using pages = std::vector<page_id>;

void expect_sound(const page_arena& arena) {
  const auto ok = arena.check_invariants();
  EXPECT_TRUE(ok) << ok.error().to_string();
}

pages allocate(page_arena& arena, std::int32_t n) {
  pages out;
  EXPECT_TRUE(arena.try_allocate(n, out));
  expect_sound(arena);
  return out;
}

TEST(page_arena, starts_with_every_page_but_the_sink_free_in_order) {
  page_arena arena{5};
  expect_sound(arena);
  EXPECT_EQ(arena.num_pages(), 5);
  EXPECT_EQ(arena.num_free(), 4);
  EXPECT_EQ(arena.free_list(), (pages{1, 2, 3, 4}));
  EXPECT_EQ(arena.owners(sink_page), 1);
  EXPECT_FALSE(arena.sealed(sink_page));
}

TEST(page_arena, make_rejects_fewer_than_two_pages_naming_the_field) {
  for (const std::int32_t n : {1, 0, -3}) {
    auto arena = page_arena::make(n);
    ASSERT_FALSE(arena);
    EXPECT_EQ(arena.error().code(), errc::invalid_argument);
    EXPECT_NE(arena.error().message().find("num_pages"), std::string::npos);
  }
  auto arena = page_arena::make(2);
  ASSERT_TRUE(arena);
  EXPECT_EQ(arena->free_list(), (pages{1}));
}

TEST(page_arena, allocates_in_fifo_order_with_one_owner_each) {
  page_arena arena{6};
  pages out{42};
  ASSERT_TRUE(arena.try_allocate(2, out));
  ASSERT_TRUE(arena.try_allocate(1, out));
  expect_sound(arena);
  EXPECT_EQ(out, (pages{42, 1, 2, 3}));
  for (const page_id page : {1, 2, 3})
    EXPECT_EQ(arena.owners(page), 1);
  EXPECT_EQ(arena.owners(4), 0);
  EXPECT_EQ(arena.free_list(), (pages{4, 5}));
}

TEST(page_arena, try_allocate_is_all_or_nothing) {
  page_arena arena{4};
  pages out{7};
  EXPECT_FALSE(arena.try_allocate(4, out));
  expect_sound(arena);
  EXPECT_EQ(out, (pages{7}));
  EXPECT_EQ(arena.free_list(), (pages{1, 2, 3}));
  EXPECT_TRUE(arena.try_allocate(0, out));
  EXPECT_TRUE(arena.try_allocate(3, out));
  EXPECT_FALSE(arena.try_allocate(1, out));
  EXPECT_EQ(out, (pages{7, 1, 2, 3}));
  EXPECT_EQ(arena.num_free(), 0);
  expect_sound(arena);
}

TEST(page_arena, never_hands_out_the_sink_however_pages_cycle) {
  page_arena arena{3};
  for (int round = 0; round < 5; ++round) {
    const pages got = allocate(arena, 2);
    for (const page_id page : got)
      EXPECT_NE(page, sink_page);
    for (const page_id page : got)
      arena.release(page);
    expect_sound(arena);
    EXPECT_EQ(arena.owners(sink_page), 1);
  }
}

TEST(page_arena, released_pages_join_the_back_of_the_queue) {
  page_arena arena{5};
  const pages got = allocate(arena, 2);
  arena.release(got[1]);
  expect_sound(arena);
  arena.release(got[0]);
  expect_sound(arena);
  EXPECT_EQ(arena.free_list(), (pages{3, 4, 2, 1}));
}

TEST(page_arena, unallocate_restores_the_exact_free_list) {
  page_arena arena{8};
  const pages first = allocate(arena, 3);
  arena.release(first[1]);  // queue now 4 5 6 7 2: not the initial order
  expect_sound(arena);
  const pages before = arena.free_list();
  const pages got = allocate(arena, 3);
  EXPECT_EQ(got, (pages{4, 5, 6}));
  arena.unallocate(got);
  expect_sound(arena);
  EXPECT_EQ(arena.free_list(), before);
  EXPECT_EQ(allocate(arena, 3), got);
}

TEST(page_arena, unallocate_of_nothing_changes_nothing) {
  page_arena arena{4};
  arena.unallocate({});
  expect_sound(arena);
  EXPECT_EQ(arena.free_list(), (pages{1, 2, 3}));
}

TEST(page_arena, release_frees_a_page_only_at_its_last_owner) {
  page_arena arena{4};
  const page_id page = allocate(arena, 1)[0];
  arena.seal(page);
  arena.retain(page);
  arena.retain(page);
  expect_sound(arena);
  EXPECT_EQ(arena.owners(page), 3);
  arena.release(page);
  arena.release(page);
  expect_sound(arena);
  EXPECT_EQ(arena.owners(page), 1);
  EXPECT_EQ(arena.num_free(), 2);
  arena.release(page);
  expect_sound(arena);
  EXPECT_EQ(arena.owners(page), 0);
  EXPECT_EQ(arena.free_list(), (pages{2, 3, 1}));
  EXPECT_EQ(arena.owner_changes(), 5U);
}

TEST(page_arena, a_seal_lasts_until_the_page_is_freed) {
  page_arena arena{3};
  const page_id page = allocate(arena, 1)[0];
  EXPECT_FALSE(arena.sealed(page));
  arena.seal(page);
  expect_sound(arena);
  EXPECT_TRUE(arena.sealed(page));
  arena.release(page);
  expect_sound(arena);
  EXPECT_FALSE(arena.sealed(page));
  while (arena.num_free() > 0)
    EXPECT_FALSE(arena.sealed(allocate(arena, 1)[0]));
}

TEST(page_arena, check_invariants_flags_a_shared_page_that_is_not_sealed) {
  page_arena arena{3};
  const page_id page = allocate(arena, 1)[0];
  arena.retain(page);
  const auto ok = arena.check_invariants();
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message().find("not sealed"), std::string::npos);
}

// Misuse asserts in debug builds; in release builds it must leave the books as
// they were. EXPECT_DEBUG_DEATH checks whichever applies to this build.
TEST(page_arena, misuse_is_refused_without_touching_the_books) {
  page_arena arena{6};
  const pages got = allocate(arena, 2);
  arena.seal(got[0]);
  arena.retain(got[0]);
  const pages free_before = arena.free_list();
  const auto changes_before = arena.owner_changes();

  EXPECT_DEBUG_DEATH(arena.release(5), "");
  EXPECT_DEBUG_DEATH(arena.retain(5), "");
  EXPECT_DEBUG_DEATH(arena.release(sink_page), "");
  EXPECT_DEBUG_DEATH(arena.retain(sink_page), "");
  EXPECT_DEBUG_DEATH(arena.seal(4), "");
  EXPECT_DEBUG_DEATH(arena.retain(6), "");
  EXPECT_DEBUG_DEATH(arena.release(-1), "");
  EXPECT_DEBUG_DEATH(arena.unallocate(pages{got[1], got[0]}), "");  // got[0] is shared
  EXPECT_DEBUG_DEATH(arena.unallocate(pages{got[1], got[1]}), "");  // listed twice
  EXPECT_DEBUG_DEATH(arena.unallocate(pages{got[1], 5}), "");       // 5 is free
  EXPECT_DEBUG_DEATH(arena.unallocate(pages{sink_page}), "");

  expect_sound(arena);
  EXPECT_EQ(arena.free_list(), free_before);
  EXPECT_EQ(arena.owner_changes(), changes_before);
  EXPECT_EQ(arena.owners(got[0]), 2);
  EXPECT_EQ(arena.owners(got[1]), 1);
  EXPECT_FALSE(arena.sealed(4));
}

}  // namespace
}  // namespace mstar::resources
