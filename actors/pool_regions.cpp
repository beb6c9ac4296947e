#include "actors/pool_regions.hpp"

namespace mstar::actors {

pool_regions regions_of(engine::pool_set& pools) {
  pool_regions r;
  if (auto* kv = pools.kv()) {
    r.kv_base = kv->storage().data();
    r.kv_segment = std::string(kv->storage().shared_name());
    r.kv = transport::arena_layout::kv(kv->geometry(),
                                       static_cast<std::uint64_t>(kv->config().max_num_pages));
  }
  if (auto* rec = pools.recurrent()) {
    const auto& cfg = rec->config();
    for (const auto& [name, block] : cfg.blocks) {  // std::map: name order
      r.block_bases.push_back(rec->storage(name)->data());
      r.block_segments.emplace_back(rec->storage(name)->shared_name());
      r.blocks.push_back(transport::arena_layout::recurrent(
          name, static_cast<std::uint64_t>(cfg.num_layers),
          static_cast<std::uint64_t>(cfg.arena_slots()), block.nbytes()));
    }
  }
  return r;
}

pool_regions merged(pool_regions a, const pool_regions& b) {
  if (a.kv_base == nullptr) {
    a.kv_base = b.kv_base;
    a.kv = b.kv;
    a.kv_segment = b.kv_segment;
  }
  a.block_bases.insert(a.block_bases.end(), b.block_bases.begin(), b.block_bases.end());
  a.blocks.insert(a.blocks.end(), b.blocks.begin(), b.blocks.end());
  a.block_segments.insert(a.block_segments.end(), b.block_segments.begin(), b.block_segments.end());
  return a;
}

}  // namespace mstar::actors
