#pragma once

// What one KV pool hands another when a stream moves between nodes
// (ARCHITECTURE.md "Disaggregated prefill and decode"): the exporter's
// description of a stream (`kv_export`) and the importer's answer (`kv_import`:
// which of its pages need the exporter's bytes). Plain aggregates of std types
// and digests, so the actors layer can give each an `inspect` overload; no
// bytes travel in them.

#include <cstdint>
#include <optional>
#include <vector>

#include "resources/kv/keys.hpp"
#include "resources/kv/page_arena.hpp"

namespace mstar::resources {

/// A stream's page-key chain in the form another pool continues it from:
/// unrooted keys (each pool roots them itself), so generated ids extended on
/// the importer key the following pages exactly as on the exporter.
struct kv_key_chain {
  /// Unrooted keys, one per keyed page; the last may name a partial page.
  std::vector<digest256> keys;
  /// How many leading `keys` name whole pages.
  std::int64_t keyed_pages = 0;
  /// Ids past the last whole-page key, not yet folded into one.
  std::vector<token_id> unkeyed;

  friend bool operator==(const kv_key_chain&, const kv_key_chain&) = default;
};

/// The head of a page an item (an image) ends inside, which the exporter
/// caches under the item's end key (reference §1.7): a later prompt with
/// the same slots up to `slot` reuses it, whatever follows.
struct kv_end_page {
  /// The item's end, in slots from the stream's start; never on a page
  /// boundary. The head is chained under `page_keys[slot / page_size - 1]`
  /// (no parent on the first page).
  std::int64_t slot = 0;
  /// The rooted end key.
  digest256 key{};
  /// The exporter's cached copy of the head, held by the export like
  /// `pages`.
  page_id page = 0;

  friend bool operator==(const kv_end_page&, const kv_end_page&) = default;
};

/// Everything another KV pool needs to adopt one stream (`kv_pool::export_stream`).
struct kv_export {
  /// Tokens the stream stores.
  std::int64_t stored_len = 0;
  /// The stream's reset generation, carried over to the importer.
  std::uint64_t reset_generation = 0;
  /// Tokens per page and bytes per page: an importer refuses other geometries.
  std::int64_t page_size = 0;
  std::int64_t page_bytes = 0;
  /// The exporter's page ids in logical order, ceil(stored_len / page_size)
  /// of them; never the sink.
  std::vector<page_id> pages;
  /// The exporter's root: rooted keys mean the same page on an importer only
  /// under an equal root.
  digest256 root{};
  /// Rooted keys of the first `page_keys.size()` pages (whole pages with a
  /// key; none when the exporter's prefix cache is closed or the request
  /// opted out).
  std::vector<digest256> page_keys;
  /// The key chain to continue; absent whenever `page_keys` is empty for
  /// lack of a chain.
  std::optional<kv_key_chain> chain;
  /// End-key copies of the stream's item ends inside its pages that the
  /// exporter caches, each chained under a key of `page_keys`, so the
  /// importer's index holds what the exporter's does for these pages.
  std::vector<kv_end_page> ends;

  friend bool operator==(const kv_export&, const kv_export&) = default;
};

/// One page to fetch: the importer's page and the exporter's page its bytes
/// come from.
struct page_pair {
  page_id local = 0;
  page_id remote = 0;

  friend bool operator==(const page_pair&, const page_pair&) = default;
};

/// What `kv_pool::import_stream` took: the stream's local pages and which of
/// them the transfer agent must fill.
struct kv_import {
  /// The stream's local pages in logical order (adopted and fresh).
  std::vector<page_id> pages;
  /// Fresh pages with the exporter's page to copy from, in logical order.
  std::vector<page_pair> fetch;
  /// Pages the importer already held under the same rooted keys (no copy).
  std::int64_t adopted = 0;
  /// Fresh pages for the export's end-key copies (`kv_export::ends`) the
  /// importer does not cache yet, with the exporter's copy: fetched like
  /// `fetch`, indexed under their end keys when the import finishes. Taken
  /// from free pages only (the cache never evicts to grow itself), so some
  /// or all may be missing.
  std::vector<page_pair> end_fetch;

  friend bool operator==(const kv_import&, const kv_import&) = default;
};

}  // namespace mstar::resources
