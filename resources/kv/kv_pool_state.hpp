#pragma once

// kv_pool's private per-request state, shared by its .cpp files only.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "resources/kv/kv_pool.hpp"

namespace mstar::resources {

/// A stream's page keys: the unrooted chain as the preprocess stage computed
/// it and generation extends it (generation.hpp), the rooted form of every
/// key, and how many pages are already indexed (or came from the cache).
struct kv_pool::chain_state {
  page_chain page;
  std::vector<digest256> rooted;
  std::int64_t cursor = 0;
  /// The prompt's item ends (the seed's `ends`), their end keys rooted;
  /// `indexed`: this stream has offered a copy of that page's head to the
  /// index (or found one there), so it does not try again.
  struct end_state {
    std::uint64_t slot = 0;
    digest256 rooted{};
    bool indexed = false;
  };
  std::vector<end_state> ends;
  std::uint64_t prompt_slots = 0;  ///< an end at or past it leaves nothing to run
};

/// The head of the page an item ends in, found under its end key: the
/// cached page (retained) and a fresh page of the stream's own that takes
/// a copy of its first `tokens % page_size` slots when the lease converts.
struct kv_end_lease {
  page_id cached = 0;
  page_id fresh = 0;
  std::int64_t tokens = 0;  ///< the item's end: what the lease serves
};

/// An end-key copy an import took (kv_export::ends): a fresh page the
/// transfer agent fills, indexed under `key` (chained under `parent`) when
/// the import finishes.
struct kv_import_end {
  digest256 key{};
  std::optional<digest256> parent;
  page_id page = 0;
};

struct kv_pool::stream_state {
  std::vector<page_id> pages;  ///< logical order; may exceed ceil(stored/ps) after a refusal
  std::int64_t stored_len = 0;
  std::int64_t released = 0;
  std::int64_t protected_prefix = 0;
  std::optional<retention_policy> retention;
  std::uint64_t generation = 0;
  std::uint64_t reset_generation = 0;
  bool step_in_flight = false;
  std::optional<chain_state> chain;
  std::vector<page_id> lease;             ///< cached pages held for this stream before admit
  std::optional<kv_end_lease> end_lease;  ///< the page after `lease`, up to an item's end
  bool converted = false;
  /// Under an export hold: its pages are published, admit refuses it.
  bool exported = false;
  /// Imported, bytes not yet landed: admit refuses it. `adopted` lists the
  /// pages import retained rather than took fresh (kv_pool::imports_ holds
  /// the fresh ones).
  bool importing = false;
  std::vector<page_id> adopted;
  /// Imported, not finished: the rooted keys of its whole pages and the
  /// end-key copies it took, indexed by `finish_import`.
  std::vector<digest256> import_keys;
  std::vector<kv_import_end> import_ends;
  // Scratch for admit: which step last saw this stream, and where its need
  // sits in that step's list (no per-step map allocation).
  std::uint64_t seen_epoch = 0;
  std::uint64_t need_epoch = 0;
  std::size_t need_index = 0;
};

struct kv_pool::request_state {
  std::map<std::string, stream_state> streams;
  std::map<std::string, kv_prefix_seed> seeds;
  bool prefix_cache = true;
};

/// A step admitted (and maybe planned) ahead of its turn.
struct kv_pool::staged_preplan {
  std::vector<segment> segments;
  std::set<request_id> padding_rows;
  std::vector<alloc_record> record;                        ///< what the staged admit took
  std::vector<std::pair<request_id, std::string>> marked;  ///< streams it marked in flight
  std::shared_ptr<kv_plan> plan;                           ///< set by the pre-plan pass
  bool admitted = false;  ///< the live admit of the same step took it over
};

}  // namespace mstar::resources
