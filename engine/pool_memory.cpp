#include "engine/pool_memory.hpp"

#include <fmt/format.h>
#include <optional>
#include <string>

#include "core/checked.hpp"
#include "core/host_memory.hpp"

namespace mstar::engine {
namespace {

error overflow() {
  return make_error(errc::out_of_range, "the pools' byte size overflows 64 bits");
}

// "16777216 KV pages of 16.0 KiB and 64 recurrent slots of 700.0 KiB".
std::string describe(const models::pool_spec& spec, const pool_memory& m) {
  std::string out;
  if (spec.kv) {
    out += fmt::format("{} KV pages of {}", spec.kv->max_num_pages, format_bytes(m.kv_page_bytes));
  }
  if (spec.recurrent) {
    out += fmt::format("{}{} recurrent slots of {}", out.empty() ? "" : " and ",
                       spec.recurrent->max_slots, format_bytes(m.recurrent_slot_bytes));
  }
  return out;
}

}  // namespace

result<pool_memory> pool_memory_of(const models::pool_spec& spec, bool arenas_on_host) {
  pool_memory m;
  std::optional<std::uint64_t> arenas = 0, units = 0;
  if (spec.kv) {
    if (auto ok = spec.kv->validate(); !ok)
      return ok.error().with_context("KV pool");
    m.kv_page_bytes = spec.kv->geometry.page_bytes();
    const auto pages = static_cast<std::uint64_t>(spec.kv->max_num_pages);
    const auto bytes = checked_mul(m.kv_page_bytes, pages);
    arenas = bytes ? checked_add(*arenas, *bytes) : std::nullopt;
    units = checked_add(*units, pages);
  }
  if (spec.recurrent) {
    if (auto ok = spec.recurrent->validate(); !ok)
      return ok.error().with_context("recurrent pool");
    m.recurrent_slot_bytes = spec.recurrent->slot_bytes();
    const auto slots = static_cast<std::uint64_t>(spec.recurrent->max_slots);
    arenas = arenas ? checked_add(*arenas, spec.recurrent->total_bytes()) : std::nullopt;
    units = units ? checked_add(*units, slots) : std::nullopt;
  }
  // A tensor-parallel model's arenas hold a copy per rank (pool_spec::replicas).
  if (arenas && spec.replicas > 1)
    arenas = checked_mul(*arenas, static_cast<std::uint64_t>(spec.replicas));
  const auto bookkeeping = units ? checked_mul(*units, pool_bookkeeping_bytes) : std::nullopt;
  if (!arenas || !bookkeeping)
    return overflow();
  m.arena_bytes = *arenas;
  const auto host = arenas_on_host ? checked_add(*arenas, *bookkeeping) : bookkeeping;
  if (!host)
    return overflow();
  m.host_bytes = *host;
  return m;
}

result<void> check_pool_memory(const models::pool_spec& spec, bool arenas_on_host,
                               std::uint64_t max_memory) {
  auto m = pool_memory_of(spec, arenas_on_host);
  if (!m)
    return m.error();
  const std::uint64_t total = std::max(m->arena_bytes, m->host_bytes);
  if (max_memory > 0 && total > max_memory) {
    return make_error(errc::out_of_range,
                      fmt::format("the pools need {} bytes ({}: {}), more than the {} bytes ({}) "
                                  "--max-memory allows",
                                  total, format_bytes(total), describe(spec, *m), max_memory,
                                  format_bytes(max_memory)));
  }
  const auto bound = host_memory_available();
  if (bound && m->host_bytes > bound->bytes) {
    return make_error(errc::out_of_range,
                      fmt::format("the pools need {} bytes ({}: {}) of host memory, more than "
                                  "the {} bytes ({}) this process can have ({})",
                                  m->host_bytes, format_bytes(m->host_bytes), describe(spec, *m),
                                  bound->bytes, format_bytes(bound->bytes), bound->source));
  }
  return {};
}

}  // namespace mstar::engine
