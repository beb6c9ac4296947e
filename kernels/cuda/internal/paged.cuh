#pragma once

// Device-side addressing of the paged KV arena and of a step's page table,
// shared by append_kv and the attention kernels.

#include <cstddef>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

/// A kv_page_table's arrays as raw device pointers.
struct table_args {
  const std::int32_t* qo = nullptr;
  const std::int32_t* kv_indptr = nullptr;
  const std::int32_t* kv_indices = nullptr;
  const std::int32_t* last = nullptr;
  const std::int32_t* decode_page = nullptr;
  const std::int32_t* decode_offset = nullptr;
  int rows = 0;
  bool decode = false;
};

/// Byte geometry of one layer's K and V in the arena.
struct arena_args {
  std::byte* base = nullptr;
  std::size_t page_bytes = 0;
  std::size_t half_bytes = 0;   // one layer's K (or V) run of a page
  std::size_t token_bytes = 0;  // one token, every kv head
  std::size_t head_bytes = 0;
  std::size_t layer_offset = 0;  // layer * 2 * half_bytes
  int page_size = 0;

  /// K (kv = 0) or V (kv = 1) of (page, slot, head).
  __device__ __forceinline__ std::byte* at(int kv, std::int32_t page, std::int32_t slot,
                                           int head) const {
    return base + static_cast<std::size_t>(page) * page_bytes + layer_offset +
           static_cast<std::size_t>(kv) * half_bytes +
           static_cast<std::size_t>(slot) * token_bytes +
           static_cast<std::size_t>(head) * head_bytes;
  }
};

/// One row's place in the step.
struct row_info {
  int first_token = 0;  // packed index of the row's first new token
  int new_tokens = 0;
  int length = 0;  // cached plus new
  int first_page = 0;
};

__device__ __forceinline__ row_info row_at(const table_args& t, int page_size, int r) {
  row_info s;
  s.first_token = t.qo[r];
  s.new_tokens = t.qo[r + 1] - s.first_token;
  s.first_page = t.kv_indptr[r];
  const int pages = t.kv_indptr[r + 1] - s.first_page;
  s.length = pages == 0 ? 0 : (pages - 1) * page_size + t.last[r];
  return s;
}

/// Tokens the step computes: rows in decode mode, else qo[rows] (device).
__device__ __forceinline__ int step_tokens(const table_args& t) {
  return t.decode ? t.rows : t.qo[t.rows];
}

/// The device form of a page table (host side: reads only span sizes).
inline table_args to_table_args(const kv_page_table& t) {
  return {t.qo_indptr.data(),   t.kv_indptr.data(),     t.kv_indices.data(), t.last_page_len.data(),
          t.decode_page.data(), t.decode_offset.data(), t.num_rows(),        t.is_decode()};
}

/// The device form of an arena and a layer; false for an unsupported dtype.
inline bool to_arena_args(const kv_arena_view& a, std::int32_t layer, arena_args& out) {
  const kv_geometry& g = a.geometry;
  if (g.dtype != mstar::dtype::float32 && g.dtype != mstar::dtype::bfloat16)
    return false;
  if (g.page_size <= 0 || g.num_kv_heads <= 0 || g.head_dim <= 0 || layer < 0 ||
      layer >= g.num_layers) {
    return false;
  }
  out.base = a.base;
  out.head_bytes = g.head_bytes();
  out.token_bytes = g.token_bytes();
  out.half_bytes = g.half_bytes();
  out.page_bytes = g.page_bytes();
  out.layer_offset = g.slot_offset(0, static_cast<std::size_t>(layer), kv_half::key, 0);
  out.page_size = g.page_size;
  return true;
}

/// A host-known upper bound on the step's tokens: every token has a slot.
inline std::int64_t token_bound(const kv_page_table& t, std::int32_t page_size) {
  return t.is_decode() ? t.num_rows() : static_cast<std::int64_t>(t.kv_indices.size()) * page_size;
}

}  // namespace mstar::kernels::cuda::detail
