#include "transport/checksum.hpp"

#include <fmt/format.h>
#include <memory>
#include <unordered_map>
#include <xxhash.h>

#include "transport/internal/cuda_ipc.hpp"

namespace mstar::transport {

namespace {

struct state_deleter {
  void operator()(XXH3_state_t* state) const noexcept { XXH3_freeState(state); }
};

// The address of a part's bytes on `side` (in whichever memory the bases are).
const std::byte* where(const byte_range& part, plan_side side,
                       std::span<const std::byte* const> bases) {
  return bases[part.arena] + (side == plan_side::source ? part.src_offset : part.dst_offset);
}

// The hash of one unit, its parts read through `fetch` (host bytes of a
// part, or an error): the host functions read in place, the device ones
// through a pinned staging buffer. Parts are hashed one at a time, so a
// staging buffer only needs room for the largest.
template <class Fetch>
caf::expected<std::uint64_t> unit_hash(const transfer_plan& plan, const transfer_unit& unit,
                                       XXH3_state_t& state, Fetch&& fetch) {
  if (unit.num_parts == 1) {
    const auto& part = plan.parts[unit.first_part];
    auto bytes = fetch(part);
    if (!bytes)
      return bytes.error();
    return XXH3_64bits(*bytes, part.bytes);
  }
  XXH3_64bits_reset(&state);
  for (std::uint32_t i = 0; i < unit.num_parts; ++i) {
    const auto& part = plan.parts[unit.first_part + i];
    auto bytes = fetch(part);
    if (!bytes)
      return bytes.error();
    XXH3_64bits_update(&state, *bytes, part.bytes);
  }
  return XXH3_64bits_digest(&state);
}

template <class Fetch>
caf::expected<std::vector<unit_checksum>> checksum_with(const transfer_plan& plan, Fetch&& fetch) {
  const std::unique_ptr<XXH3_state_t, state_deleter> state{XXH3_createState()};
  std::vector<unit_checksum> sums;
  sums.reserve(plan.units.size());
  for (const auto& unit : plan.units) {
    auto h = unit_hash(plan, unit, *state, fetch);
    if (!h)
      return h.error();
    sums.push_back({unit.src, *h});
  }
  return sums;
}

template <class Fetch>
caf::expected<void> verify_with(const transfer_plan& plan, std::span<const unit_checksum> expected,
                                Fetch&& fetch) {
  std::unordered_map<std::int32_t, std::uint64_t> by_unit;
  by_unit.reserve(expected.size());
  for (const auto& sum : expected)
    by_unit.emplace(sum.unit, sum.xxh3);
  const std::unique_ptr<XXH3_state_t, state_deleter> state{XXH3_createState()};
  const auto name = plan.unit_name();
  for (const auto& unit : plan.units) {
    const auto it = by_unit.find(unit.src);
    if (it == by_unit.end()) {
      return logged(failure(errc::integrity, fmt::format("{} {} (source {} {}): no checksum sent",
                                                         name, unit.dst, name, unit.src)));
    }
    const auto got = unit_hash(plan, unit, *state, fetch);
    if (!got)
      return got.error();
    if (*got != it->second) {
      return logged(failure(errc::integrity,
                            fmt::format("{} {} (source {} {}): xxh3 {:016x}, sender sent {:016x}",
                                        name, unit.dst, name, unit.src, *got, it->second)));
    }
  }
  return {};
}

// Reads host bytes in place.
auto host_reader(plan_side side, std::span<const std::byte* const> bases) {
  return [side, bases](const byte_range& part) -> caf::expected<const std::byte*> {
    return where(part, side, bases);
  };
}

// Copies device bytes into `staging` first.
auto device_reader(plan_side side, std::span<const std::byte* const> bases,
                   internal::pinned_staging& staging) {
  return [side, bases, &staging](const byte_range& part) {
    return staging.fetch(where(part, side, bases), part.bytes);
  };
}

std::vector<unit_pair> identity(std::span<const std::int32_t> ids) {
  std::vector<unit_pair> pairs;
  pairs.reserve(ids.size());
  for (const auto id : ids)
    pairs.push_back({id, id});
  return pairs;
}

}  // namespace

std::vector<unit_checksum> checksum_units(const transfer_plan& plan, plan_side side,
                                          std::span<const std::byte* const> bases) {
  // Reading host memory in place cannot fail.
  return std::move(*checksum_with(plan, host_reader(side, bases)));
}

caf::expected<std::vector<unit_checksum>> checksum_pages(const arena_layout& layout,
                                                         const std::byte* base,
                                                         std::span<const std::int32_t> pages) {
  const auto pairs = identity(pages);
  auto plan = plan_pages(layout, layout, pairs);
  if (!plan)
    return plan.error();
  const std::byte* bases[] = {base};
  return checksum_units(*plan, plan_side::source, bases);
}

caf::expected<std::vector<unit_checksum>> checksum_slots(std::span<const arena_layout> blocks,
                                                         std::span<const std::byte* const> bases,
                                                         std::span<const std::int32_t> slots) {
  if (bases.size() != blocks.size())
    return failure(mstar::errc::invalid_argument, "checksum_slots: one base per block");
  const auto pairs = identity(slots);
  auto plan = plan_slots(blocks, blocks, pairs);
  if (!plan)
    return plan.error();
  return checksum_units(*plan, plan_side::source, bases);
}

caf::expected<void> verify_units(const transfer_plan& plan, std::span<const std::byte* const> bases,
                                 std::span<const unit_checksum> expected) {
  return verify_with(plan, expected, host_reader(plan_side::destination, bases));
}

caf::expected<std::vector<unit_checksum>> checksum_units_device(
    const transfer_plan& plan, plan_side side, std::span<const std::byte* const> bases) {
  internal::pinned_staging staging;
  return checksum_with(plan, device_reader(side, bases, staging));
}

caf::expected<std::vector<unit_checksum>> checksum_pages_device(
    const arena_layout& layout, const std::byte* base, std::span<const std::int32_t> pages) {
  const auto pairs = identity(pages);
  auto plan = plan_pages(layout, layout, pairs);
  if (!plan)
    return plan.error();
  const std::byte* bases[] = {base};
  return checksum_units_device(*plan, plan_side::source, bases);
}

caf::expected<std::vector<unit_checksum>> checksum_slots_device(
    std::span<const arena_layout> blocks, std::span<const std::byte* const> bases,
    std::span<const std::int32_t> slots) {
  if (bases.size() != blocks.size())
    return failure(mstar::errc::invalid_argument, "checksum_slots_device: one base per block");
  const auto pairs = identity(slots);
  auto plan = plan_slots(blocks, blocks, pairs);
  if (!plan)
    return plan.error();
  return checksum_units_device(*plan, plan_side::source, bases);
}

caf::expected<void> verify_units_device(const transfer_plan& plan,
                                        std::span<const std::byte* const> bases,
                                        std::span<const unit_checksum> expected) {
  internal::pinned_staging staging;
  return verify_with(plan, expected, device_reader(plan_side::destination, bases, staging));
}

}  // namespace mstar::transport
