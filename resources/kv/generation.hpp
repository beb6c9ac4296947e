#pragma once

// Keying the pages a generation fills after its prompt (reference §1.10).
//
// A prompt's keys name its whole pages and, when it ends inside a page, that
// partial page. Sampled ids then fill the partial page and the pages after
// it; each page they complete gets the key `chain()` would give the prompt
// and the generated ids laid out together, so the next turn of a
// conversation finds them. The KV pool and `mstar-tool keys` both key
// generated pages through `extend_page_chain`, so the tool shows exactly
// what the engine indexes.

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/keys.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::resources {

/// One stream's key chain while it grows by sampled ids.
struct page_chain {
  /// Unrooted keys: the first `keyed_pages` name whole pages; one more, when
  /// present, names the prompt's partial page until generated ids fill it.
  std::vector<digest256> keys;
  /// What the first page's key folds in (empty: the unrooted chain a Python
  /// preprocess stage sends; a salted prompt's salt root otherwise).
  std::vector<std::uint8_t> root;
  /// Whole pages keyed: the slots covered so far divided by the page size.
  std::int64_t keyed_pages = 0;
  /// Ids on the page being filled, in slot order.
  std::vector<token_id> unkeyed;
  /// Items on the page being filled (an image that ends inside it). Their
  /// slots leave that page less room for ids, and its key names them.
  std::vector<page_item> unkeyed_items;

  friend bool operator==(const page_chain&, const page_chain&) = default;
};

/// Slots the items on one page take on that page: from each item's start
/// to its end (`length - offset`).
[[nodiscard]] std::uint64_t item_slots_on_page(std::span<const page_item> items);

/// The chain a keyed prompt starts a generation from: `keyed_pages` is
/// `prompt.total_slots / page_size`, the ids and items on a final partial
/// page are what generated ids join. Fails on a page size below 1 or when
/// the keys, the tail and the items do not describe `total_slots` slots
/// (a prompt may omit its partial page's key, which generation supersedes).
[[nodiscard]] result<page_chain> start_page_chain(const prompt_keys& prompt, std::int64_t page_size,
                                                  byte_view root = {});

/// Appends sampled ids and keys every page they complete, overwriting the
/// prompt's partial-page key. Returns how many pages were newly keyed: keys
/// `[keyed_pages - n, keyed_pages)` are new or changed. Fails on a page size
/// below 1 or a page whose items leave it no room for ids.
[[nodiscard]] result<std::int64_t> extend_page_chain(page_chain& chain,
                                                     std::span<const token_id> ids,
                                                     std::int64_t page_size);

}  // namespace mstar::resources
