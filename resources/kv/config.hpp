#pragma once

// What a paged KV pool is made of (reference §3.4): page geometry, capacity
// and the prefix-cache switches. Validated once; the pool trusts it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "kernels/kv_geometry.hpp"
#include "resources/kv/retention_policy.hpp"
#include "resources/step/step.hpp"

namespace mstar::resources {

/// Configuration of one paged KV pool: its page geometry (page-major storage
/// `[num_pages][num_layers][2 (K,V)][page_size][num_kv_heads][head_dim]`, so
/// one page of a request is one contiguous run of bytes), capacity and the
/// prefix-cache switches.
struct kv_pool_config {
  /// Token slots per page, attention layers this pool serves, KV heads per
  /// layer (after sharding), elements per head and their type.
  kernels::kv_geometry geometry{.page_size = 128,
                                .num_layers = 1,
                                .num_kv_heads = 1,
                                .head_dim = 64,
                                .dtype = mstar::dtype::bfloat16};
  std::int64_t max_num_pages = 2048;  ///< pages in the pool, the sink (page 0) included
  bool prefix_cache = true;           ///< keep an index of whole pages for reuse
  std::string
      prefix_cache_salt;  ///< folded into the root: tenants with different salts never share

  /// invalid_argument naming the first field out of its domain (every size
  /// >= 1, at least 2 pages so one is left beside the sink) or a byte size
  /// that overflows.
  [[nodiscard]] result<void> validate() const;

  /// Bytes of the whole arena: `max_num_pages` pages of `geometry`.
  [[nodiscard]] std::uint64_t total_bytes() const;
};

/// One step's work against a KV pool.
struct kv_step : resource_step {
  /// false: the step's tokens are attended but not kept (denoising reads).
  bool commit = true;
  std::vector<fork> pre_forks;
  std::vector<fork> post_forks;
  /// Which rows the forks apply to; nullopt means every row.
  std::optional<std::vector<request_id>> fork_rids;
  /// Retention each (request, label) declares with this commit.
  std::map<std::pair<request_id, std::string>, retention_policy> retention;
};

}  // namespace mstar::resources
