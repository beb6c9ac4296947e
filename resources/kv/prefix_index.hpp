#pragma once

// The prefix cache's index (reference kv-keys-windowing §3.6.7): which page
// holds the KV of which rooted page key, how those pages chain, and which of
// them to give back first when the pool runs short.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/keys.hpp"
#include "resources/kv/page_arena.hpp"

namespace mstar::resources {

/// Hash of a page key for unordered containers: its first eight bytes, which
/// SHA-256 already spreads uniformly.
struct digest256_hash {
  /// The hash of `key`.
  [[nodiscard]] std::size_t operator()(const digest256& key) const noexcept;
};

/// Rooted page key -> sealed page, with each page's parent in its chain and an
/// LRU order over leaves for eviction.
///
/// The index is an owner of every page it names (one `retain` each), so an
/// indexed page outlives the request that wrote it. Eviction removes only
/// leaves (a parent outlives its children) that nobody but the index holds,
/// least recently matched first; since a lookup stamps the whole matched run
/// at once, recency never increases along a chain and tails go before heads.
///
/// Holds a reference to `arena`: the arena must outlive the index and must not
/// move while it exists. The destructor releases the index's references.
/// Not thread-safe: confined to the KV pool that owns both. Allocation-free
/// after construction except for `insert` (one map node) and `lookup`'s result.
class prefix_index {
 public:
  /// An empty index over `arena`'s pages.
  explicit prefix_index(page_arena& arena);

  prefix_index(const prefix_index&) = delete;
  prefix_index& operator=(const prefix_index&) = delete;
  prefix_index(prefix_index&&) = delete;
  prefix_index& operator=(prefix_index&&) = delete;
  /// Releases every indexed page (`clear`).
  ~prefix_index();

  /// Pages of the longest run of `keys`, from the first, that the index
  /// holds; stops at the first miss. A non-empty match ticks the clock once
  /// and stamps every matched page with it. The caller retains what it keeps.
  [[nodiscard]] std::vector<page_id> lookup(std::span<const digest256> keys);

  /// `lookup` without touching recency.
  [[nodiscard]] std::vector<page_id> peek(std::span<const digest256> keys) const;

  /// The page indexed under `key`, if any; no recency change.
  [[nodiscard]] std::optional<page_id> page_for(const digest256& key) const;

  /// Indexes owned page `page` under `key`, chained below `parent`: seals the
  /// page, retains it for the index, counts it as the parent's child and makes
  /// it an eviction candidate stamped as the newest. False, and nothing
  /// changed, when `key` is already indexed (first writer wins), `page`
  /// already carries a key, `parent` is given but not indexed, or `page` is
  /// the sink, free or out of range.
  bool insert(const digest256& key, page_id page, std::optional<page_id> parent);

  /// Removes up to `n` leaves only the index holds, least recently stamped
  /// first; a parent whose last child goes becomes a candidate in the same
  /// pass. Leaves someone else holds are passed over (each at most once per
  /// call) and stay candidates. Returns pages returned to the free queue.
  std::int32_t evict(std::int32_t n);

  /// Indexed pages.
  [[nodiscard]] std::int32_t size() const noexcept {
    return static_cast<std::int32_t>(map_.size());
  }

  /// Whether `page` carries a key.
  [[nodiscard]] bool indexes(page_id page) const noexcept;

  /// The key `page` is indexed under, if any.
  [[nodiscard]] std::optional<digest256> key_of(page_id page) const;

  /// Pages `evict` could free now: those only the index holds and that no
  /// descendant held by someone else pins. O(num_pages) when the arena's
  /// owners or the index changed since the last call, O(1) otherwise.
  [[nodiscard]] std::int32_t evictable() const;

  /// Heap entries `evict` has examined since construction (passed-over,
  /// stale and removed alike), so tests and metrics can see a pass's cost.
  [[nodiscard]] std::uint64_t candidates_examined() const noexcept { return examined_; }

  /// Releases every indexed page and empties the index.
  void clear();

  /// Checks the index against itself and the arena: every indexed page is
  /// sealed and owned, map and per-page records agree, parents are indexed,
  /// child counts match, every indexed leaf is a candidate exactly once.
  /// Names the first broken rule. O(num_pages); allocates.
  [[nodiscard]] result<void> check_invariants() const;

 private:
  struct node {  // kept small: evict and evictable walk these
    std::uint64_t stamp = 0;
    page_id parent = -1;  // -1: a chain head
    std::int32_t children = 0;
    bool indexed = false;
    bool queued = false;  // one heap entry (or a passed-over slot) names this page
  };
  using candidate = std::pair<std::uint64_t, page_id>;  // (stamp, page)

  [[nodiscard]] bool valid_page(page_id page) const noexcept;
  void collect(std::span<const digest256> keys, std::vector<page_id>& out) const;
  void push_candidate(page_id page);
  [[nodiscard]] candidate pop_candidate();
  bool remove_leaf(page_id page);  // true when the release freed the page

  page_arena& arena_;
  std::unordered_map<digest256, page_id, digest256_hash> map_;
  std::vector<node> nodes_;           // per page id
  std::vector<digest256> keys_;       // per page id; meaningful where indexed
  std::vector<candidate> heap_;       // min-heap over (stamp, page)
  std::vector<page_id> passed_over_;  // scratch for one evict pass
  std::uint64_t clock_ = 0;
  std::uint64_t examined_ = 0;
  std::uint64_t version_ = 0;                 // bumped by every insert and removal
  mutable std::vector<std::uint8_t> pinned_;  // scratch for evictable()
  mutable std::int32_t evictable_cache_ = 0;
  mutable std::uint64_t cache_owner_changes_ = ~std::uint64_t{0};
  mutable std::uint64_t cache_version_ = ~std::uint64_t{0};
};

}  // namespace mstar::resources
