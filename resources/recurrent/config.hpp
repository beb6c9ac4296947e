#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"

namespace mstar::resources {

/// One per-slot, per-layer tensor block of a recurrent state pool: a shape the
/// pool treats as opaque bytes, an element type, and the axes divided across
/// tensor-parallel ranks.
///
/// The unsharded shape is kept privately so that `shard` always recomputes
/// from it: the pool and the backend share one config and may both shard it.
class recurrent_block_config {
 public:
  /// A block of `shape` elements of `dtype`, of which the axes in `shard_dims`
  /// are split across ranks. Never fails: `recurrent_state_config::validate`
  /// is where a block's shape and shard dims are checked.
  recurrent_block_config(std::vector<std::int64_t> shape, mstar::dtype element_type,
                         std::vector<std::size_t> shard_dims = {});

  /// The current (possibly sharded) shape.
  [[nodiscard]] const std::vector<std::int64_t>& shape() const noexcept { return shape_; }

  /// The shape as declared, before any `shard`.
  [[nodiscard]] const std::vector<std::int64_t>& unsharded_shape() const noexcept {
    return unsharded_shape_;
  }

  /// The element type.
  [[nodiscard]] mstar::dtype dtype() const noexcept { return dtype_; }

  /// The axes `shard` divides.
  [[nodiscard]] const std::vector<std::size_t>& shard_dims() const noexcept { return shard_dims_; }

  /// Elements in the current shape. Zero when an axis is not positive, and
  /// saturates at UINT64_MAX on overflow; `validate` rejects both, so a
  /// validated config never sees either.
  [[nodiscard]] std::uint64_t numel() const noexcept;

  /// Bytes in the current shape (`numel` × element size), saturating as `numel` does.
  [[nodiscard]] std::uint64_t nbytes() const noexcept;

  /// Divides every shard axis of the unsharded shape by `num_shards`.
  /// Idempotent: sharding by 8 twice leaves the block sharded by 8, not 64.
  /// Requires num_shards >= 1, every shard dim a distinct axis, and exact
  /// divisibility; on error the block is unchanged.
  [[nodiscard]] result<void> shard(std::int64_t num_shards);

  /// A copy with element type `t`, keeping the unsharded shape, the current
  /// shape and the shard dims, so a later `shard` still divides only once.
  [[nodiscard]] recurrent_block_config with_dtype(mstar::dtype t) const;

  /// Equal when every field matches, the unsharded shape included: two equal
  /// blocks stay equal under any later `shard`.
  friend bool operator==(const recurrent_block_config&, const recurrent_block_config&) = default;

 private:
  std::vector<std::int64_t> unsharded_shape_;
  std::vector<std::int64_t> shape_;
  mstar::dtype dtype_;
  std::vector<std::size_t> shard_dims_;
};

/// A pool's blocks by name; what geometries produce and the config holds.
using recurrent_blocks = std::map<std::string, recurrent_block_config>;

/// What a model declares about a pool of recurrent state: how many recurrent
/// layers, which blocks each slot holds per layer, and how many slots.
///
/// State does not grow with sequence length, so capacity is counted in slots;
/// a request holds one slot per label in use.
struct recurrent_state_config {
  /// Recurrent layers only (not every transformer layer); at least 1.
  std::int64_t num_layers = 0;
  /// The per-slot, per-layer blocks by name ("state", "conv", "ssm"); non-empty.
  std::map<std::string, recurrent_block_config> blocks;
  /// Slot count, the sink slot included when there is one.
  std::int64_t max_slots = 256;
  /// Padding rows address the −1 sentinel instead of a real sink slot. The
  /// sink is the default because kernels disagree about what −1 means.
  bool disable_sink_slot = false;
  /// Prefix-reuse checkpoints (pool_checkpoints.cpp): `checkpoint_slots`
  /// more slots after the `max_slots` that steps address, each holding a
  /// request's state at a prefill or decode boundary every
  /// `checkpoint_stride` tokens (a multiple of `checkpoint_page_size`, the
  /// KV pool's page size, whose page keys name them). 0 slots: none.
  std::int64_t checkpoint_slots = 0;
  std::int64_t checkpoint_stride = 0;
  std::int64_t checkpoint_page_size = 0;

  /// A validated config; the error is `validate`'s.
  [[nodiscard]] static result<recurrent_state_config> make(
      std::int64_t num_layers, std::map<std::string, recurrent_block_config> blocks,
      std::int64_t max_slots = 256, bool disable_sink_slot = false);

  /// Checks what a pool needs before it allocates: at least one block and one
  /// layer, max_slots >= 1 (>= 2 with the sink, which would otherwise take
  /// the only slot), positive block shapes, distinct in-range shard dims, and
  /// a total byte count that fits in 64 bits.
  [[nodiscard]] result<void> validate() const;

  /// Bytes one slot occupies across every layer and block; saturates on overflow.
  [[nodiscard]] std::uint64_t slot_bytes() const noexcept;

  /// Bytes the whole pool allocates, the sink slot and the checkpoints
  /// included; saturates on overflow.
  [[nodiscard]] std::uint64_t total_bytes() const noexcept;

  /// Slots the arenas hold: the addressable ones, then the checkpoints.
  [[nodiscard]] std::int64_t arena_slots() const noexcept { return max_slots + checkpoint_slots; }

  /// Slots requests can hold: the sink is not one of them.
  [[nodiscard]] std::int64_t usable_slots() const noexcept {
    return max_slots - (disable_sink_slot ? 0 : 1);
  }

  /// Shards every block by `num_shards`; idempotent, and all blocks or none.
  [[nodiscard]] result<void> shard(std::int64_t num_shards);

  /// Field-wise equality.
  friend bool operator==(const recurrent_state_config&, const recurrent_state_config&) = default;
};

}  // namespace mstar::resources
