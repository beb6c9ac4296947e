#pragma once

// The second K/V walk of the fast paged-attention kernels: tiles of K and V
// gathered with 16-byte cp.async into `Stages` shared-memory stages, Stages
// - 1 tiles in flight while one is consumed (attend.cuh's walk keeps one
// step in flight in registers). Also what the kernels instantiate per walk:
// their shared memory (`block_smem`), the walk itself (`walk_block`) and
// their register caps (`fast_min_blocks`). Stages == 0 names the register
// walk. bench/decode_attention_trace.py replays the indexing and the
// pipeline's order on the host.

#include "kernels/cuda/internal/attend.cuh"
#include "kernels/cuda/internal/cp_async.cuh"

namespace mstar::kernels::cuda::detail {

/// A tile is `layout::step` consecutive positions of one kv head, K then V,
/// each position's head vector contiguous: 4 KiB per half for every fast
/// (KV, D) (static_assert below), so every thread copies `per_thread`
/// 16-byte pieces of K and the same pieces of V (the same positions: one
/// page id serves both). With 4 stages, 4 blocks of an SM keep 96 KiB of K/V
/// reads in flight (Little's law at ~4 TB/s and ~1 us of DRAM latency asks
/// ~30 KiB); with 2, one tile ahead as the register walk, through shared
/// memory.
template <class KV, int D>
struct tile {
  static constexpr int positions = layout<KV, D>::step;
  static constexpr int head_bytes = D * static_cast<int>(sizeof(KV));
  static constexpr int pieces = head_bytes / 16;  // 16-byte pieces per head vector
  static constexpr int half_pieces = positions * pieces;
  static constexpr int per_thread = half_pieces / layout<KV, D>::threads;
  static_assert(positions * head_bytes == 4096, "every fast layout reads 4 KiB per tile half");
  static_assert(per_thread * layout<KV, D>::threads == half_pieces);
};

/// Shared memory of one fast block: the tile stages while walking, every
/// slot's softmax state while merging (the tiled walk ends on a barrier).
/// 8 KiB a stage; the merge takes GC * 4 KiB.
template <class KV, int D, int GC, int Stages>
union block_smem {
  uint4 stage[Stages][2][tile<KV, D>::half_pieces];  // [stage][K, V][pos * pieces + piece]
  slot_scratch<KV, D, GC> merge;
};

/// The register walk's: the merge scratch alone.
template <class KV, int D, int GC>
union block_smem<KV, D, GC, 0> {
  slot_scratch<KV, D, GC> merge;
};

/// Resident blocks per SM the fast kernels are compiled for (their
/// __launch_bounds__), by query heads a block (GC) and walk. The register
/// walk keeps main's caps: none (0) for the one-pass kernel, whose
/// `__launch_bounds__(128)` ptxas fits in 128 registers at four heads (with
/// a minimum of 1 it takes 148: 3 blocks an SM), 4 / 5 / 7 for the split
/// one (uncapped, its chunk bookkeeping took the four-head kernel to 141
/// registers). Four stages: 4 / 5 / 6 for both (32 KiB of stages allow 6
/// blocks an SM). Two stages (16 KiB): 4 / 5 / 7 for both.
template <bool Split, int GC, int Stages>
inline constexpr int fast_min_blocks =
    Stages == 0 && !Split ? 0 : (GC == 4 ? 4 : (GC == 2 ? 5 : (Stages == 4 ? 6 : 7)));

/// Page ids of this thread's pieces of the tile starting at `t0` (0 for a
/// position at or past `end`: not read).
template <class KV, int D>
__device__ __forceinline__ void tile_pages(const attn_args& a, int first_page, int t0, int end,
                                           std::int32_t (&page)[tile<KV, D>::per_thread]) {
  using T = tile<KV, D>;
#pragma unroll
  for (int j = 0; j < T::per_thread; ++j) {
    const int t = t0 + (static_cast<int>(threadIdx.x) + j * layout<KV, D>::threads) / T::pieces;
    page[j] = t < end ? load_coherent(a.table.kv_indices + first_page + t / a.arena.page_size) : 0;
  }
}

/// Starts this thread's copies of the tile at `t0` into `stage` (K and V of
/// the pieces' positions, whose page ids are `page`); positions at or past
/// `end` are zero-filled without a read.
template <class KV, int D>
__device__ __forceinline__ void tile_issue(const attn_args& a, int kvh, int t0, int end,
                                           const std::int32_t (&page)[tile<KV, D>::per_thread],
                                           uint4 (&stage)[2][tile<KV, D>::half_pieces]) {
  using T = tile<KV, D>;
#pragma unroll
  for (int j = 0; j < T::per_thread; ++j) {
    const int idx = static_cast<int>(threadIdx.x) + j * layout<KV, D>::threads;
    const int t = t0 + idx / T::pieces;
    const int bytes = t < end ? 16 : 0;
    const int slot = t < end ? t % a.arena.page_size : 0;
    const int piece = idx % T::pieces;
    const auto* kp = reinterpret_cast<const uint4*>(a.arena.at(0, page[j], slot, kvh)) + piece;
    const auto* vp = reinterpret_cast<const uint4*>(a.arena.at(1, page[j], slot, kvh)) + piece;
    cp_async16(smem_addr(&stage[0][idx]), kp, bytes);
    cp_async16(smem_addr(&stage[1][idx]), vp, bytes);
  }
}

/// The register walk's contract (attend.cuh's `walk`) through the tile
/// pipeline; `begin` must be a multiple of the tile. The block walks [begin,
/// end) a tile at a time (tiles n + 1 .. n + Stages - 1 in flight while
/// tile n is consumed, each thread's page ids read one tile ahead of their
/// copies), slot s taking positions s * unroll .. s * unroll + unroll - 1 of
/// each tile: the positions the register walk gives it. Every thread of the
/// block must call it; it ends on a barrier, so `smem` is free for
/// merge_slots on return.
template <class KV, int D, int GC, int Stages>
__device__ __forceinline__ void walk_tiles(const attn_args& a, block_smem<KV, D, GC, Stages>& smem,
                                           int first_page, int kvh, int lane, int slot, int begin,
                                           int end, const float (&q)[GC][layout<KV, D>::elems],
                                           float (&acc)[GC][layout<KV, D>::elems], float (&m)[GC],
                                           float (&l)[GC]) {
  using L = layout<KV, D>;
  using T = tile<KV, D>;
  constexpr int U = L::unroll;
  constexpr int S = Stages;
  static_assert(S >= 2);
#pragma unroll
  for (int g = 0; g < GC; ++g) {
#pragma unroll
    for (int e = 0; e < L::elems; ++e)
      acc[g][e] = 0.0F;
    m[g] = -INFINITY;
    l[g] = 0.0F;
  }
  const int tiles = ceil_div(end - begin, T::positions);
  // Prologue: tiles 0 .. S - 2, their page ids read together (a short
  // chunk's whole range), one commit group each (empty past the end, so the
  // wait below counts groups the same way for every range).
  std::int32_t first[S - 1][T::per_thread];
#pragma unroll
  for (int k = 0; k < S - 1; ++k)
    tile_pages<KV, D>(a, first_page, begin + k * T::positions, end, first[k]);
#pragma unroll
  for (int k = 0; k < S - 1; ++k) {
    if (k < tiles)
      tile_issue<KV, D>(a, kvh, begin + k * T::positions, end, first[k], smem.stage[k]);
    cp_async_commit();
  }
  // `page` holds the ids of tile `next`, the next one to issue: read a
  // tile ahead of its copies.
  int next = S - 1;
  std::int32_t page[T::per_thread];
  tile_pages<KV, D>(a, first_page, begin + next * T::positions, end, page);
  for (int n = 0; n < tiles; ++n) {
    cp_async_wait<S - 2>();  // this thread's copies of tile n have landed
    // Everyone's copies of tile n are visible, and everyone is done with
    // tile n - 1, whose stage the next issue overwrites.
    __syncthreads();
    if (next < tiles) {
      tile_issue<KV, D>(a, kvh, begin + next * T::positions, end, page, smem.stage[next % S]);
      ++next;
      tile_pages<KV, D>(a, first_page, begin + next * T::positions, end, page);
    }
    cp_async_commit();
    const uint4(&st)[2][T::half_pieces] = smem.stage[n % S];
    uint4 kcur[U][L::vecs];
    uint4 vcur[U][L::vecs];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int j = 0; j < L::vecs; ++j) {
        const int at = (slot * U + u) * T::pieces + lane * L::vecs + j;
        kcur[u][j] = st[0][at];
        vcur[u][j] = st[1][at];
      }
    }
    consume<KV, D, GC, U>(q, acc, m, l, kcur, vcur, begin + n * T::positions + slot * U, end);
  }
  cp_async_wait<0>();  // only empty groups remain; keeps the invariant plain
  __syncthreads();     // every thread is done with the stages
}

/// The block's walk over [begin, end) for its kernel's walk: registers
/// (Stages 0) or the tile pipeline. Same contract as attend.cuh's `walk`;
/// every thread of the block must call it.
template <class KV, int D, int GC, int Stages>
__device__ __forceinline__ void walk_block(const attn_args& a, block_smem<KV, D, GC, Stages>& smem,
                                           int first_page, int kvh, int lane, int slot, int begin,
                                           int end, const float (&q)[GC][layout<KV, D>::elems],
                                           float (&acc)[GC][layout<KV, D>::elems], float (&m)[GC],
                                           float (&l)[GC]) {
  if constexpr (Stages == 0)
    walk<KV, D, GC>(a, first_page, kvh, lane, slot, begin, end, q, acc, m, l);
  else
    walk_tiles<KV, D, GC, Stages>(a, smem, first_page, kvh, lane, slot, begin, end, q, acc, m, l);
}

}  // namespace mstar::kernels::cuda::detail
