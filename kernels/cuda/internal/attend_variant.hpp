#pragma once

// Which walk and merge a fast paged-attention launch takes (host side of
// attention.hpp's attention_variant; attention_variant.cpp): attention.cu
// and attention_split.cu ask once per launch.

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention.hpp"

namespace mstar::kernels::cuda::detail {

/// The walk of a fast-kernel launch: the override, else
/// MSTAR_ATTN_DECODE_WALK, else the default rule. `split`: the split
/// kernel; `decode`: a decode table; `rows`: the step's rows. Never
/// automatic.
[[nodiscard]] attention_walk walk_for(bool split, bool decode, std::int64_t rows);

/// MSTAR_ATTN_SPLIT_MIN_CHUNK (read once): the fewest positions a split
/// chunk takes, for every walk (A/B runs of the split rule); 0 where unset
/// or not a positive number (each walk's own minimum then).
[[nodiscard]] int split_min_chunk_override();

/// Whether the mma walk's split launches write a row with one used chunk
/// themselves, its merge kernel skipping it (split_args::single_direct):
/// set_attention_single_direct's override, else on unless
/// MSTAR_ATTN_SINGLE_DIRECT=0 (read once). On by default since session 48:
/// 1-1.5 us a 0.56B batch-1 step on an H100, twice
/// (bench/results/session48-calls/).
[[nodiscard]] bool single_direct_enabled();

/// How the `mma` walk gathers its tiles: 1 bulk copies, 0 a 16-byte
/// cp.async a lane, -1 by the launch's grid (attention_decode_mma.cu's
/// `bulk_pays`); set_attention_mma_bulk's override where set, else
/// MSTAR_ATTN_MMA_BULK=0 / 1 (read once), else -1.
[[nodiscard]] int mma_bulk_choice();

/// Most chunks MSTAR_ATTN_SPLITS may ask for (the split path's max_splits).
inline constexpr int max_split_override = 128;

/// MSTAR_ATTN_SPLITS (read once): the chunks a row the split rule takes
/// wherever the rows are long enough for them (by length and max_splits),
/// in place of its grid rule and half-wave test (A/B runs; 1: never split);
/// 0 where unset or not a number from 1 to max_split_override.
[[nodiscard]] int split_count_override();

/// The merge of a split launch by `walk`, as walk_for: the override, then
/// MSTAR_ATTN_SPLIT_MERGE, then `fused` for the mma walk (any rows) and
/// `block` elsewhere. Never automatic; `fused` even for a launch that takes
/// `block` instead (fused_merge_takes).
[[nodiscard]] attention_merge merge_for(attention_walk walk);

/// Whether attention_merge::fused takes split launch `p` of `walk`: the
/// `mma`, `rows_mma` and `registers` walks, steps of at most split_counters
/// (attend_split.cuh) tokens x query heads. Host sizes only.
[[nodiscard]] bool fused_merge_takes(const paged_attention_params& p, attention_walk walk);

/// Whether the tensor-core decode kernel (attention_walk::mma,
/// attention_decode_mma.cu) takes `p`: decode arrays present, a bf16 arena,
/// head_dim 64, 128 or 256, whole GQA groups, the arena 16-byte and q
/// 8-byte aligned. Host sizes and pointers only.
[[nodiscard]] bool decode_mma_takes(const paged_attention_params& p);

/// The prefill kernel the override, else MSTAR_ATTN_PREFILL, else the
/// default (`mma`) names; never automatic. Whether that kernel takes the
/// step is the caller's question (`prefill_wgmma_takes`).
[[nodiscard]] attention_prefill prefill_for();

/// Whether the warpgroup-MMA prefill kernel (attention_prefill_wgmma.cu,
/// sm_90a) can take step `p`: `prefill_takes`, head_dim 64 or 128, and the
/// current device of compute capability 9.0 (asked once per device).
[[nodiscard]] bool prefill_wgmma_takes(const paged_attention_params& p);

/// Whether the lean-consumer wgmma prefill kernel
/// (attention_prefill_wgmma_lean.cu) can take step `p`:
/// `prefill_wgmma_takes`, a power-of-two page size, and a page of the
/// arena (every layer's K and V) under 2 GiB.
[[nodiscard]] bool prefill_wgmma_lean_takes(const paged_attention_params& p);

/// Most warps a block of the kernel runs (one per (kv head, chunk of query
/// heads) it takes).
inline constexpr int decode_rows_max_warps = 8;

/// How the kernel cuts a step of one shape: `kv_per_block` consecutive kv
/// heads a block (all of them where the GQA chunks allow: then a page's
/// tokens are one contiguous run of the arena), `warps` = kv_per_block x
/// query-head chunks a block, `tile` positions a shared stage (a multiple
/// of the positions a warp takes per step), `stages` of the ring and the
/// block's dynamic shared memory.
struct decode_rows_shape {
  int kv_per_block = 0;
  int warps = 0;
  int tile = 0;
  int stages = 0;
  std::size_t smem_bytes = 0;
  [[nodiscard]] int blocks_per_row(int kv_heads) const { return kv_heads / kv_per_block; }
};

/// The shape for (kv heads, GQA group, head_dim) on a bf16 arena; false
/// where the kernel does not take it (head_dim other than 64 / 128 / 256,
/// more than decode_rows_max_warps query-head chunks a kv head).
[[nodiscard]] bool decode_rows_shape_of(int kv_heads, int group, int head_dim,
                                        decode_rows_shape& out);

/// Whether the whole-token-row decode kernel (attention_walk::rows,
/// attention_decode_rows.cu) takes `p`: decode arrays present, a bf16
/// arena, head_dim 64, 128 or 256, whole GQA groups of at most 32 heads,
/// the arena 16-byte aligned. Host sizes and pointers only.
[[nodiscard]] bool decode_rows_takes(const paged_attention_params& p);

/// The shape of the tensor-core whole-row kernel (attention_walk::rows_mma,
/// attention_decode_rows_mma.cu) for (kv heads, GQA group, head_dim): as
/// decode_rows_shape_of with query-head chunks of decode_mma_heads (4 or
/// 8), head_dim 64 or 128, 3 stages of a multiple of 8 positions whose
/// shared rows are padded by 16 bytes; false where it does not take it.
[[nodiscard]] bool decode_rows_mma_shape_of(int kv_heads, int group, int head_dim,
                                            decode_rows_shape& out);

/// Whether the tensor-core whole-row kernel takes `p`: decode arrays
/// present, a bf16 arena, head_dim 64 or 128, whole GQA groups of at most
/// 64 heads, the arena 16-byte and q 8-byte aligned. Host sizes and
/// pointers only.
[[nodiscard]] bool decode_rows_mma_takes(const paged_attention_params& p);

/// Whether the walk comes from the default rule: no override, no
/// MSTAR_ATTN_DECODE_WALK.
[[nodiscard]] bool walk_by_rule();

/// Whether the `mma` walk's bulk copies take (head_dim, group) at the
/// blocks an SM of its cp.async form (attention_decode_mma.cu); false where
/// the walk does not take the shape.
[[nodiscard]] bool decode_mma_bulk_fits(int head_dim, int group);

/// walk_for, the default rule's rows_mma given to `mma` where its bulk
/// copies fit (and MSTAR_ATTN_MMA_BULK is not 0), with `mma`, `rows` or
/// `rows_mma` turned into `registers` where that kernel does not take `p`:
/// the walk a launch of `p` runs.
[[nodiscard]] attention_walk walk_of(const paged_attention_params& p, bool split);

}  // namespace mstar::kernels::cuda::detail
