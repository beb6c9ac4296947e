#pragma once

// What one recurrent state pool hands another when a stream moves between
// nodes (ARCHITECTURE.md "Disaggregated prefill and decode"): the exporter's
// slot (`recurrent_export`) and the importer's answer (`recurrent_import`).
// Plain aggregates of std types, so the actors layer can give each an
// `inspect` overload; no bytes travel in them.

#include <cstdint>
#include <vector>

#include "resources/kv/keys.hpp"

namespace mstar::resources {

/// A prefix-reuse checkpoint the exporter holds for the stream: the state
/// right after an item (an image) that ends inside a page, under that end's
/// key (reference §1.7), so the importer resumes a later prompt with the
/// same slots up to the end there too.
struct recurrent_checkpoint {
  /// The end key (the KV pool's unrooted, salted form, as checkpoints are
  /// keyed).
  digest256 key{};
  /// The exporter's checkpoint slot, held by the export.
  std::int32_t slot = 0;

  friend bool operator==(const recurrent_checkpoint&, const recurrent_checkpoint&) = default;
};

/// A checkpoint the importer took a slot for: its slot and the exporter's.
struct recurrent_checkpoint_pair {
  std::int32_t local = 0;
  std::int32_t remote = 0;

  friend bool operator==(const recurrent_checkpoint_pair&,
                         const recurrent_checkpoint_pair&) = default;
};

/// Everything another recurrent pool needs to adopt one stream's slot
/// (`recurrent_state_pool::export_slot`).
struct recurrent_export {
  /// The exporter's slot.
  std::int32_t slot = 0;
  /// Whether the slot holds state a step resumes from (false: zeros).
  bool has_state = false;
  /// Forks copied into the slot since it was reserved.
  std::uint64_t generation = 0;
  /// Bytes of one slot over every layer and block: an importer refuses
  /// another layout.
  std::int64_t slot_bytes = 0;
  /// The "main" stream's item-end checkpoints the exporter holds.
  std::vector<recurrent_checkpoint> checkpoints;

  friend bool operator==(const recurrent_export&, const recurrent_export&) = default;
};

/// What `recurrent_state_pool::import_slot` took: the local slot the
/// transfer agent fills from the exporter's.
struct recurrent_import {
  std::int32_t local_slot = 0;
  std::int32_t remote_slot = 0;
  /// Checkpoint slots for the export's checkpoints the importer lacks (the
  /// transfer agent fills them like the slot), indexed when the import
  /// finishes.
  std::vector<recurrent_checkpoint_pair> checkpoints;

  friend bool operator==(const recurrent_import&, const recurrent_import&) = default;
};

}  // namespace mstar::resources
