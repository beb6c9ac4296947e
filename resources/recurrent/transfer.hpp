#pragma once

// What one recurrent state pool hands another when a stream moves between
// nodes (ARCHITECTURE.md "Disaggregated prefill and decode"): the exporter's
// slot (`recurrent_export`) and the importer's answer (`recurrent_import`).
// Plain aggregates of std types, so the actors layer can give each an
// `inspect` overload; no bytes travel in them.

#include <cstdint>

namespace mstar::resources {

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

  friend bool operator==(const recurrent_export&, const recurrent_export&) = default;
};

/// What `recurrent_state_pool::import_slot` took: the local slot the
/// transfer agent fills from the exporter's.
struct recurrent_import {
  std::int32_t local_slot = 0;
  std::int32_t remote_slot = 0;

  friend bool operator==(const recurrent_import&, const recurrent_import&) = default;
};

}  // namespace mstar::resources
