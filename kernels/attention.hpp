#pragma once

// Attention over the paged KV pool: appending a step's new K/V rows into
// their pages and causal attention of the step's queries over each row's
// pages (CPU reference; CUDA versions take the same params structs).
//
// The addressing is a `kv_label_plan`'s arrays, borrowed as spans so kernels
// never depend on resources/. Row r holds
//   pages_r      = kv_indptr[r+1] - kv_indptr[r]
//   length_r     = (pages_r - 1) * page_size + last_page_len[r]   (0 without pages)
//   to_compute_r = qo_indptr[r+1] - qo_indptr[r]
// and its new token j (packed at qo_indptr[r] + j) sits at absolute position
// length_r - to_compute_r + j, in page kv_indices[kv_indptr[r] + pos / page_size]
// at slot pos % page_size. Positions below length_r - to_compute_r are already
// cached (earlier steps or shared prefix pages).

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/kv_geometry.hpp"

namespace mstar::kernels {

/// A page-major KV arena as kernels address it: where it starts and its
/// geometry (float32 or bfloat16 elements).
struct kv_arena_view {
  /// [num_pages][num_layers][2 (K, V)][page_size][num_kv_heads][head_dim] of
  /// `geometry.dtype`.
  std::byte* base = nullptr;
  kv_geometry geometry;  ///< its shape and element type
};

/// Where each row's tokens live: the arrays of one label's `kv_label_plan`.
/// R = qo_indptr.size() - 1 rows.
struct kv_page_table {
  std::span<const std::int32_t> qo_indptr;      ///< [R+1] int32: cumulative new tokens
  std::span<const std::int32_t> kv_indptr;      ///< [R+1] int32: cumulative pages
  std::span<const std::int32_t> kv_indices;     ///< [kv_indptr[R]] int32: page ids, row after row
  std::span<const std::int32_t> last_page_len;  ///< [R] int32: slots used on each last page
  /// [R] int32, or empty: decode fast path, the page of each row's one new
  /// token. Non-empty only when every row computes exactly one token.
  std::span<const std::int32_t> decode_page;
  /// [R] int32, or empty: the slot of that token in `decode_page[r]`.
  std::span<const std::int32_t> decode_offset;

  /// Rows addressed.
  [[nodiscard]] std::int32_t num_rows() const noexcept {
    return qo_indptr.empty() ? 0 : static_cast<std::int32_t>(qo_indptr.size()) - 1;
  }
  /// Whether the decode fast path arrays are present.
  [[nodiscard]] bool is_decode() const noexcept { return !decode_page.empty(); }
};

/// Inputs of `append_kv`: one layer's new K and V rows for a step.
struct append_kv_params {
  kv_arena_view arena;       ///< written at the new tokens' positions
  std::int32_t layer = 0;    ///< which layer of each page
  kv_page_table table;       ///< the step's addressing
  const float* k = nullptr;  ///< [T, Hkv, D] f32, rows packed in qo_indptr order
  const float* v = nullptr;  ///< [T, Hkv, D] f32, same packing
};

/// Writes every new token's K and V of `p.layer` into its page slot.
/// Precondition: each row that computes tokens has at least one page, and
/// length_r >= to_compute_r. With the decode arrays present it uses them
/// directly (no position arithmetic); the result is identical.
void append_kv(const append_kv_params& p);

/// Inputs of `paged_attention`: one layer's queries for a step.
struct paged_attention_params {
  kv_arena_view arena;            ///< read only
  std::int32_t layer = 0;         ///< which layer of each page
  kv_page_table table;            ///< the step's addressing (same as append_kv's)
  const float* q = nullptr;       ///< [T, Hq, D] f32, rows packed in qo_indptr order
  float* out = nullptr;           ///< [T, Hq, D] f32, written; must not alias q
  std::int32_t num_qo_heads = 0;  ///< Hq, a multiple of arena.geometry.num_kv_heads
  /// Softmax scale; 0 picks 1/sqrt(head_dim).
  float scale = 0.0f;
};

/// Causal grouped-query attention over pages: the query at absolute position
/// pos of row r attends positions [0, pos] of its own row, cached prefix
/// included; query head h reads kv head h / (Hq / Hkv). Call after
/// `append_kv` for the same layer and table. Rows computing no token are
/// skipped. Softmax runs in f32 with the row maximum subtracted.
void paged_attention(const paged_attention_params& p);

}  // namespace mstar::kernels
