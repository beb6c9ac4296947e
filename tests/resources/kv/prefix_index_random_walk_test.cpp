#include <algorithm>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "resources/kv/prefix_index.hpp"
#include "tests/resources/kv/prefix_index_test_support.hpp"

namespace mstar::resources {
namespace {

using test::key;
using test::pages;
using test::pool;

// Streams allocate, index and share pages, leases come from lookups, and the
// pool evicts under shortfall, against a model of who holds what.
class random_walk {
 public:
  explicit random_walk(std::uint64_t seed) : rng_(seed) {}

  void step() {
    const int op = pick(0, 99);
    if (op < 22) {
      allocate();
    } else if (op < 42) {
      insert();
    } else if (op < 57) {
      match(pick(0, 1) == 0);
    } else if (op < 62) {
      share();
    } else if (op < 82) {
      release();
    } else if (op < 99) {
      evict(pick(0, 9) == 0 ? std::numeric_limits<std::int32_t>::max() : pick(0, 5));
    } else {
      p_.index.clear();
    }
    p_.expect_sound();
  }

 private:
  static constexpr std::int32_t num_pages = 40;
  static constexpr int num_keys = 64;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>{lo, hi}(rng_); }
  page_id any_page() { return static_cast<page_id>(pick(-1, num_pages)); }
  std::optional<page_id> held_page() {
    if (p_.held.empty())
      return std::nullopt;
    return p_.held[static_cast<std::size_t>(pick(0, static_cast<int>(p_.held.size()) - 1))];
  }

  void allocate() {
    const std::int32_t n = pick(1, 4);
    if (p_.arena.num_free() < n)
      evict(n - p_.arena.num_free());
    const pages before = p_.arena.free_list();
    pages got;
    if (!p_.arena.try_allocate(n, got)) {
      EXPECT_LT(p_.arena.num_free(), n);
      return;
    }
    if (pick(0, 3) == 0) {  // a refused admit rolls back
      p_.arena.unallocate(got);
      EXPECT_EQ(p_.arena.free_list(), before);
      return;
    }
    p_.held.insert(p_.held.end(), got.begin(), got.end());
  }

  void insert() {
    const std::optional<page_id> page = held_page();
    if (!page)
      return;
    const digest256 k = key(pick(0, num_keys - 1));
    std::optional<page_id> parent;
    const int how = pick(0, 2);
    if (how == 1)
      parent = any_page();
    if (how == 2)
      parent = p_.index.page_for(key(pick(0, num_keys - 1)));
    const bool expected =
        !p_.index.page_for(k) && !p_.index.indexes(*page) && (!parent || p_.index.indexes(*parent));
    EXPECT_EQ(p_.index.insert(k, *page, parent), expected);
  }

  // Half the time the keys are ones the index holds, so matches run long.
  void match(bool stamp) {
    std::vector<digest256> ks;
    const bool known = pick(0, 1) == 0;
    for (int k = pick(0, num_keys - 1), n = 0; n < num_keys && ks.size() < 6; ++n) {
      const digest256 candidate = key((k + n) % num_keys);
      if (!known || p_.index.page_for(candidate))
        ks.push_back(candidate);
    }
    if (pick(0, 1) == 0)
      ks.push_back(key(num_keys));  // never indexed
    pages expected;
    for (const digest256& k : ks) {
      const auto page = p_.index.page_for(k);
      if (!page)
        break;
      expected.push_back(*page);
    }
    EXPECT_EQ(p_.index.peek(ks), expected);
    if (!stamp)
      return;
    EXPECT_EQ(p_.index.lookup(ks), expected);
    if (pick(0, 1) == 0) {
      for (const page_id page : expected)
        p_.hold(page);  // a lease
    }
  }

  void share() {
    const std::optional<page_id> page = held_page();
    if (!page)
      return;
    p_.arena.seal(*page);
    p_.hold(*page);
  }

  void release() {
    if (const std::optional<page_id> page = held_page())
      p_.drop(*page);
  }

  void evict(std::int32_t n) {
    const std::int32_t evictable = p_.index.evictable();
    const std::int32_t size = p_.index.size();
    const std::int32_t freed = p_.index.evict(n);
    EXPECT_EQ(freed, std::min(n, evictable));
    EXPECT_EQ(p_.index.size(), size - freed);
    EXPECT_EQ(p_.index.evictable(), evictable - freed);
  }

  std::mt19937_64 rng_;
  pool p_{num_pages};
};

TEST(prefix_index, survives_a_seeded_random_walk_with_every_invariant_intact) {
  for (const std::uint64_t seed : {20240611ULL, 7ULL, 99991ULL}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    random_walk walk{seed};
    for (int i = 0; i < 4000; ++i) {
      walk.step();
      ASSERT_FALSE(::testing::Test::HasFailure()) << "after step " << i;
    }
  }
}

}  // namespace
}  // namespace mstar::resources
