#pragma once

// A prompt's layout in, its page keys out: what a preprocess stage computes
// for each keyed stream (reference §1.8) and what `mstar-tool keys` shows.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/keys.hpp"

namespace mstar::resources {

/// A run of token ids, one slot each.
struct id_span {
  std::vector<token_id> ids;
};

/// One non-token input occupying `length` slots, named by its digest.
struct item_span {
  std::uint64_t length = 0;
  std::vector<std::uint8_t> digest;
};

/// One span of a prompt, in slot order.
using prompt_span = std::variant<id_span, item_span>;

/// An item (an image) that ends strictly inside a page: `slot` is its end
/// (the first slot after it) and `key` the end key (reference §1.7) of that
/// page's slots before it, unrooted like the page keys. A later prompt with
/// the same slots before `slot` and anything after finds that page's head
/// under `key`.
struct item_end {
  std::uint64_t slot = 0;
  digest256 key{};

  friend bool operator==(const item_end&, const item_end&) = default;
};

/// Everything a keyed stream sends along with its prompt.
struct prompt_keys {
  std::vector<digest256> keys;  ///< one per page, the last may name a partial page
  std::vector<token_id> tail;   ///< ids on the final partial page; empty when page-aligned
  items_by_page items;          ///< each page's items
  std::uint64_t total_slots = 0;
  std::vector<item_end> ends;  ///< items ending strictly inside a page, in slot order
};

/// One row of the `prefix_layout` a Python preprocess stage sends with its
/// keys (reference §1.8), `[length, advance, walk, digest, end_key]` on the
/// wire: a span's slots, how far it moves the position counter, the walk
/// that writes it, the item digest (ids: none) and, for an item ending
/// strictly inside a page, the key of that page's first slots up to its end.
struct prefix_span {
  std::uint64_t length = 0;
  std::uint64_t advance = 0;
  std::string walk;
  std::optional<std::vector<std::uint8_t>> digest;
  std::optional<digest256> end_key;

  friend bool operator==(const prefix_span&, const prefix_span&) = default;
};

/// Pages a prompt with `page_size` slots per page and keys every page from
/// `root` (empty: the unrooted keys a preprocess stage sends), and the end
/// key of every item ending strictly inside a page. Fails on a page size
/// below 1 or an item span of length 0 (which would key nothing).
[[nodiscard]] result<prompt_keys> key_prompt(std::span<const prompt_span> spans,
                                             std::int64_t page_size, byte_view root = {});

/// The `prefix_layout` rows of a prompt keyed by `key_prompt(spans,
/// page_size, root)`, all written by `walk`. `advances[i]`, when given,
/// is span i's advance (an image whose positions advance by fewer than its
/// slots); otherwise a span advances by its length. An end key folds the
/// previous page's key, or `root` on the first page, as the prompt's keys do.
[[nodiscard]] result<std::vector<prefix_span>> prefix_layout_rows(
    std::span<const prompt_span> spans, std::span<const std::uint64_t> advances,
    const prompt_keys& keyed, std::int64_t page_size, std::string_view walk, byte_view root = {});

/// The item ends `prefix_layout` rows carry: each item row whose end lies
/// strictly inside a page and that has an `end_key`, at `page_size`.
[[nodiscard]] std::vector<item_end> item_ends_of_rows(std::span<const prefix_span> rows,
                                                      std::int64_t page_size);

/// The layout of `prefix_layout` rows as `page_items` reads it, checking
/// what a Python preprocess stage guarantees: an item row covers at least
/// one slot, an ids row advances by its length.
[[nodiscard]] result<std::vector<layout_span>> layout_of_rows(std::span<const prefix_span> rows);

}  // namespace mstar::resources
