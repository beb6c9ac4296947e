#pragma once

// Device versions of kernels/page_ops.hpp: the same arguments, every pointer
// and span a device address (spans carry a device pointer and its length; the
// launcher only reads their size on the host). Each launcher enqueues on
// `stream`, allocates nothing and returns the launch error; byte layouts and
// results equal the CPU reference's.

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <span>

#include "kernels/page_ops.hpp"

namespace mstar::kernels::cuda {

/// Copies whole pages `src[i] -> dst[i]` (min of the two lengths). Unlike the
/// CPU version there is no staging: no destination may be another entry's
/// source (`dst[i] == src[j]` for `i != j`); `dst[i] == src[i]` is fine. Use
/// the staging overload when lists may overlap.
[[nodiscard]] cudaError_t copy_pages(std::byte* arena, const kv_geometry& geometry,
                                     std::span<const std::int32_t> src,
                                     std::span<const std::int32_t> dst, cudaStream_t stream);

/// `copy_pages` safe for any overlap: packs the sources into `staging`
/// (`min(src, dst) * page_bytes` device bytes, owned by the caller) first.
[[nodiscard]] cudaError_t copy_pages(std::byte* arena, const kv_geometry& geometry,
                                     std::span<const std::int32_t> src,
                                     std::span<const std::int32_t> dst, std::byte* staging,
                                     cudaStream_t stream);

/// Copies the first `slots` token slots of page `src` into page `dst`, every
/// layer, K and V (page ids are host values).
[[nodiscard]] cudaError_t copy_slots(std::byte* arena, const kv_geometry& geometry,
                                     std::int32_t src, std::int32_t dst, std::size_t slots,
                                     cudaStream_t stream);

/// Zeroes whole pages.
[[nodiscard]] cudaError_t zero_pages(std::byte* arena, const kv_geometry& geometry,
                                     std::span<const std::int32_t> pages, cudaStream_t stream);

/// One layer's K (or V) of each token in `tokens` (device array) into the
/// contiguous `out`.
[[nodiscard]] cudaError_t gather_tokens(const std::byte* arena, const kv_geometry& geometry,
                                        std::size_t layer, kv_half half,
                                        std::span<const token_position> tokens, std::byte* out,
                                        cudaStream_t stream);

/// The inverse of `gather_tokens`. A position listed twice ends with the
/// later token, as on the CPU (each token checks the later entries).
[[nodiscard]] cudaError_t scatter_tokens(std::byte* arena, const kv_geometry& geometry,
                                         std::size_t layer, kv_half half,
                                         std::span<const token_position> tokens,
                                         const std::byte* in, cudaStream_t stream);

/// Whole pages, page after page, into the contiguous `staging`.
[[nodiscard]] cudaError_t pack_pages(const std::byte* arena, const kv_geometry& geometry,
                                     std::span<const std::int32_t> pages, std::byte* staging,
                                     cudaStream_t stream);

/// The inverse of `pack_pages`. Unlike the CPU version, a page listed twice
/// gets one of its copies, unspecified which (the pool never repeats a page).
[[nodiscard]] cudaError_t unpack_pages(std::byte* arena, const kv_geometry& geometry,
                                       std::span<const std::int32_t> pages,
                                       const std::byte* staging, cudaStream_t stream);

/// Copies slot `src` to slot `dst` in every layer of a recurrent block
/// (`[num_layers][max_slots][slot_bytes]` at `block_base`).
[[nodiscard]] cudaError_t copy_slot(std::byte* block_base, std::size_t num_layers,
                                    std::size_t max_slots, std::size_t slot_bytes, std::int32_t src,
                                    std::int32_t dst, cudaStream_t stream);

/// Zeroes slot `slot` in every layer of the block.
[[nodiscard]] cudaError_t zero_slot(std::byte* block_base, std::size_t num_layers,
                                    std::size_t max_slots, std::size_t slot_bytes,
                                    std::int32_t slot, cudaStream_t stream);

/// Slot `slot` of every layer into `staging`, layer after layer.
[[nodiscard]] cudaError_t pack_slot(const std::byte* block_base, std::size_t num_layers,
                                    std::size_t max_slots, std::size_t slot_bytes,
                                    std::int32_t slot, std::byte* staging, cudaStream_t stream);

/// The inverse of `pack_slot`.
[[nodiscard]] cudaError_t unpack_slot(std::byte* block_base, std::size_t num_layers,
                                      std::size_t max_slots, std::size_t slot_bytes,
                                      std::int32_t slot, const std::byte* staging,
                                      cudaStream_t stream);

}  // namespace mstar::kernels::cuda
