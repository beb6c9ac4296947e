#pragma once

// Page bookkeeping for the paged KV pool (reference kv-keys-windowing §3.5):
// which pages are free, in what order they are handed out, how many owners
// each page has and whether it is sealed. No memory lives here; the KV pool
// owns the bytes and addresses them by page id.

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/result.hpp"

namespace mstar::resources {

/// Index of one KV page in the pool, 0 .. num_pages-1.
using page_id = std::int32_t;

/// The page padding rows of a captured replay write into: taken at
/// construction, never handed out, owner count 1 forever.
inline constexpr page_id sink_page = 0;

/// Free queue, owner counts and seals of a fixed set of pages.
///
/// Pages leave the FIFO free queue with one owner (`try_allocate`); sharing a
/// page (a prefix hit, the prefix index) adds owners with `retain`; `release`
/// drops one and returns the page to the back of the queue at zero. A page
/// with more than one owner must be sealed: nobody writes into it again.
///
/// Misuse (an out-of-range id, retaining or releasing a free page, touching
/// the sink, undoing a shared page) is a programming error: it asserts in
/// debug builds and is ignored in release builds so the books stay intact.
/// Allocation-free after construction except for what callers' vectors need.
/// Not thread-safe: one owner (the KV pool's actor) confines it. An object
/// that refers to an arena (a `prefix_index`) pins it: do not move it then.
class page_arena {
 public:
  /// An arena of `num_pages` pages (>= 2): page 0 is the sink and 1..N-1
  /// start free in that order. A smaller count asserts and is raised to 2;
  /// use `make` where the count comes from outside.
  explicit page_arena(std::int32_t num_pages);

  /// An arena of `num_pages` pages, or invalid_argument naming the field
  /// when `num_pages < 2` (the sink needs one page and requests at least one).
  [[nodiscard]] static result<page_arena> make(std::int32_t num_pages);

  page_arena(const page_arena&) = delete;
  page_arena& operator=(const page_arena&) = delete;
  /// Moves the books; only while nothing refers to this arena.
  page_arena(page_arena&&) noexcept = default;
  /// Moves the books; only while nothing refers to either arena.
  page_arena& operator=(page_arena&&) noexcept = default;
  ~page_arena() = default;

  /// Takes `n` pages from the front of the free queue, each with one owner,
  /// and appends them to `out` in queue order. All or nothing: false, and
  /// nothing changed, when fewer than `n` are free. `n == 0` succeeds.
  [[nodiscard]] bool try_allocate(std::int32_t n, std::vector<page_id>& out);

  /// Undoes the most recent allocations exactly (a rolled-back admit): every
  /// page must have exactly one owner; they go back to the front of the
  /// queue so the next `try_allocate` yields them again in the same order.
  /// Any bad page makes the whole call a no-op (and asserts in debug).
  void unallocate(std::span<const page_id> pages);

  /// Adds an owner to an owned page (a lease, an index entry). The caller
  /// seals the page first where it becomes shared.
  void retain(page_id page);

  /// Drops an owner; at zero the page is unsealed and joins the back of the
  /// free queue.
  void release(page_id page);

  /// Marks an owned page as never written again, so it may be shared.
  void seal(page_id page);

  /// Whether `page` is sealed; false for free pages and the sink.
  [[nodiscard]] bool sealed(page_id page) const {
    assert(in_range(page));
    return in_range(page) && sealed_[static_cast<std::size_t>(page)] != 0;
  }

  /// The owner count of `page`: 0 when free, 1 for the sink. Inline: the
  /// index's `evictable` reads it for every page.
  [[nodiscard]] std::int32_t owners(page_id page) const {
    assert(in_range(page));
    return in_range(page) ? owners_[static_cast<std::size_t>(page)] : 0;
  }

  /// Total pages, the sink included.
  [[nodiscard]] std::int32_t num_pages() const noexcept { return num_pages_; }

  /// Pages in the free queue.
  [[nodiscard]] std::int32_t num_free() const noexcept { return free_count_; }

  /// The free queue front to back (allocates; for tests and diagnostics).
  [[nodiscard]] std::vector<page_id> free_list() const;

  /// Count of successful `retain` and `release` calls since construction, so
  /// derived figures (the index's `evictable`) know when to recompute.
  [[nodiscard]] std::uint64_t owner_changes() const noexcept { return owner_changes_; }

  /// Checks the books: each free page is queued once with no owners, every
  /// other page has an owner, the sink is owned once and never free, every
  /// shared page (sink aside) is sealed, free + owned == num_pages. Names the
  /// first broken rule. O(num_pages); allocates.
  [[nodiscard]] result<void> check_invariants() const;

 private:
  [[nodiscard]] bool in_range(page_id page) const noexcept {
    return page >= 0 && page < num_pages_;
  }
  [[nodiscard]] bool is_owned_request_page(page_id page) const noexcept;
  void push_front(page_id page) noexcept;
  void push_back(page_id page) noexcept;

  std::int32_t num_pages_ = 0;
  std::vector<std::int32_t> owners_;  // per page; 0 iff free
  std::vector<std::uint8_t> sealed_;  // per page; 0 or 1
  std::vector<page_id> ring_;         // free queue as a ring of num_pages_ slots
  std::int32_t head_ = 0;             // ring_ index of the queue front
  std::int32_t free_count_ = 0;
  std::uint64_t owner_changes_ = 0;
};

}  // namespace mstar::resources
