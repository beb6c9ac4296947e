#pragma once

// Transfer plans: which bytes move for a list of (source, destination) page
// or slot pairs. A plan is plain data computed once per transfer, the same
// way on both sides, and executed by `agent` (RMA or a shared-memory copy).

#include <caf/expected.hpp>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "transport/descriptor.hpp"

namespace mstar::transport {

/// A page or slot on the source side and where it lands.
struct unit_pair {
  std::int32_t src = 0;  ///< page or slot id in the source arena(s)
  std::int32_t dst = 0;  ///< page or slot id in the destination arena(s)
  /// Field-wise equality.
  friend bool operator==(const unit_pair&, const unit_pair&) = default;
};

/// A run of bytes to move between arena `arena` of each side (the index
/// into the plan's arena list: 0 for KV, the block index for recurrent).
struct byte_range {
  std::uint32_t arena = 0;       ///< arena index, the same on both sides
  std::uint64_t src_offset = 0;  ///< from the source arena's base
  std::uint64_t dst_offset = 0;  ///< from the destination arena's base
  std::uint64_t bytes = 0;       ///< length, > 0 and <= the plan's chunk size
  /// Field-wise equality.
  friend bool operator==(const byte_range&, const byte_range&) = default;
};

/// One page or slot of the plan, for integrity checks: its ids and its
/// parts (`parts[first_part, first_part + num_parts)`), in the order a
/// checksum reads them (block, then layer, for a slot).
struct transfer_unit {
  std::int32_t src = 0;          ///< source page or slot id
  std::int32_t dst = 0;          ///< destination page or slot id
  std::uint32_t first_part = 0;  ///< index of the unit's first part
  std::uint32_t num_parts = 0;   ///< parts of the unit (1 for a page)
};

/// Options for building a plan.
struct plan_options {
  /// Ranges larger than this are split (a single 64 MiB put over TCP was
  /// seen to stall while 48 MiB was fine). > 0.
  std::uint64_t chunk_bytes = std::uint64_t{8} << 20;
};

/// The byte ranges a transfer moves and the units they carry.
struct transfer_plan {
  arena_kind kind = arena_kind::kv_pages;  ///< pages or slots
  std::uint32_t num_arenas = 0;            ///< arenas per side the ranges index
  std::vector<byte_range> ranges;          ///< what moves: coalesced, then chunked
  std::vector<transfer_unit> units;        ///< one per pair, in source-id order
  std::vector<byte_range> parts;           ///< units' bytes, uncoalesced and unchunked
  std::uint64_t total_bytes = 0;           ///< sum of `ranges` lengths

  /// "page" or "slot", for messages.
  [[nodiscard]] std::string_view unit_name() const noexcept {
    return kind == arena_kind::kv_pages ? "page" : "slot";
  }
};

/// The plan for KV pages `pairs` between arenas `src` and `dst` (both
/// kv_pages with the same page bytes; the page counts may differ). Pairs are
/// ordered by source page; runs where both ids ascend by one coalesce into
/// one range; ranges above `options.chunk_bytes` are split. Fails
/// (invalid_argument, naming the pair) on an id out of range or a
/// destination listed twice.
[[nodiscard]] caf::expected<transfer_plan> plan_pages(const arena_layout& src,
                                                      const arena_layout& dst,
                                                      std::span<const unit_pair> pairs,
                                                      const plan_options& options = {});

/// The plan for recurrent slots `pairs` between two pools' blocks, given in
/// the same order on both sides (same names, layer counts and slot bytes;
/// the slot counts may differ). One range per (block, layer, slot), split
/// above `options.chunk_bytes`; nothing coalesces since a slot's layers are
/// apart. Fails like `plan_pages`.
[[nodiscard]] caf::expected<transfer_plan> plan_slots(std::span<const arena_layout> src_blocks,
                                                      std::span<const arena_layout> dst_blocks,
                                                      std::span<const unit_pair> pairs,
                                                      const plan_options& options = {});

}  // namespace mstar::transport
