#pragma once

// Device versions of kernels/attention.hpp: the same params structs, with the
// arena, q, k, v, out and every span of the page table in device memory (the
// launchers read only the spans' sizes on the host). Each launcher enqueues on
// `stream`, allocates nothing and returns the launch error; an arena dtype
// other than float32 / bfloat16, or a head_dim the kernels cannot take, is
// cudaErrorInvalidValue.

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/attention.hpp"

namespace mstar::kernels::cuda {

/// Writes every new token's K and V of `p.layer` into its page slot, rounding
/// to bf16 exactly as the CPU does (the arenas compare byte for byte). With
/// the decode arrays present one block per row; otherwise a grid sized from
/// the host-known bound `kv_indices.size() * page_size` strides over the
/// step's tokens, each finding its row by binary search in `qo_indptr`.
[[nodiscard]] cudaError_t append_kv(const append_kv_params& p, cudaStream_t stream);

/// Causal grouped-query attention over pages, as the CPU reference.
/// Steps without the decode arrays (prefill and mixed steps) on a bf16 arena
/// with head_dim 64, 128 or 256 (arena, q and out 16-byte aligned) take the
/// tensor-core prefill kernel for every row: a block per (row, tile of 64
/// (query token, query head) pairs of one kv head's group, kv head), K/V
/// tiles of 64 positions (32 at head_dim 256) gathered from the pages, S and
/// P V on bf16 mma.sync with f32 accumulation, online softmax in f32. q is
/// rounded to bf16 (and so are the softmax weights before P V): results
/// differ slightly from the f32-q kernel (tests: 2e-2 normalised budget).
/// A row of few tokens costs one warp's tensor-core work per key tile.
/// `attention_prefill` picks a warpgroup-MMA form of that kernel instead
/// (sm_90a; head_dim 64 / 128).
/// Decode steps, f32 arenas and other head_dims keep the CUDA-core kernel:
/// one block of 128 threads per (query token, kv head, group of up to four
/// query heads of that kv head), each K/V vector read once for the group,
/// online softmax in f32 (exp2 with the scale folded into q). head_dim 64,
/// 128 or 256 (arena 16-byte aligned) take 16-byte loads through one of the
/// walks of `attention_walk`; any other head_dim up to 256 runs a plain
/// one-warp-per-query-head kernel. Precondition: as append_kv's; rows with
/// no page do no work.
[[nodiscard]] cudaError_t paged_attention(const paged_attention_params& p, cudaStream_t stream);

/// How the fast CUDA-core kernels (one-pass and split, head_dim 64 / 128 /
/// 256) bring K and V in. The CUDA-core walks give each slot of lanes the
/// same positions, so their results agree to f32 rounding of the same sums.
enum class attention_walk : std::int8_t {
  /// MSTAR_ATTN_DECODE_WALK (0 to 5) if set, else the default rule: `mma`
  /// for decode steps, from 16 rows only where its bulk copies fit
  /// (head_dim 128 / 256) and MSTAR_ATTN_MMA_BULK is not 0,
  /// else `rows_mma` there (each where it takes the step, else
  /// `registers`); `registers` for prefill
  automatic = -1,
  registers = 0,  ///< the next step's K/V loaded into registers while this one is consumed
  pipeline4 = 1,  ///< 4 KiB K and V tiles by cp.async through 4 shared stages (3 in flight)
  pipeline2 = 2,  ///< the same through 2 stages (1 in flight; 16 KiB a block)
  /// Decode steps on bf16 arenas with head_dim 64 / 128 / 256 (arena
  /// 16-byte, q 8-byte aligned): the tensor-core kernel (4 warps, each its
  /// own 16-position tiles through 3 cp.async stages, S^T = K Q^T and O^T =
  /// V^T P^T on mma.sync with q and P as bf16 high + low parts, f32 online
  /// softmax); every other launch takes `registers`. Results agree with
  /// the CUDA-core walks to ~1e-5 normalised, not to f32 rounding.
  mma = 3,
  /// Decode steps on bf16 arenas with head_dim 64 / 128 / 256 (arena
  /// 16-byte aligned, whole GQA groups of at most 32 heads): a block per
  /// (row, kv heads, split) takes every kv head of a token at once (up to
  /// 8 warps, one per kv head and chunk of 4 query heads), copying each
  /// page's contiguous K and V runs into a 2-stage shared ring with bulk
  /// copies (cp.async.bulk on an mbarrier), so reads are long and
  /// sequential; CUDA-core f32 math as the other walks (results agree to
  /// f32 rounding of a different order of sums). Every other launch takes
  /// `registers`.
  rows = 4,
  /// Decode steps on bf16 arenas with head_dim 64 / 128 (arena 16-byte, q
  /// 8-byte aligned, whole GQA groups of at most 64 heads): the blocks of
  /// `rows` (every kv head of a token, a 3-stage bulk-copy ring, one copy
  /// a position into rows padded against bank conflicts), consumed on
  /// tensor cores (S = Q K^T and O^T = V^T P^T on mma.sync from ldmatrix,
  /// q and P as bf16 high + low parts, f32 online softmax), agreeing with
  /// the CUDA-core walks as `mma` does. Every other launch takes
  /// `registers`.
  rows_mma = 5,
};

/// How the split path merges each row's partials.
enum class attention_merge : std::int8_t {
  /// MSTAR_ATTN_SPLIT_MERGE (0, 1, 2) if set, else `fused` for the mma walk
  /// (any rows since session 52), `block` elsewhere
  automatic = -1,
  warp = 0,   ///< a warp per (row, query head), reading the partials one by one
  block = 1,  ///< a block per (row, query head), 4 warps over the partials, vector loads
  /// No merge kernel: each split block, its partials written, counts itself
  /// in on its item's counter (the workspace's first
  /// paged_attention_counter_bytes), and the last of an item's blocks merges
  /// its query heads, a warp a head, with `block`'s sums in `block`'s order
  /// (the same bits). The `mma`, `rows_mma` and `registers` split walks;
  /// the others, and steps of more than paged_attention_counter_bytes / 4
  /// tokens x query heads, take `block`.
  fused = 2,
};

/// A choice of walk and merge; `automatic` fields defer to the environment
/// (read once per process), then to the default rule (attention_variant.cpp).
struct attention_variant {
  attention_walk walk = attention_walk::automatic;
  attention_merge merge = attention_merge::automatic;
};

/// Sets the process-wide override of the walk and merge, for tests and
/// benches that compare them in one process; returns the previous override.
/// Each launch resolves its variant when it is enqueued (a captured graph
/// keeps the one of its capture). Thread-safe; not meant for serving.
attention_variant set_attention_variant(attention_variant v);

/// Sets the process-wide override of the `mma` walk's one-chunk rows
/// written by the split kernel (MSTAR_ATTN_SINGLE_DIRECT; kernels/cuda/
/// README.md, Split-KV decode): 1 on, 0 off, -1 the environment's choice;
/// returns the previous override. For tests that compare both in one
/// process. Thread-safe; not meant for serving.
int set_attention_single_direct(int on);

/// Sets the process-wide override of how the `mma` walk gathers its tiles
/// (MSTAR_ATTN_MMA_BULK; kernels/cuda/attention_decode_mma.cu): 1 bulk
/// copies completing on a barrier a stage, 0 a 16-byte cp.async a lane, -1
/// the environment's choice (where unset, bulk copies for launches of at
/// least a block for every three SMs); returns the previous override. The
/// split rule reads it too (the blocks resident), so size a workspace under
/// the override it is launched with. For tests that compare both in one
/// process. Thread-safe; not meant for serving.
int set_attention_mma_bulk(int on);

/// The walk and merge a launch of `p` would take now (`split`: the
/// workspace overload's kernels, else the one-pass kernel's), both resolved
/// (never automatic; `mma` only where that kernel takes `p`; `fused` only
/// where it takes `p`, else `block`). The merge is reported even where the
/// launch would not split. Host only.
[[nodiscard]] attention_variant paged_attention_variant(const paged_attention_params& p,
                                                        bool split);

/// Short names for labels: "regs", "cp4", "cp2", "mma", "rows" ("auto").
[[nodiscard]] const char* to_string(attention_walk w);
/// "mwarp", "mblock", "mfused" ("auto").
[[nodiscard]] const char* to_string(attention_merge m);

/// Which tensor-core kernel runs the steps `paged_attention` gives the
/// prefill path (no decode arrays, bf16 arena, head_dim 64 / 128 / 256).
enum class attention_prefill : std::int8_t {
  /// MSTAR_ATTN_PREFILL ("mma", "wgmma", "wgmma_serial", "wgmma_lean") if
  /// set, else `wgmma_lean` (which falls back to `wgmma`, then `mma`, where
  /// it does not take the step)
  automatic = -1,
  mma = 0,  ///< mma.sync m16n8k16, 4 warps a block (attention_prefill.cu)
  /// Hopper's warpgroup MMA (attention_prefill_wgmma.cu, sm_90a): two
  /// warpgroups a block, 64 M rows each, K / V tiles of 128 positions, S
  /// and P V on wgmma (P from registers). head_dim 64 / 128 on a compute
  /// 9.0 device; every other prefill launch takes `mma`. Same numerics
  /// (q and P as bf16, f32 softmax); sums in another order. Three K / V
  /// stages: each tile's P V runs on under the next tile's S.
  wgmma = 1,
  /// `wgmma` with two stages and every wgmma group waited at once (the
  /// simpler schedule, to compare and to fall back on).
  wgmma_serial = 2,
  // 3 and 4 were a warp-specialised `wgmma` and its ping-pong schedule,
  // removed in session 38: slower than `wgmma` on the H200 in sessions 35
  // and 38 (1,366 / 1,341 against 1,153 us at 8 x 2,048 tokens).
  /// `wgmma`'s blocks, stages and schedule with a leaner per-tile
  /// consumer (attention_prefill_wgmma_lean.cu): descriptors added to,
  /// not rebuilt; row sums of P on the tensor cores (P times ones, so the
  /// normaliser sums the bf16 weights P V used); the running maxima
  /// moved only when a tile passes them by more than 2^8 (exact final
  /// normalisation); page addresses per thread and tile from one
  /// block-table load a position. Pages of a power-of-two size (else
  /// `wgmma` runs the step); same numerics otherwise.
  wgmma_lean = 5,
};

/// Sets the process-wide override of the prefill kernel (tests, benches);
/// returns the previous override. Resolved at each launch, as
/// set_attention_variant. Thread-safe; not meant for serving.
attention_prefill set_attention_prefill(attention_prefill k);

/// The prefill kernel a launch of `p` would take now: `mma`, or a wgmma
/// one where that kernel takes `p` (`wgmma` for `wgmma_lean` where only
/// that one does; never automatic). Meaningful only for steps
/// the prefill path takes. Host only (asks the current device once).
[[nodiscard]] attention_prefill paged_attention_prefill(const paged_attention_params& p);

/// "mma", "wgmma", "wgmma_serial", "wgmma_lean" ("auto").
[[nodiscard]] const char* to_string(attention_prefill k);

/// Chunks per row the split-KV decode path would cut this step into on a
/// device with `num_sms` multiprocessors (0: the current device's); 1 when
/// it would not split. Host sizes only: rows (qo_indptr.size() - 1), pages
/// (kv_indices.size()), page_size, heads and head_dim. It splits decode steps
/// (decode arrays present) with head_dim 64, 128 or 256 whose one-pass grid
/// fills at most half a wave of the device and whose rows average (at most
/// pages * page_size / rows) at least 64 positions. MSTAR_ATTN_SPLITS=N
/// (read once; A/B runs) asks for N chunks a row wherever the rows are long
/// enough for them, half a wave or not (1: never split).
[[nodiscard]] int paged_attention_splits(const paged_attention_params& p, int num_sms = 0);

/// Bytes at the start of every split workspace that hold the fused merge's
/// arrival counters (attention_merge::fused): they must be zero before the
/// workspace's first split launch (clear_paged_attention_workspace, once
/// after allocating it), and every launch leaves them zero (the other
/// merges never touch them).
inline constexpr std::size_t paged_attention_counter_bytes = std::size_t{32} * 1024;

/// Bytes of workspace the split path needs for this step: 0 when it would
/// not split, else paged_attention_counter_bytes + rows * num_qo_heads *
/// splits * (head_dim + 2) floats. Cheap (no device access beyond a cached
/// occupancy query); size the workspace once for the largest step and pass
/// it every time (its counters zeroed once).
[[nodiscard]] std::size_t paged_attention_workspace_bytes(const paged_attention_params& p,
                                                          int num_sms = 0);

/// Zeroes the counters of a freshly allocated split workspace of `bytes`
/// (its first paged_attention_counter_bytes, or all of a smaller one) on
/// `stream`: once, before the workspace's first split launch. Asynchronous.
[[nodiscard]] cudaError_t clear_paged_attention_workspace(void* workspace, std::size_t bytes,
                                                          cudaStream_t stream);

/// `paged_attention` with split-KV ("flash-decoding") for decode steps that
/// leave the device idle: each row's positions are cut into chunks, a block
/// per (row, kv head, head group, chunk) writes a partial (max, sum,
/// unnormalised output) into `workspace`, and a second kernel (or, with
/// attention_merge::fused, each item's last split block) merges each row's
/// partials (`attention_merge`; every merge adds them in a fixed order).
/// Chunks are an equal share of the row (at least 32 positions), so chunks
/// past a short row's end do nothing and are left out of the merge. Splits
/// into as many chunks as `workspace_bytes` allows, up to
/// `paged_attention_splits`; with too little workspace for two, or a step
/// that would not split, runs the one-pass kernel (`workspace` untouched).
/// `workspace`: device memory, 16-byte aligned (else cudaErrorInvalidValue),
/// its counters zeroed once (clear_paged_attention_workspace), not shared
/// with a concurrent launch. Results match the one-pass kernel to
/// f32 rounding.
[[nodiscard]] cudaError_t paged_attention(const paged_attention_params& p, void* workspace,
                                          std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace mstar::kernels::cuda
