// The wgmma prefill attention with a lean consumer
// (`attention_prefill::wgmma_lean`, MSTAR_ATTN_PREFILL=wgmma_lean; sm_90a,
// head_dim 64 / 128 on a compute 9.0 device, pages of a power-of-two size
// and under 2 GiB; other steps take `wgmma`). Items, block shape, stages
// and schedule are `wgmma`'s (attention_prefill_wgmma.cu: two warpgroups,
// three K / V stages, one barrier a tile, each tile's P V left in flight
// under the next tile's S); the per-tile work is cut down:
//   - the consumer (internal/prefill_wgmma_lean.cuh): descriptors added to,
//     not rebuilt; S's first step writes its accumulators; row sums on the
//     tensor cores (P against a block of ones); lazy rescale; masks only in
//     warps whose rows reach into the tile;
//   - the gather: a thread copies one 16-byte chunk of every `step`-th
//     position of a tile (step = 256 / (D / 8): 16 at D 128, 32 at D 64).
//     With pages of 16 positions (`Ps` 16, the common size, a compile-time
//     constant) a tile covers 8 fixed page slots and the thread's place in
//     a page is the same for every position it copies, so it is folded
//     into the thread's K and V bases once per item, and each copy is one
//     block-table load (a constant offset from the tile's first slot) and
//     one multiply-add a tensor; other power-of-two page sizes (`Ps` 0)
//     take slot and place from shift and mask. Position checks are only in the tile
//     that reaches the row's end (`Edge`).
// Shared memory: `wgmma`'s three-stage layout, then a 1,024-byte atom of
// bf16 ones (written once, read by the row-sum wgmmas).
// bench/attention_prefill_wgmma_lean_trace.py replays the gather, the
// descriptors, the ones, the lazy softmax and the buffer reuse on the host.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/internal/attend_prefill.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"
#include "kernels/cuda/internal/prefill_wgmma.cuh"
#include "kernels/cuda/internal/prefill_wgmma_lean.cuh"
#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

template <int D>
struct lean_shape {
  using S = wg_shape<D, true>;
  static constexpr int step = wg_threads / S::chunks;  // positions between a thread's copies
  static constexpr std::size_t smem_bytes = S::smem_bytes + 1024;  // + the ones atom
};

// One thread's part of the gather of one item: its K and V bases (page 0,
// its chunk, its place in a page where `Ps` > 0), the row's page slots, the
// arena's page stride (fits 32 bits: the host checks) and the first
// position it copies in a tile, less t0.
struct lean_gather {
  const std::byte* k_base;
  const std::byte* v_base;
  const std::int32_t* pages;
  std::uint32_t page_bytes;
  std::uint32_t token_bytes;
  int row0;
};

// Starts the copy of the thread's positions t0 + row0 + i step of one K /
// V tile into the stage at dk / dv (`soff`: its first chunk's swizzled
// offset; step is a multiple of 8, so each next one is step rows on).
// `Edge`: positions at or past `length` are zero-filled.
template <int D, int Ps, bool Edge>
__device__ __forceinline__ void load_tile_lean(const lean_gather& g, int lps, int t0, int length,
                                               std::uint32_t dk, std::uint32_t dv,
                                               std::uint32_t soff) {
  using L = lean_shape<D>;
  constexpr int step = L::step;
  const int pos0 = t0 + g.row0;
  // Ps > 0: pages of Ps <= step positions (lps = log2 Ps), the place in
  // the page folded into the bases, page slots step / Ps apart.
  static_assert(Ps == 0 || (Ps <= step && step % Ps == 0));
  const std::int32_t* slot = g.pages + (pos0 >> lps);
#pragma unroll
  for (int i = 0; i < L::S::bn / step; ++i) {
    const int pos = pos0 + i * step;
    const std::byte* ks = g.k_base;
    const std::byte* vs = g.v_base;
    int bytes = 16;
    if (!Edge || pos < length) {
      std::uint32_t page;
      std::uint32_t in_page = 0;
      if constexpr (Ps > 0) {
        page = static_cast<std::uint32_t>(slot[i * (step / Ps)]);
      } else {
        page = static_cast<std::uint32_t>(g.pages[pos >> lps]);
        in_page = static_cast<std::uint32_t>(pos & ((1 << lps) - 1)) * g.token_bytes;
      }
      const std::uint64_t off = static_cast<std::uint64_t>(page) * g.page_bytes + in_page;
      ks += off;
      vs += off;
    } else {
      bytes = 0;
    }
    const std::uint32_t at = soff + static_cast<std::uint32_t>(i * step * 128);
    cp_async16(dk + at, ks, bytes);
    cp_async16(dv + at, vs, bytes);
  }
}

