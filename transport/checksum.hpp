#pragma once

// Integrity of moved pages and slots: xxh3-64 per unit (page or slot),
// computed by the sender over its own arena and sent with the page list,
// checked by the receiver over the bytes that landed. Not cryptographic: it
// catches a torn, misplaced or stale copy, not an adversary.

#include <caf/expected.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/plan.hpp"

namespace mstar::transport {

/// The checksum of one page or slot, keyed by its id on the sending side.
struct unit_checksum {
  std::int32_t unit = 0;   ///< source page or slot id
  std::uint64_t xxh3 = 0;  ///< XXH3-64 of the unit's bytes, parts in plan order
  /// Field-wise equality.
  friend bool operator==(const unit_checksum&, const unit_checksum&) = default;
};

/// Which arenas of a plan a checksum reads.
enum class plan_side : std::uint8_t {
  source,       ///< the sender's arenas (`src_offset`)
  destination,  ///< the receiver's arenas (`dst_offset`)
};

/// The checksum of every unit of `plan`, read on `side` from `bases`
/// (indexed by the plan's arena index), in `plan.units` order.
[[nodiscard]] std::vector<unit_checksum> checksum_units(const transfer_plan& plan, plan_side side,
                                                        std::span<const std::byte* const> bases);

/// What a sender publishes: the checksums of `pages` of the KV arena at
/// `base`. Fails like `plan_pages` on a bad id.
[[nodiscard]] caf::expected<std::vector<unit_checksum>> checksum_pages(
    const arena_layout& layout, const std::byte* base, std::span<const std::int32_t> pages);

/// What a sender publishes: the checksums of `slots` of a recurrent pool
/// whose blocks are `blocks` at `bases`. Fails like `plan_slots`.
[[nodiscard]] caf::expected<std::vector<unit_checksum>> checksum_slots(
    std::span<const arena_layout> blocks, std::span<const std::byte* const> bases,
    std::span<const std::int32_t> slots);

/// Checks the destination side of `plan` at `bases` against `expected`
/// (keyed by source id, any order). The first unit whose bytes differ, or
/// that has no expected checksum, fails with `integrity`, naming the source
/// and destination page (or slot) and both checksums.
[[nodiscard]] caf::expected<void> verify_units(const transfer_plan& plan,
                                               std::span<const std::byte* const> bases,
                                               std::span<const unit_checksum> expected);

/// Checksums of device arenas (`memory_kind::cuda`): the same values as
/// the host functions above, so a host sender and a device receiver (or the
/// reverse) compare. A first version: each part is copied synchronously
/// into a pinned host buffer (cudaMemcpy, device to host) and hashed there,
/// so it costs a PCIe read of every checked byte (about 50 GB/s on an H200's
/// PCIe 5 x16, less in practice) plus xxh3 on one core (10-30 GB/s), and it
/// waits for the device work the legacy stream orders after. Bases are
/// device pointers; the caller makes sure the bytes are final (its own
/// streams synchronised). `unsupported` in builds without CUDA,
/// `cuda_failure` naming the call when a copy fails.
[[nodiscard]] caf::expected<std::vector<unit_checksum>> checksum_units_device(
    const transfer_plan& plan, plan_side side, std::span<const std::byte* const> bases);

/// `checksum_pages` over a device KV arena (see `checksum_units_device`).
[[nodiscard]] caf::expected<std::vector<unit_checksum>> checksum_pages_device(
    const arena_layout& layout, const std::byte* base, std::span<const std::int32_t> pages);

/// `checksum_slots` over device recurrent blocks (see `checksum_units_device`).
[[nodiscard]] caf::expected<std::vector<unit_checksum>> checksum_slots_device(
    std::span<const arena_layout> blocks, std::span<const std::byte* const> bases,
    std::span<const std::int32_t> slots);

/// `verify_units` over device destination arenas (see `checksum_units_device`).
[[nodiscard]] caf::expected<void> verify_units_device(const transfer_plan& plan,
                                                      std::span<const std::byte* const> bases,
                                                      std::span<const unit_checksum> expected);

}  // namespace mstar::transport
