#pragma once

// The shape of a page-major KV arena, in one type: the pool's config holds it
// (resources/kv), the page operations and attention kernels address the arena
// with it (host and CUDA), and a transport describes the arena from it.

#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"

namespace mstar::kernels {

/// Which half of a layer's page run: keys or values.
enum class kv_half : std::uint8_t { key = 0, value = 1 };

/// Geometry of a page-major KV arena
/// `[num_pages][num_layers][2 (K, V)][page_size][num_kv_heads][head_dim]` of
/// `dtype`: one page of a request is one contiguous run of bytes holding every
/// layer. Plain data; whoever builds one validates it (`kv_pool_config`).
struct kv_geometry {
  std::int32_t page_size = 0;     ///< token slots per page
  std::int32_t num_layers = 0;    ///< attention layers stored per page
  std::int32_t num_kv_heads = 0;  ///< Hkv: KV heads per layer (after sharding)
  std::int32_t head_dim = 0;      ///< D: elements per head
  /// Element type: float32 or bfloat16 for the attention kernels (bfloat16
  /// stored with round-to-nearest-even, read back exactly); page operations
  /// move bytes of any type.
  mstar::dtype dtype = mstar::dtype::float32;

  /// Bytes of one head's vector.
  [[nodiscard]] constexpr std::size_t head_bytes() const noexcept {
    return static_cast<std::size_t>(head_dim) * size_of(dtype);
  }
  /// Bytes of one token's K (or V) in one layer: every KV head.
  [[nodiscard]] constexpr std::size_t token_bytes() const noexcept {
    return static_cast<std::size_t>(num_kv_heads) * head_bytes();
  }
  /// Bytes of one layer's K (or V) run in a page: `page_size` tokens.
  [[nodiscard]] constexpr std::size_t half_bytes() const noexcept {
    return static_cast<std::size_t>(page_size) * token_bytes();
  }
  /// Bytes of one layer in a page: its K run, then its V run.
  [[nodiscard]] constexpr std::size_t layer_bytes() const noexcept { return 2 * half_bytes(); }
  /// Bytes of one page: every layer, K and V.
  [[nodiscard]] constexpr std::size_t page_bytes() const noexcept {
    return static_cast<std::size_t>(num_layers) * layer_bytes();
  }
  /// Byte offset from the arena's base of token slot `slot` of `page`, in
  /// `layer`'s K or V run.
  [[nodiscard]] constexpr std::size_t slot_offset(std::int32_t page, std::size_t layer,
                                                  kv_half half, std::int32_t slot) const noexcept {
    return static_cast<std::size_t>(page) * page_bytes() + layer * layer_bytes() +
           static_cast<std::size_t>(half) * half_bytes() +
           static_cast<std::size_t>(slot) * token_bytes();
  }

  /// Field-wise equality.
  friend constexpr bool operator==(const kv_geometry&, const kv_geometry&) = default;
};

}  // namespace mstar::kernels