template <int D, int Ps>
__device__ __forceinline__ void load_tile_lean_any(const lean_gather& g, int lps, int t0,
                                                   int length, std::uint32_t dk, std::uint32_t dv,
                                                   std::uint32_t soff) {
  constexpr int bn = lean_shape<D>::S::bn;
  if (t0 + bn <= length)
    load_tile_lean<D, Ps, false>(g, lps, t0, length, dk, dv, soff);
  else
    load_tile_lean<D, Ps, true>(g, lps, t0, length, dk, dv, soff);
}

template <int D, int Ps>
__global__ void __launch_bounds__(wg_threads, 1) attend_prefill_wgmma_lean(attn_args a, int lps) {
  using L = lean_shape<D>;
  using S = typename L::S;
  constexpr int bn = S::bn;
  constexpr int tile_m = S::tile_m;
  extern __shared__ uint4 wg_smem[];
  const std::uint32_t raw = smem_addr(wg_smem);
  const std::uint32_t base = (raw + 1023U) & ~1023U;  // swizzle atoms 1,024-byte aligned
  std::byte* const sq = reinterpret_cast<std::byte*>(wg_smem) + (base - raw);
  const std::uint32_t k0 = base + S::q_bytes;             // K tiles: k0 + i kv_bytes
  const std::uint32_t v0 = k0 + S::stages * S::kv_bytes;  // V tiles: v0 + i kv_bytes
  const std::uint32_t ones = v0 + S::stages * S::kv_bytes;
  const int tid = static_cast<int>(threadIdx.x);
  // Through a shuffle from lane 0, so the compiler sees them warp-uniform
  // and keeps the descriptors built from them in uniform registers.
  const int wg = __shfl_sync(0xffffffffU, tid / 128, 0);
  const int warp = __shfl_sync(0xffffffffU, tid / 32 % 4, 0);  // in the warpgroup
  // The ones atom (bf16 1.0 = 0x3F80), published by the first tile's
  // barrier behind this thread's proxy fence.
  reinterpret_cast<std::uint32_t*>(sq + (ones - base))[tid] = 0x3F803F80U;
  const lean_descs dd = lean_descs_of<D>(base + wg * S::group_m * 128, k0, v0, ones);
  const int row0 = tid / S::chunks;
  const int chunk = tid % S::chunks;
  const std::uint32_t soff = swizzled<bn>(row0, chunk);
  const std::uint32_t in_page =
      Ps > 0 ? static_cast<std::uint32_t>((row0 & (Ps - 1)) * a.arena.token_bytes) : 0U;
  const int rows = a.table.rows;
  const long long tiles = tile_base<tile_m>(a.table.qo, rows, a.group);
  const long long total = tiles * a.kv_heads;
  const float scale = fabsf(a.scale_log2);
  for (long long item = blockIdx.x; item < total; item += gridDim.x) {
    // Block-uniform: every `continue` and barrier below is taken by all.
    prefill_item it;
    if (!prefill_item_of<tile_m>(a, tiles, item, it))
      continue;  // the row's spare tile, or a row without pages for its tokens
    const int kvh = it.kvh;
    const row_info& ri = it.ri;
    const int m_rows = it.m_rows;
    const int f0 = it.f0;
    const int fg = f0 + wg * S::group_m;  // the warpgroup's first M row
    const row_place place{ri.length - ri.new_tokens, m_rows, a.group, fg + warp * 16};
    const int n_kt = place.pos_of(f0 + tile_m - 1) / bn + 1;
    const std::byte* k_base = a.arena.at(0, 0, 0, kvh) + chunk * 16 + in_page;
    const lean_gather g{k_base,
                        k_base + a.arena.half_bytes,
                        a.table.kv_indices + ri.first_page,
                        static_cast<std::uint32_t>(a.arena.page_bytes),
                        static_cast<std::uint32_t>(a.arena.token_bytes),
                        row0};

    // The previous item ended at a barrier after its last wgmma wait: every
    // buffer is free.
    load_tile_lean_any<D, Ps>(g, lps, 0, ri.length, k0, v0, soff);
    cp_async_commit();
    stage_q_wg<D, tile_m, wg_threads>(a, ri, kvh, f0, m_rows, sq, 0, tid);

    // The warpgroup attends tiles up to its last row's position; none if it
    // has no valid M row. Uniform over the warpgroup. A warp masks the
    // tiles reaching past its first row's position.
    const int wmin = place.pos_of(place.fw);
    const int gmax = fg < m_rows ? place.pos_of(fg + S::group_m - 1) : -1;
    lean_rows<D> w;
    w.start();
    for (int kt = 0; kt < n_kt; ++kt) {
      const std::uint32_t buf = static_cast<std::uint32_t>(kt % S::stages) * S::kv_bytes;
      const std::uint32_t next = static_cast<std::uint32_t>((kt + 1) % S::stages) * S::kv_bytes;
      cp_async_wait<0>();          // this thread's copies of tile kt (the only ones in flight)
      fence_proxy_async_shared();  // its copies, Q and ones stores, to the wgmma's async proxy
      // Tile kt (and Q) visible to every warpgroup, and every warpgroup has
      // waited out its wgmmas on tile kt - 2 (tile kt - 1's P V may still
      // run): buffer `next` is free.
      __syncthreads();
      if (kt + 1 < n_kt) {
        load_tile_lean_any<D, Ps>(g, lps, (kt + 1) * bn, ri.length, k0 + next, v0 + next, soff);
        cp_async_commit();
      }
      const int t0 = kt * bn;
      if (t0 <= gmax) {
        attend_tile_lean<D>(dd, buf, t0, t0 + bn - 1 > wmin, place, scale, w);
      } else {
        // Done before the other warpgroup: the last P V must finish before
        // the next barrier hands its buffer to tile kt + 2.
        wgmma_wait<0>();
        w.settle();
      }
    }
    wgmma_wait<0>();  // the last P V
    w.settle();
    if (place.fw < m_rows)
      store_rows_lean<D>(a, ri, kvh, place.fw, m_rows, w);
    __syncthreads();  // every warpgroup done with Q and the last K / V tile
  }
}

