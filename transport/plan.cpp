#include "transport/plan.hpp"

#include <algorithm>
#include <string>
#include <unordered_set>

namespace mstar::transport {

namespace {

caf::error bad(std::string message) {
  return failure(mstar::errc::invalid_argument, "transfer plan: " + std::move(message));
}

std::string pair_text(std::string_view unit, std::size_t index, const unit_pair& p) {
  return std::string{unit} + " pair " + std::to_string(index) + " (" + std::to_string(p.src) +
         " -> " + std::to_string(p.dst) + ")";
}

// Sorted by source id, after checking ids and duplicate destinations.
caf::expected<std::vector<unit_pair>> checked_pairs(std::span<const unit_pair> pairs,
                                                    std::string_view unit, std::uint64_t src_units,
                                                    std::uint64_t dst_units) {
  std::unordered_set<std::int32_t> destinations;
  destinations.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (p.src < 0 || static_cast<std::uint64_t>(p.src) >= src_units)
      return bad(pair_text(unit, i, p) + ": source outside [0, " + std::to_string(src_units) + ")");
    if (p.dst < 0 || static_cast<std::uint64_t>(p.dst) >= dst_units)
      return bad(pair_text(unit, i, p) + ": destination outside [0, " + std::to_string(dst_units) +
                 ")");
    if (!destinations.insert(p.dst).second)
      return bad(pair_text(unit, i, p) + ": destination listed twice");
  }
  std::vector<unit_pair> sorted(pairs.begin(), pairs.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const unit_pair& a, const unit_pair& b) { return a.src < b.src; });
  return sorted;
}

// Appends `r` to `out`, split into pieces of at most `chunk` bytes.
void append_chunked(std::vector<byte_range>& out, byte_range r, std::uint64_t chunk) {
  while (r.bytes > chunk) {
    out.push_back({r.arena, r.src_offset, r.dst_offset, chunk});
    r.src_offset += chunk;
    r.dst_offset += chunk;
    r.bytes -= chunk;
  }
  out.push_back(r);
}

caf::expected<void> check_chunk(const plan_options& options) {
  if (options.chunk_bytes == 0)
    return bad("chunk_bytes must be > 0");
  return {};
}

}  // namespace

caf::expected<transfer_plan> plan_pages(const arena_layout& src, const arena_layout& dst,
                                        std::span<const unit_pair> pairs,
                                        const plan_options& options) {
  if (auto ok = check_chunk(options); !ok)
    return ok.error();
  for (const auto* layout : {&src, &dst}) {
    if (auto ok = layout->validate(); !ok)
      return ok.error();
    if (layout->kind != arena_kind::kv_pages)
      return bad("arena '" + layout->name + "' is not a KV page arena");
  }
  if (src.unit_bytes != dst.unit_bytes)
    return bad("page bytes differ: source " + std::to_string(src.unit_bytes) + ", destination " +
               std::to_string(dst.unit_bytes));
  auto sorted = checked_pairs(pairs, "page", src.num_units, dst.num_units);
  if (!sorted)
    return sorted.error();
  transfer_plan plan;
  plan.kind = arena_kind::kv_pages;
  plan.num_arenas = 1;
  const std::uint64_t page = src.unit_bytes;
  for (std::size_t i = 0; i < sorted->size();) {
    std::size_t j = i + 1;
    while (j < sorted->size() && (*sorted)[j].src == (*sorted)[j - 1].src + 1 &&
           (*sorted)[j].dst == (*sorted)[j - 1].dst + 1) {
      ++j;
    }
    const auto& first = (*sorted)[i];
    const byte_range run{0, static_cast<std::uint64_t>(first.src) * page,
                         static_cast<std::uint64_t>(first.dst) * page, (j - i) * page};
    append_chunked(plan.ranges, run, options.chunk_bytes);
    i = j;
  }
  for (const auto& p : *sorted) {
    plan.units.push_back({p.src, p.dst, static_cast<std::uint32_t>(plan.parts.size()), 1});
    plan.parts.push_back({0, static_cast<std::uint64_t>(p.src) * page,
                          static_cast<std::uint64_t>(p.dst) * page, page});
  }
  plan.total_bytes = sorted->size() * page;
  return plan;
}

caf::expected<transfer_plan> plan_slots(std::span<const arena_layout> src_blocks,
                                        std::span<const arena_layout> dst_blocks,
                                        std::span<const unit_pair> pairs,
                                        const plan_options& options) {
  if (auto ok = check_chunk(options); !ok)
    return ok.error();
  if (src_blocks.empty() || src_blocks.size() != dst_blocks.size())
    return bad("source and destination need the same, non-zero number of blocks");
  std::uint64_t src_slots = UINT64_MAX, dst_slots = UINT64_MAX;
  for (std::size_t b = 0; b < src_blocks.size(); ++b) {
    const auto& s = src_blocks[b];
    const auto& d = dst_blocks[b];
    for (const auto* layout : {&s, &d}) {
      if (auto ok = layout->validate(); !ok)
        return ok.error();
      if (layout->kind != arena_kind::recurrent_block)
        return bad("arena '" + layout->name + "' is not a recurrent block");
    }
    if (s.name != d.name || s.num_layers != d.num_layers || s.unit_bytes != d.unit_bytes)
      return bad("block " + std::to_string(b) + " ('" + s.name + "' / '" + d.name +
                 "'): names, layer counts or slot bytes differ");
    src_slots = std::min(src_slots, s.num_units);
    dst_slots = std::min(dst_slots, d.num_units);
  }
  auto sorted = checked_pairs(pairs, "slot", src_slots, dst_slots);
  if (!sorted)
    return sorted.error();
  transfer_plan plan;
  plan.kind = arena_kind::recurrent_block;
  plan.num_arenas = static_cast<std::uint32_t>(src_blocks.size());
  for (const auto& p : *sorted) {
    transfer_unit unit{p.src, p.dst, static_cast<std::uint32_t>(plan.parts.size()), 0};
    for (std::size_t b = 0; b < src_blocks.size(); ++b) {
      const auto& s = src_blocks[b];
      const auto& d = dst_blocks[b];
      for (std::uint64_t layer = 0; layer < s.num_layers; ++layer) {
        const byte_range part{
            static_cast<std::uint32_t>(b),
            (layer * s.num_units + static_cast<std::uint64_t>(p.src)) * s.unit_bytes,
            (layer * d.num_units + static_cast<std::uint64_t>(p.dst)) * d.unit_bytes, s.unit_bytes};
        plan.parts.push_back(part);
        append_chunked(plan.ranges, part, options.chunk_bytes);
        plan.total_bytes += part.bytes;
        ++unit.num_parts;
      }
    }
    plan.units.push_back(unit);
  }
  return plan;
}

}  // namespace mstar::transport
