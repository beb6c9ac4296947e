#pragma once

// Where a pool set's bytes are, as the transport addresses them: the KV
// arena (page-major) and each recurrent block's arena ([layers][slots]),
// blocks in name order. The pool actor checksums what it publishes with
// these; the node's transfer actor registers them once at start-up.

#include <cstddef>
#include <vector>

#include "engine/pool_set.hpp"
#include "transport/descriptor.hpp"

namespace mstar::actors {

struct pool_regions {
  std::byte* kv_base = nullptr;  ///< null: no KV pool
  transport::arena_layout kv;
  std::string kv_segment;  ///< the shared-memory segment it lives in; empty: none
  std::vector<std::byte*> block_bases;
  std::vector<transport::arena_layout> blocks;
  std::vector<std::string> block_segments;  ///< by block, as `kv_segment`
};

/// The regions of `pools` (valid for their lifetime).
[[nodiscard]] pool_regions regions_of(engine::pool_set& pools);

/// Both sets' regions in one (the KV part of one, the blocks of the other).
[[nodiscard]] pool_regions merged(pool_regions a, const pool_regions& b);

}  // namespace mstar::actors