template <int D, int Ps>
cudaError_t launch_lean_d(const attn_args& a, int lps, std::int64_t token_bound,
                          cudaStream_t stream) {
  using L = lean_shape<D>;
  if (const cudaError_t err = raise_smem_limit<attend_prefill_wgmma_lean<D, Ps>>(L::smem_bytes);
      err != cudaSuccess)
    return err;
  // Items bound as `wgmma`'s; blocks past the device-side count exit at
  // once, the rest stride.
  const std::int64_t items = (token_bound * a.group / L::S::tile_m + a.table.rows + 1) * a.kv_heads;
  const unsigned grid = grid_of(items, std::int64_t{sm_count()} * 32);
  attend_prefill_wgmma_lean<D, Ps><<<grid, wg_threads, L::smem_bytes, stream>>>(a, lps);
  return launch_status();
}

// log2 of a power of two, else -1.
int log2_exact(std::int64_t x) {
  if (x <= 0 || (x & (x - 1)) != 0)
    return -1;
  int n = 0;
  while ((std::int64_t{1} << n) < x)
    ++n;
  return n;
}

}  // namespace

bool prefill_wgmma_lean_takes(const paged_attention_params& p) {
  const kv_geometry& g = p.arena.geometry;
  if (!prefill_wgmma_takes(p) || log2_exact(g.page_size) < 0)
    return false;
  arena_args ar{};
  return to_arena_args(p.arena, p.layer, ar) && ar.page_bytes < (std::size_t{1} << 31);
}

cudaError_t launch_prefill_wgmma_lean(const attn_args& a, int head_dim, std::int64_t token_bound,
                                      cudaStream_t stream) {
  const int lps = log2_exact(a.arena.page_size);
  if (lps < 0)
    return cudaErrorInvalidValue;
  switch (head_dim) {
    case 64:
      return a.arena.page_size == 16 ? launch_lean_d<64, 16>(a, lps, token_bound, stream)
                                     : launch_lean_d<64, 0>(a, lps, token_bound, stream);
    case 128:
      return a.arena.page_size == 16 ? launch_lean_d<128, 16>(a, lps, token_bound, stream)
                                     : launch_lean_d<128, 0>(a, lps, token_bound, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace mstar::kernels::cuda::detail
