#pragma once

// A prompt's layout in, its page keys out: what a preprocess stage computes
// for each keyed stream (reference §1.8) and what `mstar-tool keys` shows.

#include <cstdint>
#include <span>
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

/// Everything a keyed stream sends along with its prompt.
struct prompt_keys {
  std::vector<digest256> keys;  ///< one per page, the last may name a partial page
  std::vector<token_id> tail;   ///< ids on the final partial page; empty when page-aligned
  items_by_page items;          ///< each page's items
  std::uint64_t total_slots = 0;
};

/// Pages a prompt with `page_size` slots per page and keys every page from
/// `root` (empty: the unrooted keys a preprocess stage sends). Fails on a
/// page size below 1 or an item span of length 0 (which would key nothing).
[[nodiscard]] result<prompt_keys> key_prompt(std::span<const prompt_span> spans,
                                             std::int64_t page_size, byte_view root = {});

}  // namespace mstar::resources
