#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <gtest/gtest.h>
#include <limits>
#include <map>
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
// pool evicts under shortfall, against a model of who holds what. The model
// keeps its own record of what the index holds (key, page, parent), so the
// expected results of insert, peek, lookup, evictable and evict come from it
// and not from the index under test; counters show each outcome was reached.
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
      by_key_.clear();
      parent_.clear();
      ++seen_.cleared;
    }
    p_.expect_sound();
    EXPECT_EQ(p_.index.size(), static_cast<std::int32_t>(parent_.size()));
  }

  /// How often each outcome happened.
  struct counters {
    int inserted = 0, insert_refused = 0, matched = 0, missed = 0, evicted = 0, evict_short = 0;
    int cleared = 0;
  };
  [[nodiscard]] const counters& seen() const { return seen_; }

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

  // The model: indexed page -> parent, key -> page.
  [[nodiscard]] std::optional<page_id> model_page(int k) const {
    const auto it = by_key_.find(k);
    return it == by_key_.end() ? std::nullopt : std::optional<page_id>{it->second};
  }

  // Whether someone besides the index holds `page` or any of its
  // descendants (then evict cannot free it).
  [[nodiscard]] bool pinned(page_id page) const {
    if (std::count(p_.held.begin(), p_.held.end(), page) > 0)
      return true;
    for (const auto& [child, parent] : parent_) {
      if (parent == page && pinned(child))
        return true;
    }
    return false;
  }

  [[nodiscard]] std::int32_t model_evictable() const {
    std::int32_t n = 0;
    for (const auto& entry : parent_)
      n += pinned(entry.first) ? 0 : 1;
    return n;
  }

  void insert() {
    const std::optional<page_id> page = held_page();
    if (!page)
      return;
    const int k = pick(0, num_keys - 1);
    std::optional<page_id> parent;
    const int how = pick(0, 2);
    if (how == 1)
      parent = any_page();
    if (how == 2)
      parent = model_page(pick(0, num_keys - 1));
    const bool expected =
        !by_key_.contains(k) && !parent_.contains(*page) && (!parent || parent_.contains(*parent));
    const bool inserted = p_.index.insert(key(k), *page, parent);
    EXPECT_EQ(inserted, expected);
    if (inserted) {
      by_key_[k] = *page;
      parent_[*page] = parent;
    }
    ++(inserted ? seen_.inserted : seen_.insert_refused);
  }

  // Half the time the keys are ones the index holds, so matches run long.
  void match(bool stamp) {
    std::vector<int> ids;
    const bool known = pick(0, 1) == 0;
    for (int k = pick(0, num_keys - 1), n = 0; n < num_keys && ids.size() < 6; ++n) {
      const int candidate = (k + n) % num_keys;
      if (!known || by_key_.contains(candidate))
        ids.push_back(candidate);
    }
    if (pick(0, 1) == 0)
      ids.push_back(num_keys);  // never indexed
    std::vector<digest256> ks;
    pages expected;
    bool missed = false;
    for (const int k : ids) {
      ks.push_back(key(k));
      const auto page = model_page(k);
      missed = missed || !page;
      if (!missed)
        expected.push_back(*page);
    }
    ++(expected.empty() ? seen_.missed : seen_.matched);
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

  // The count freed, and that only unpinned pages went, come from the model;
  // which of them went (the LRU order) is read back from the index.
  void evict(std::int32_t n) {
    const std::int32_t evictable = model_evictable();
    EXPECT_EQ(p_.index.evictable(), evictable);
    const std::int32_t freed = p_.index.evict(n);
    EXPECT_EQ(freed, std::min(n, evictable));
    std::int32_t gone = 0;
    for (auto it = parent_.begin(); it != parent_.end();) {
      if (p_.index.indexes(it->first)) {
        ++it;
        continue;
      }
      EXPECT_FALSE(pinned(it->first)) << "evicted page " << it->first << ", which is held";
      ++gone;
      std::erase_if(by_key_, [&](const auto& entry) { return entry.second == it->first; });
      it = parent_.erase(it);
    }
    EXPECT_EQ(gone, freed);
    EXPECT_EQ(p_.index.evictable(), evictable - freed);
    ++(freed < n ? seen_.evict_short : seen_.evicted);
  }

  std::mt19937_64 rng_;
  pool p_{num_pages};
  std::map<int, page_id> by_key_;                     // key number -> indexed page
  std::map<page_id, std::optional<page_id>> parent_;  // indexed page -> its parent
  counters seen_;
};

TEST(prefix_index, survives_a_seeded_random_walk_with_every_invariant_intact) {
  for (const std::uint64_t seed : {20240611ULL, 7ULL, 99991ULL}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    random_walk walk{seed};
    for (int i = 0; i < 4000; ++i) {
      walk.step();
      ASSERT_FALSE(::testing::Test::HasFailure()) << "after step " << i;
    }
    const auto& seen = walk.seen();
    std::printf(
        "[ coverage ] inserted %d, refused %d, matched %d, missed %d, evicted %d, short %d, "
        "cleared %d\n",
        seen.inserted, seen.insert_refused, seen.matched, seen.missed, seen.evicted,
        seen.evict_short, seen.cleared);
    EXPECT_GT(seen.inserted, 0);
    EXPECT_GT(seen.insert_refused, 0);
    EXPECT_GT(seen.matched, 0);
    EXPECT_GT(seen.missed, 0);
    EXPECT_GT(seen.evicted, 0);
    EXPECT_GT(seen.evict_short, 0);
    EXPECT_GT(seen.cleared, 0);
  }
}

}  // namespace
}  // namespace mstar::resources
