#pragma once

// Where a pool set's bytes are, as the transport addresses them: the KV
// arena (page-major) and each recurrent block's arena ([layers][slots]),
// blocks in name order, each with the memory it lives in. The pool actor
// checksums what it publishes with these; the node's transfer actor
// registers them once at start-up (device arenas as device memory, which
// same-host peers open over CUDA IPC) and verifies what lands in them.
//
// The checksum and ordering helpers below read host arenas in place and
// device arenas through the transport's pinned staging, after the work the
// pools queued on them: a pool in device memory zeroes and copies pages on
// its model's stream, which the transport's own streams do not wait for.

#include <caf/expected.hpp>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "engine/pool_set.hpp"
#include "kernels/arena.hpp"
#include "transport/checksum.hpp"
#include "transport/descriptor.hpp"

namespace mstar::actors {

struct pool_regions {
  std::byte* kv_base = nullptr;  ///< null: no KV pool
  transport::arena_layout kv;
  std::string kv_segment;  ///< the shared-memory segment it lives in; empty: none
  transport::memory_kind kv_memory = transport::memory_kind::host;  ///< host or device memory
  /// The arena at `kv_base` (null where the regions were built by hand): what
  /// orders a device copy after the pool's own kernels.
  kernels::arena* kv_arena = nullptr;
  std::vector<std::byte*> block_bases;
  std::vector<transport::arena_layout> blocks;
  std::vector<std::string> block_segments;           ///< by block, as `kv_segment`
  std::vector<transport::memory_kind> block_memory;  ///< by block, as `kv_memory`
  std::vector<kernels::arena*> block_arenas;         ///< by block, as `kv_arena`
};

/// The regions of `pools` (valid for their lifetime).
[[nodiscard]] pool_regions regions_of(engine::pool_set& pools);

/// Both sets' regions in one (the KV part of one, the blocks of the other).
[[nodiscard]] pool_regions merged(pool_regions a, const pool_regions& b);

/// The transport's name for the memory `a` lives in.
[[nodiscard]] transport::memory_kind memory_of(const kernels::arena& a) noexcept;

/// The memory every recurrent block lives in (host when there are none);
/// invalid_argument when the blocks differ, since one plan moves them all.
[[nodiscard]] caf::expected<transport::memory_kind> blocks_memory(const pool_regions& r);

/// Waits for the work queued on the device arenas among `arenas` (host ones
/// and nulls are skipped); the first arena's error, naming it.
///
/// It waits for the event each device arena records after its last launch
/// (kernels/cuda/device_arena.cpp), not on the model's stream, so a worker
/// capturing a decode graph there meanwhile is not disturbed.
[[nodiscard]] caf::expected<void> settle(std::span<kernels::arena* const> arenas);

/// The checksums of KV `pages` (host or device memory).
[[nodiscard]] caf::expected<std::vector<transport::unit_checksum>> checksum_pages(
    const pool_regions& r, std::span<const std::int32_t> pages);

/// The checksums of recurrent `slots` over every block (host or device memory).
[[nodiscard]] caf::expected<std::vector<transport::unit_checksum>> checksum_slots(
    const pool_regions& r, std::span<const std::int32_t> slots);

/// `transport::verify_units` over the destination side of `plan`, whose
/// arenas are at `bases` in `memory` (device bases are device pointers).
[[nodiscard]] caf::expected<void> verify_landed(const transport::transfer_plan& plan,
                                                std::span<std::byte* const> bases,
                                                transport::memory_kind memory,
                                                std::span<const transport::unit_checksum> sums);

/// Flips one byte of the first unit `plan` landed, as a fault in flight
/// would (test hooks): in place in host memory, through the arena's own
/// read and write in device memory (`arenas[i]` for plan arena `i`).
[[nodiscard]] caf::expected<void> corrupt_first_unit(const transport::transfer_plan& plan,
                                                     std::span<std::byte* const> bases,
                                                     std::span<kernels::arena* const> arenas,
                                                     transport::memory_kind memory);

}  // namespace mstar::actors
