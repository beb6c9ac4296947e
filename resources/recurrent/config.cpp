#include "resources/recurrent/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <optional>
#include <utility>

#include "core/checked.hpp"

namespace mstar::resources {
namespace {

constexpr std::uint64_t saturated = std::numeric_limits<std::uint64_t>::max();

// A count as unsigned, with the invalid (negative) ones read as zero; `validate`
// rejects those before anyone relies on the arithmetic.
std::uint64_t count(std::int64_t n) {
  return n > 0 ? static_cast<std::uint64_t>(n) : 0;
}

// Elements of `shape` (zero when an axis is not positive); nullopt on overflow.
std::optional<std::uint64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::optional<std::uint64_t> n = 1;
  for (const std::int64_t d : shape) {
    if (d <= 0)
      return 0;
  }
  for (const std::int64_t d : shape) {
    n = checked_mul(*n, count(d));
    if (!n)
      return std::nullopt;
  }
  return n;
}

std::optional<std::uint64_t> checked_nbytes(const recurrent_block_config& block) {
  const auto n = checked_numel(block.shape());
  return n ? checked_mul(*n, size_of(block.dtype())) : std::nullopt;
}

std::optional<std::uint64_t> checked_slot_bytes(const recurrent_state_config& config) {
  std::optional<std::uint64_t> sum = 0;
  for (const auto& [name, block] : config.blocks) {
    const auto bytes = checked_nbytes(block);
    sum = bytes ? checked_add(*sum, *bytes) : std::nullopt;
    if (!sum)
      return std::nullopt;
  }
  return checked_mul(*sum, count(config.num_layers));
}

std::optional<std::uint64_t> checked_total_bytes(const recurrent_state_config& config) {
  const auto slot = checked_slot_bytes(config);
  return slot ? checked_mul(*slot, count(config.arena_slots())) : std::nullopt;
}

// Every shard dim names an axis of a rank-`rank` shape, and none twice.
result<void> check_shard_dims(const recurrent_block_config& block) {
  const auto& dims = block.shard_dims();
  const std::size_t rank = block.shape().size();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= rank) {
      return make_error(errc::out_of_range,
                        fmt::format("shard dim {} is not an axis of a rank-{} block of shape [{}]",
                                    dims[i], rank, fmt::join(block.shape(), ", ")));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (dims[j] == dims[i]) {
        return make_error(
            errc::invalid_argument,
            fmt::format("shard dim {} is listed twice in [{}]", dims[i], fmt::join(dims, ", ")));
      }
    }
  }
  return {};
}

result<void> check_block_shape(const recurrent_block_config& block) {
  const auto& shape = block.shape();
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] <= 0) {
      return make_error(
          errc::invalid_argument,
          fmt::format("axis {} of shape [{}] has size {}; every axis must be positive", axis,
                      fmt::join(shape, ", "), shape[axis]));
    }
  }
  return check_shard_dims(block);
}

}  // namespace

recurrent_block_config::recurrent_block_config(std::vector<std::int64_t> shape,
                                               mstar::dtype element_type,
                                               std::vector<std::size_t> shard_dims)
    : unsharded_shape_(shape),
      shape_(std::move(shape)),
      dtype_(element_type),
      shard_dims_(std::move(shard_dims)) {}

std::uint64_t recurrent_block_config::numel() const noexcept {
  return checked_numel(shape_).value_or(saturated);
}

std::uint64_t recurrent_block_config::nbytes() const noexcept {
  return checked_nbytes(*this).value_or(saturated);
}

result<void> recurrent_block_config::shard(std::int64_t num_shards) {
  if (num_shards < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("num_shards must be at least 1, got {}", num_shards));
  }
  if (auto dims_ok = check_shard_dims(*this); !dims_ok)
    return dims_ok.error();
  std::vector<std::int64_t> sharded = unsharded_shape_;
  for (const std::size_t axis : shard_dims_) {
    if (sharded[axis] % num_shards != 0) {
      return make_error(
          errc::invalid_argument,
          fmt::format("axis {} of size {} (shape [{}]) is not divisible by {} shards", axis,
                      sharded[axis], fmt::join(unsharded_shape_, ", "), num_shards));
    }
    sharded[axis] /= num_shards;
  }
  shape_ = std::move(sharded);
  return {};
}

// The Python reference rebuilds the block with dataclasses.replace, which
// re-captures the *current* shape as unsharded, so a dtype override applied
// after sharding makes the next shard divide twice. We keep the original
// unsharded shape instead, so sharding stays idempotent in any order.
recurrent_block_config recurrent_block_config::with_dtype(mstar::dtype t) const {
  recurrent_block_config copy = *this;
  copy.dtype_ = t;
  return copy;
}

result<recurrent_state_config> recurrent_state_config::make(
    std::int64_t num_layers, std::map<std::string, recurrent_block_config> blocks,
    std::int64_t max_slots, bool disable_sink_slot) {
  recurrent_state_config config{num_layers, std::move(blocks), max_slots, disable_sink_slot};
  if (auto ok = config.validate(); !ok)
    return ok.error();
  return config;
}

result<void> recurrent_state_config::validate() const {
  if (blocks.empty()) {
    return make_error(errc::invalid_argument, "a recurrent state pool must declare a block");
  }
  if (num_layers < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("num_layers must be at least 1, got {}", num_layers));
  }
  if (max_slots < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("max_slots must be at least 1, got {}", max_slots));
  }
  if (!disable_sink_slot && max_slots < 2) {
    return make_error(errc::invalid_argument,
                      fmt::format("max_slots is {} but the sink slot takes one, leaving none for "
                                  "requests; use at least 2 or set disable_sink_slot",
                                  max_slots));
  }
  if (checkpoint_slots < 0 || checkpoint_slots > (std::int64_t{1} << 20)) {
    return make_error(
        errc::invalid_argument,
        fmt::format("checkpoint_slots must be in [0, 2^20], got {}", checkpoint_slots));
  }
  if (checkpoint_slots > 0 &&
      (checkpoint_page_size < 1 || checkpoint_stride < checkpoint_page_size ||
       checkpoint_stride % checkpoint_page_size != 0)) {
    return make_error(errc::invalid_argument,
                      fmt::format("checkpoint_stride {} must be a whole number of pages of {} "
                                  "tokens",
                                  checkpoint_stride, checkpoint_page_size));
  }
  for (const auto& [name, block] : blocks) {
    if (auto ok = check_block_shape(block); !ok) {
      return ok.error().with_context(fmt::format("block '{}'", name));
    }
  }
  if (!checked_total_bytes(*this)) {
    return make_error(errc::out_of_range,
                      fmt::format("the pool's size in bytes ({} layers x {} slots x the blocks' "
                                  "bytes) does not fit in 64 bits",
                                  num_layers, max_slots));
  }
  return {};
}

std::uint64_t recurrent_state_config::slot_bytes() const noexcept {
  return checked_slot_bytes(*this).value_or(saturated);
}

std::uint64_t recurrent_state_config::total_bytes() const noexcept {
  return checked_total_bytes(*this).value_or(saturated);
}

result<void> recurrent_state_config::shard(std::int64_t num_shards) {
  auto sharded = blocks;
  for (auto& [name, block] : sharded) {
    if (auto ok = block.shard(num_shards); !ok) {
      return ok.error().with_context(fmt::format("block '{}'", name));
    }
  }
  blocks = std::move(sharded);
  return {};
}

}  // namespace mstar::resources
