#include "actors/pool_regions.hpp"

#include "transport/error.hpp"

namespace mstar::actors {

using transport::memory_kind;

pool_regions regions_of(engine::pool_set& pools) {
  pool_regions r;
  if (auto* kv = pools.kv()) {
    auto& storage = kv->storage();
    r.kv_base = storage.data();
    r.kv_segment = std::string(storage.shared_name());
    r.kv_memory = memory_of(storage);
    r.kv_arena = &storage;
    r.kv = transport::arena_layout::kv(kv->geometry(),
                                       static_cast<std::uint64_t>(kv->config().max_num_pages));
  }
  if (auto* rec = pools.recurrent()) {
    const auto& cfg = rec->config();
    for (const auto& [name, block] : cfg.blocks) {  // std::map: name order
      auto* storage = rec->storage(name);
      r.block_bases.push_back(storage->data());
      r.block_segments.emplace_back(storage->shared_name());
      r.block_memory.push_back(memory_of(*storage));
      r.block_arenas.push_back(storage);
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
    a.kv_memory = b.kv_memory;
    a.kv_arena = b.kv_arena;
  }
  auto append = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  append(a.block_bases, b.block_bases);
  append(a.blocks, b.blocks);
  append(a.block_segments, b.block_segments);
  append(a.block_memory, b.block_memory);
  append(a.block_arenas, b.block_arenas);
  return a;
}

memory_kind memory_of(const kernels::arena& a) noexcept {
  switch (a.kind()) {
    case kernels::memory_kind::host:
      return memory_kind::host;
    case kernels::memory_kind::device:
      return memory_kind::cuda;
  }
  return memory_kind::host;
}

caf::expected<memory_kind> blocks_memory(const pool_regions& r) {
  if (r.block_memory.empty())
    return memory_kind::host;
  for (std::size_t i = 1; i < r.block_memory.size(); ++i) {
    if (r.block_memory[i] != r.block_memory.front())
      return transport::failure(
          mstar::errc::invalid_argument,
          "recurrent blocks '" + r.blocks.front().name + "' and '" + r.blocks.at(i).name +
              "' live in different memory (host and device): one slot plan moves every block");
  }
  return r.block_memory.front();
}

caf::expected<void> settle(std::span<kernels::arena* const> arenas) {
  for (auto* a : arenas) {
    if (a == nullptr || a->kind() != kernels::memory_kind::device)
      continue;
    if (auto ok = a->synchronize(); !ok)
      return transport::from_core(ok.error().with_context("waiting for a pool's device work"));
  }
  return {};
}

caf::expected<std::vector<transport::unit_checksum>> checksum_pages(
    const pool_regions& r, std::span<const std::int32_t> pages) {
  if (r.kv_memory == memory_kind::host)
    return transport::checksum_pages(r.kv, r.kv_base, pages);
  kernels::arena* const arenas[] = {r.kv_arena};
  if (auto ok = settle(arenas); !ok)
    return ok.error();
  return transport::checksum_pages_device(r.kv, r.kv_base, pages);
}

caf::expected<std::vector<transport::unit_checksum>> checksum_slots(
    const pool_regions& r, std::span<const std::int32_t> slots) {
  auto memory = blocks_memory(r);
  if (!memory)
    return memory.error();
  const std::vector<const std::byte*> bases(r.block_bases.begin(), r.block_bases.end());
  if (*memory == memory_kind::host)
    return transport::checksum_slots(r.blocks, bases, slots);
  if (auto ok = settle(r.block_arenas); !ok)
    return ok.error();
  return transport::checksum_slots_device(r.blocks, bases, slots);
}

caf::expected<void> verify_landed(const transport::transfer_plan& plan,
                                  std::span<std::byte* const> bases, memory_kind memory,
                                  std::span<const transport::unit_checksum> sums) {
  const std::vector<const std::byte*> read(bases.begin(), bases.end());
  if (memory == memory_kind::host)
    return transport::verify_units(plan, read, sums);
  return transport::verify_units_device(plan, read, sums);
}

caf::expected<void> corrupt_first_unit(const transport::transfer_plan& plan,
                                       std::span<std::byte* const> bases,
                                       std::span<kernels::arena* const> arenas,
                                       memory_kind memory) {
  if (plan.ranges.empty())
    return {};
  const auto& r = plan.ranges.front();
  if (memory == memory_kind::host) {
    bases[r.arena][r.dst_offset] ^= std::byte{0x5a};
    return {};
  }
  // Device memory is out of the host's reach: one byte through the arena,
  // read and written on its stream, so the flip lands after the copy that
  // the transfer already waited for.
  auto* a = r.arena < arenas.size() ? arenas[r.arena] : nullptr;
  if (a == nullptr)
    return transport::failure(mstar::errc::invalid_argument,
                              "a device arena to corrupt needs its kernels::arena");
  const auto offset = static_cast<std::size_t>(bases[r.arena] - a->data()) + r.dst_offset;
  std::byte b{};
  if (auto ok = a->read(offset, {&b, 1}); !ok)
    return transport::from_core(ok.error());
  b ^= std::byte{0x5a};
  if (auto ok = a->write(offset, {&b, 1}); !ok)
    return transport::from_core(ok.error());
  return {};
}

}  // namespace mstar::actors
