#pragma once

// The split-KV decode path's partials (attention_split.cu): where they live
// and which ones a row writes. Shared by the kernels that write them (the
// CUDA-core split kernel, attention_decode_mma.cu's tensor-core one) and
// the merges that read them (attend_merge.cuh); it defines no kernels.

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/internal/attend.cuh"

namespace mstar::kernels::cuda::detail {

/// At most this many chunks per row (also the merges' weight caches).
inline constexpr int max_splits = 128;
/// Fewest positions per chunk: below this the partials' traffic (GC * (D +
/// 2) floats written and read back per block) grows past ~1/4 of the K/V
/// read. A multiple of every CUDA-core layout's step (4 to 32); the
/// tensor-core kernel's step (64) rounds it up.
inline constexpr int min_chunk = 32;

/// Arrival counters at the start of every split workspace
/// (paged_attention_counter_bytes): the fused merge's, one per (token,
/// first query head of a split block's item), so steps of up to this many
/// tokens x query heads can take it.
inline constexpr int split_counters =
    static_cast<int>(paged_attention_counter_bytes / sizeof(unsigned));

/// Where the partials live: workspace = the counters, then acc, m and l.
struct split_args {
  float* acc;  // [T][Hq][splits][D] unnormalised outputs
  float* m;    // [T][Hq][splits] maxima (exp2 domain)
  float* l;    // [T][Hq][splits] softmax sums relative to m
  int splits;
  int step;            // the attend kernel's positions per block step: chunks are multiples of it
  int min_length = 0;  // fewest positions a chunk; 0: min_chunk
  /// [T * Hq] arrivals, zero between launches (attention_merge::fused: the
  /// split kernel's last block of an item merges it); null: a merge kernel
  /// follows.
  unsigned* counters = nullptr;
  /// A row with one used chunk (used_chunks) has its output written by that
  /// chunk's block, (0 + acc) / l: the merges' bits for one partial
  /// (attend_merge_math.cuh: weight 2^0 = 1, sums of one term and zeros),
  /// and the merge kernels skip it; under the fused merge (`counters`) its
  /// block neither writes a partial nor arrives, so no merge runs for it.
  /// Set by the walks that do so (the mma walk).
  bool single_direct = false;
};

/// Positions per chunk of a row with `positions` positions: an equal share,
/// at least min_chunk, rounded up to whole block steps (the tiled walk's
/// tiles). Chunks at or past ceil(positions / chunk) are empty. The attend
/// and merge kernels call this with the same arguments, so they agree on
/// which partials exist.
__device__ __forceinline__ int chunk_length(int positions, const split_args& s) {
  const int share = max(ceil_div(positions, s.splits), s.min_length > 0 ? s.min_length : min_chunk);
  return ceil_div(share, s.step) * s.step;
}

/// Partials a row writes (0 for a row without positions).
__device__ __forceinline__ int used_chunks(int positions, const split_args& s) {
  return positions > 0 ? ceil_div(positions, chunk_length(positions, s)) : 0;
}

/// Whether a row of `positions` positions takes single_direct: one used
/// chunk, written by its block.
__device__ __forceinline__ bool written_directly(int positions, const split_args& s) {
  return s.single_direct && used_chunks(positions, s) == 1;
}

}  // namespace mstar::kernels::cuda::detail
