#pragma once

// Page operations on the page-major KV layout
// `[num_pages][num_layers][2][page_size][num_kv_heads][head_dim]` (CPU
// reference; the CUDA issue adds device versions with the same parameters).

#include <cstddef>
#include <cstdint>
#include <span>

namespace mstar::kernels {

/// Geometry of a page-major arena, in bytes.
struct page_layout {
  std::size_t page_bytes = 0;     ///< one whole page: every layer, K and V
  std::size_t token_bytes = 0;    ///< one token of K (or V) in one layer
  std::size_t page_size = 0;      ///< token slots per page
  std::size_t num_layers = 0;
};

/// Copies whole pages `src[i] -> dst[i]`. Sources are read before any
/// destination is written, so overlapping lists are safe.
void copy_pages(std::byte* arena, const page_layout& layout, std::span<const std::int32_t> src,
                std::span<const std::int32_t> dst);

/// Copies the first `slots` token slots of page `src` into page `dst`, every
/// layer, K and V.
void copy_slots(std::byte* arena, const page_layout& layout, std::int32_t src, std::int32_t dst,
                std::size_t slots);

/// Zeroes whole pages.
void zero_pages(std::byte* arena, const page_layout& layout, std::span<const std::int32_t> pages);

}  // namespace mstar::kernels
