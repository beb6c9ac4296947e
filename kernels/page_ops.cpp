#include "kernels/page_ops.hpp"

#include <cstring>
#include <vector>

namespace mstar::kernels {

void copy_pages(std::byte* arena, const page_layout& layout, std::span<const std::int32_t> src,
                std::span<const std::int32_t> dst) {
  // Gather then scatter: a destination that is also a later source must be
  // read with its old contents.
  std::vector<std::byte> staging(src.size() * layout.page_bytes);
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::memcpy(staging.data() + i * layout.page_bytes,
                arena + static_cast<std::size_t>(src[i]) * layout.page_bytes, layout.page_bytes);
  }
  for (std::size_t i = 0; i < dst.size() && i < src.size(); ++i) {
    std::memcpy(arena + static_cast<std::size_t>(dst[i]) * layout.page_bytes,
                staging.data() + i * layout.page_bytes, layout.page_bytes);
  }
}

void copy_slots(std::byte* arena, const page_layout& layout, std::int32_t src, std::int32_t dst,
                std::size_t slots) {
  // Within a page: [layer][2][page_size][token]; each (layer, K/V) run holds
  // page_size tokens, of which the first `slots` are copied.
  const std::size_t run = layout.page_size * layout.token_bytes;
  std::byte* s = arena + static_cast<std::size_t>(src) * layout.page_bytes;
  std::byte* d = arena + static_cast<std::size_t>(dst) * layout.page_bytes;
  for (std::size_t r = 0; r < layout.num_layers * 2; ++r) {
    std::memmove(d + r * run, s + r * run, slots * layout.token_bytes);
  }
}

void zero_pages(std::byte* arena, const page_layout& layout, std::span<const std::int32_t> pages) {
  for (const auto p : pages) {
    std::memset(arena + static_cast<std::size_t>(p) * layout.page_bytes, 0, layout.page_bytes);
  }
}

}  // namespace mstar::kernels
