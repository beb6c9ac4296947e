#pragma once

// Page operations on the page-major KV layout
// `[num_pages][num_layers][2][page_size][num_kv_heads][head_dim]` (CPU
// reference; the CUDA issue adds device versions with the same parameters).

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/kv_geometry.hpp"

namespace mstar::kernels {

/// Copies whole pages `src[i] -> dst[i]`. Sources are read before any
/// destination is written, so overlapping lists are safe.
void copy_pages(std::byte* arena, const kv_geometry& geometry, std::span<const std::int32_t> src,
                std::span<const std::int32_t> dst);

/// Copies the first `slots` token slots of page `src` into page `dst`, every
/// layer, K and V.
void copy_slots(std::byte* arena, const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                std::size_t slots);

/// Zeroes whole pages.
void zero_pages(std::byte* arena, const kv_geometry& geometry, std::span<const std::int32_t> pages);

/// Where one token's K and V live: a page and the token slot inside it.
struct token_position {
  std::int32_t page = 0;    ///< page id in the arena
  std::int32_t offset = 0;  ///< token slot in the page, `[0, page_size)`
};

/// Copies one layer's K (or V) of each token in `tokens` out of the arena into
/// `out`, a contiguous `[tokens.size()][num_kv_heads][head_dim]` buffer
/// (`geometry.token_bytes()` per token). Positions are not checked: the plan
/// that produced them is.
void gather_tokens(const std::byte* arena, const kv_geometry& geometry, std::size_t layer,
                   kv_half half, std::span<const token_position> tokens, std::byte* out);

/// The inverse of `gather_tokens`: writes token `i` of the contiguous `in`
/// buffer to `tokens[i]`. A position listed twice ends with the later token.
void scatter_tokens(std::byte* arena, const kv_geometry& geometry, std::size_t layer, kv_half half,
                    std::span<const token_position> tokens, const std::byte* in);

/// Copies whole pages, page after page, into the contiguous `staging`
/// buffer (`pages.size() * geometry.page_bytes()`): what a transfer sends. Runs of
/// consecutive page ids are copied as one block.
void pack_pages(const std::byte* arena, const kv_geometry& geometry,
                std::span<const std::int32_t> pages, std::byte* staging);

/// The inverse of `pack_pages`: writes page `i` of `staging` to `pages[i]`.
void unpack_pages(std::byte* arena, const kv_geometry& geometry,
                  std::span<const std::int32_t> pages, const std::byte* staging);

// Slot operations on one recurrent block, laid out
// `[num_layers][max_slots][slot_bytes]` starting at `block_base`.

/// Copies slot `src` to slot `dst` in every layer of the block. `src == dst`
/// leaves the block unchanged.
void copy_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
               std::size_t slot_bytes, std::int32_t src, std::int32_t dst);

/// Zeroes slot `slot` in every layer of the block.
void zero_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
               std::size_t slot_bytes, std::int32_t slot);

/// Copies slot `slot` of every layer into `staging`, layer after layer
/// (`num_layers * slot_bytes`): a slot is not contiguous in the block, so a
/// transfer sends this packed form.
void pack_slot(const std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
               std::size_t slot_bytes, std::int32_t slot, std::byte* staging);

/// The inverse of `pack_slot`: writes layer `l` of `staging` to slot `slot`
/// of layer `l`.
void unpack_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
                 std::size_t slot_bytes, std::int32_t slot, const std::byte* staging);

}  // namespace mstar::kernels
