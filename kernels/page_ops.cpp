#include "kernels/page_ops.hpp"

#include <cstring>
#include <vector>

namespace mstar::kernels {

void copy_pages(std::byte* arena, const kv_geometry& geometry, std::span<const std::int32_t> src,
                std::span<const std::int32_t> dst) {
  // Gather then scatter: a destination that is also a later source must be
  // read with its old contents.
  const std::size_t bytes = geometry.page_bytes();
  std::vector<std::byte> staging(src.size() * bytes);
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::memcpy(staging.data() + i * bytes, arena + static_cast<std::size_t>(src[i]) * bytes,
                bytes);
  }
  for (std::size_t i = 0; i < dst.size() && i < src.size(); ++i) {
    std::memcpy(arena + static_cast<std::size_t>(dst[i]) * bytes, staging.data() + i * bytes,
                bytes);
  }
}

void copy_slots(std::byte* arena, const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                std::size_t slots) {
  // Within a page: [layer][2][page_size][token]; each (layer, K/V) run holds
  // page_size tokens, of which the first `slots` are copied.
  const std::size_t run = geometry.half_bytes();
  const std::size_t page = geometry.page_bytes();
  std::byte* s = arena + static_cast<std::size_t>(src) * page;
  std::byte* d = arena + static_cast<std::size_t>(dst) * page;
  const auto runs = static_cast<std::size_t>(geometry.num_layers) * 2;
  for (std::size_t r = 0; r < runs; ++r) {
    std::memmove(d + r * run, s + r * run, slots * geometry.token_bytes());
  }
}

void zero_pages(std::byte* arena, const kv_geometry& geometry,
                std::span<const std::int32_t> pages) {
  const std::size_t bytes = geometry.page_bytes();
  for (const auto p : pages) {
    std::memset(arena + static_cast<std::size_t>(p) * bytes, 0, bytes);
  }
}

namespace {

// Calls `copy(first_index, first_page, count)` for each run of consecutive
// page ids in `pages`, so contiguous pages move as one block.
template <class Copy>
void for_each_page_run(std::span<const std::int32_t> pages, Copy copy) {
  std::size_t begin = 0;
  while (begin < pages.size()) {
    std::size_t end = begin + 1;
    while (end < pages.size() && pages[end] == pages[end - 1] + 1)
      ++end;
    copy(begin, static_cast<std::size_t>(pages[begin]), end - begin);
    begin = end;
  }
}

std::size_t slot_offset(std::size_t layer, std::size_t max_slots, std::size_t slot_bytes,
                        std::int32_t slot) {
  return (layer * max_slots + static_cast<std::size_t>(slot)) * slot_bytes;
}

}  // namespace

void gather_tokens(const std::byte* arena, const kv_geometry& geometry, std::size_t layer,
                   kv_half half, std::span<const token_position> tokens, std::byte* out) {
  const std::size_t bytes = geometry.token_bytes();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto at = geometry.slot_offset(tokens[i].page, layer, half, tokens[i].offset);
    std::memcpy(out + i * bytes, arena + at, bytes);
  }
}

void scatter_tokens(std::byte* arena, const kv_geometry& geometry, std::size_t layer, kv_half half,
                    std::span<const token_position> tokens, const std::byte* in) {
  const std::size_t bytes = geometry.token_bytes();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto at = geometry.slot_offset(tokens[i].page, layer, half, tokens[i].offset);
    std::memcpy(arena + at, in + i * bytes, bytes);
  }
}

void pack_pages(const std::byte* arena, const kv_geometry& geometry,
                std::span<const std::int32_t> pages, std::byte* staging) {
  const std::size_t bytes = geometry.page_bytes();
  for_each_page_run(pages, [&](std::size_t index, std::size_t page, std::size_t count) {
    std::memcpy(staging + index * bytes, arena + page * bytes, count * bytes);
  });
}

void unpack_pages(std::byte* arena, const kv_geometry& geometry,
                  std::span<const std::int32_t> pages, const std::byte* staging) {
  const std::size_t bytes = geometry.page_bytes();
  for_each_page_run(pages, [&](std::size_t index, std::size_t page, std::size_t count) {
    std::memcpy(arena + page * bytes, staging + index * bytes, count * bytes);
  });
}

void copy_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
               std::size_t slot_bytes, std::int32_t src, std::int32_t dst) {
  if (src == dst)
    return;
  for (std::size_t l = 0; l < num_layers; ++l) {
    std::memcpy(block_base + slot_offset(l, max_slots, slot_bytes, dst),
                block_base + slot_offset(l, max_slots, slot_bytes, src), slot_bytes);
  }
}

void zero_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
               std::size_t slot_bytes, std::int32_t slot) {
  for (std::size_t l = 0; l < num_layers; ++l) {
    std::memset(block_base + slot_offset(l, max_slots, slot_bytes, slot), 0, slot_bytes);
  }
}

void pack_slot(const std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
               std::size_t slot_bytes, std::int32_t slot, std::byte* staging) {
  for (std::size_t l = 0; l < num_layers; ++l) {
    std::memcpy(staging + l * slot_bytes, block_base + slot_offset(l, max_slots, slot_bytes, slot),
                slot_bytes);
  }
}

void unpack_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
                 std::size_t slot_bytes, std::int32_t slot, const std::byte* staging) {
  for (std::size_t l = 0; l < num_layers; ++l) {
    std::memcpy(block_base + slot_offset(l, max_slots, slot_bytes, slot), staging + l * slot_bytes,
                slot_bytes);
  }
}

}  // namespace mstar::kernels
