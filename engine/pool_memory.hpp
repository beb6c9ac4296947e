#pragma once

// Pool sizes come from flags and deployment files: before the pools are made,
// their bytes are computed with checked arithmetic and compared with the
// memory the process may take, so a size too large is a message naming the
// number, not an allocation that aborts.

#include <cstdint>

#include "core/result.hpp"
#include "models/causal_lm.hpp"

namespace mstar::engine {

/// Host bytes each KV page or recurrent slot costs besides its arena bytes
/// (free lists, owner counts, index entries): a generous upper estimate.
inline constexpr std::uint64_t pool_bookkeeping_bytes = 256;

/// What the pools of a spec take.
struct pool_memory {
  std::uint64_t arena_bytes = 0;           ///< the arenas, wherever they live
  std::uint64_t host_bytes = 0;            ///< what lands in host memory
  std::uint64_t kv_page_bytes = 0;         ///< one KV page
  std::uint64_t recurrent_slot_bytes = 0;  ///< one recurrent slot (all layers)
};

/// The bytes of `spec`'s pools (`spec.replicas` copies of each arena);
/// `arenas_on_host` when the arenas are host memory (no device arena
/// factory). Fails when a size overflows 64 bits.
[[nodiscard]] result<pool_memory> pool_memory_of(const models::pool_spec& spec,
                                                 bool arenas_on_host);

/// Refuses pools that need more than `max_memory` bytes (when not 0) or more
/// host memory than the process can still have (core/host_memory.hpp). The
/// message gives the sizes asked for, the bytes they need and the limit.
[[nodiscard]] result<void> check_pool_memory(const models::pool_spec& spec, bool arenas_on_host,
                                             std::uint64_t max_memory);

}  // namespace mstar::engine
