#pragma once

// A page arena, a prefix index over it and the stream references a test
// holds, with the pool-wide conservation check (reference §3.6.7
// assert_pages_conserved) the index tests run after every operation.

#include <algorithm>
#include <cstdint>
#include <gtest/gtest.h>
#include <initializer_list>
#include <optional>
#include <vector>

#include "resources/kv/page_arena.hpp"
#include "resources/kv/prefix_index.hpp"

namespace mstar::resources::test {

using pages = std::vector<page_id>;

/// A distinct page key per integer (not a real page hash; the index only
/// compares and hashes keys).
inline digest256 key(int k) {
  digest256 out{};
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::uint8_t>((static_cast<unsigned>(k) >> (8 * (i % 4))) + i);
  }
  return out;
}

/// `key` of each integer, in order.
inline std::vector<digest256> keys(std::initializer_list<int> ks) {
  std::vector<digest256> out;
  for (const int k : ks)
    out.push_back(key(k));
  return out;
}

/// An arena and an index over it; `held` lists the references that stand in
/// for streams and leases (one entry per owner reference).
struct pool {
  page_arena arena;
  prefix_index index{arena};
  pages held;

  explicit pool(std::int32_t num_pages) : arena{num_pages} {}

  /// Allocates `n` pages as a stream would.
  pages take_n(std::int32_t n) {
    pages out;
    EXPECT_TRUE(arena.try_allocate(n, out));
    held.insert(held.end(), out.begin(), out.end());
    return out;
  }

  /// Allocates one page as a stream would.
  page_id take() {
    const pages got = take_n(1);
    return got.empty() ? sink_page : got[0];
  }

  /// Adds a stream or lease reference to an indexed (so sealed) page.
  void hold(page_id page) {
    arena.retain(page);
    held.push_back(page);
  }

  /// Drops one stream or lease reference to `page`.
  void drop(page_id page) {
    const auto it = std::find(held.begin(), held.end(), page);
    ASSERT_NE(it, held.end());
    *it = held.back();
    held.pop_back();
    arena.release(page);
  }

  /// A page written, indexed under `key(k)` below `parent`, then let go by
  /// its writer: only the index holds it.
  page_id cache(int k, std::optional<page_id> parent = std::nullopt) {
    const page_id page = take();
    EXPECT_TRUE(index.insert(key(k), page, parent));
    drop(page);
    return page;
  }

  /// Both objects' invariants, and every owner count equal to the references
  /// known here: streams and leases, the index, the sink's one.
  void expect_sound() const {
    const auto arena_ok = arena.check_invariants();
    EXPECT_TRUE(arena_ok) << arena_ok.error().to_string();
    const auto index_ok = index.check_invariants();
    EXPECT_TRUE(index_ok) << index_ok.error().to_string();
    for (page_id page = 0; page < arena.num_pages(); ++page) {
      const auto refs = std::count(held.begin(), held.end(), page) + (index.indexes(page) ? 1 : 0) +
                        (page == sink_page ? 1 : 0);
      EXPECT_EQ(arena.owners(page), refs) << "page " << page;
    }
  }
};

}  // namespace mstar::resources::test
