#include "transport/checksum.hpp"

#include <fmt/format.h>
#include <memory>
#include <unordered_map>
#include <xxhash.h>

namespace mstar::transport {

namespace {

struct state_deleter {
  void operator()(XXH3_state_t* state) const noexcept { XXH3_freeState(state); }
};

std::uint64_t unit_hash(const transfer_plan& plan, const transfer_unit& unit, plan_side side,
                        std::span<const std::byte* const> bases, XXH3_state_t& state) {
  const auto where = [&](const byte_range& part) {
    return bases[part.arena] + (side == plan_side::source ? part.src_offset : part.dst_offset);
  };
  if (unit.num_parts == 1) {
    const auto& part = plan.parts[unit.first_part];
    return XXH3_64bits(where(part), part.bytes);
  }
  XXH3_64bits_reset(&state);
  for (std::uint32_t i = 0; i < unit.num_parts; ++i) {
    const auto& part = plan.parts[unit.first_part + i];
    XXH3_64bits_update(&state, where(part), part.bytes);
  }
  return XXH3_64bits_digest(&state);
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
  const std::unique_ptr<XXH3_state_t, state_deleter> state{XXH3_createState()};
  std::vector<unit_checksum> sums;
  sums.reserve(plan.units.size());
  for (const auto& unit : plan.units)
    sums.push_back({unit.src, unit_hash(plan, unit, side, bases, *state)});
  return sums;
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
    const auto got = unit_hash(plan, unit, plan_side::destination, bases, *state);
    if (got != it->second) {
      return logged(failure(errc::integrity,
                            fmt::format("{} {} (source {} {}): xxh3 {:016x}, sender sent {:016x}",
                                        name, unit.dst, name, unit.src, got, it->second)));
    }
  }
  return {};
}

}  // namespace mstar::transport
