// The wgmma prefill attention with warp specialisation
// (`attention_prefill::wgmma_ws` / `wgmma_ws_pp`, MSTAR_ATTN_PREFILL=wgmma_ws
// / wgmma_ws_pp; sm_90a, head_dim 64 / 128 on a compute 9.0 device, as
// attention_prefill_wgmma.cu). Items, masks, layouts and the consumer's
// per-tile math are that kernel's (internal/prefill_wgmma.cuh); what
// changes is who copies, how the stages are handed over, and the order of
// the wgmmas.
//
// A block is three warpgroups: 0 and 1 consume (64 M rows each, as before),
// 2 produces. The producer gives up registers (setmaxnreg down to 40 a
// thread) so the consumers can take 232 (the block launches with 168 a
// thread). The grid is persistent (a block an SM) and each block's items
// form one stream: the producer gathers every K / V tile of them in order
// into `stages` (3) swizzled stages, 128 threads x cp.async 16 bytes (a
// warp reads a tile's page indices once and shuffles them out), never
// waiting on the consumers' softmax, only for a stage to come free, so the
// next item's first tiles load under the current one's last. Per stage two
// mbarriers:
//   full[s]  (128 arrivals: each producer thread, once its own copies of
//            the tile have landed and it has fenced them to the async proxy:
//            the writer-fences-then-publishes order of the block-barrier
//            kernel);
//   empty[s] (8 arrivals: each consumer warp, once every wgmma that read the
//            stage is complete).
// Tile number `it` (counted over the block's items) sits in stage it %
// stages; the n-th use of a stage (n = it / stages) waits full's phase of
// parity n & 1, and the producer, before refilling it, empty's phase of
// parity (n - 1) & 1. The producer publishes tile it only after issuing
// tile it + 1 (one cp.async group in flight behind the one it waits), so
// a copy's latency overlaps the next one's issue.
//
// Consumers overlap the softmax with the tensor cores inside a warpgroup
// (FlashAttention-3's order): for tile j it issues S(j), then P V of tile
// j - 1 behind it, waits S(j) alone (wgmma_wait<1>), runs the softmax of j
// while P V(j - 1) runs, then waits that (freeing tile j - 1's stage),
// rescales O and packs P(j) for the next round; the warpgroup's last tile
// issues its P V at once and waits it. Registers: S / P (64), O (64) and
// P(j - 1) (32) live together, as in `wgmma`. A warpgroup whose rows all
// lie before a tile (the causal tail of warpgroup 0) waits the tile's full
// phase and frees it unread at once, so every phase gets its 8 arrivals in
// order. Fully masked tiles past the item's last row are never copied;
// only tiles reaching past a warpgroup's first row mask. Each consumer
// warpgroup writes its own 64 Q rows (named barrier 1 + warpgroup around
// it: the previous item's wgmmas done before, the rows visible after).
// `wgmma_ws` lets the two consumers issue whenever they are ready;
// `wgmma_ws_pp` makes them take turns (ping-pong on named barriers 3 and 4,
// see ws_consume), so one's softmax runs under the other's GEMMs rather
// than both contending at once. bench/attention_prefill_wgmma_ws_trace.py
// replays the protocol.

#include <algorithm>
#include <cmath>

#include "kernels/cuda/internal/attend_prefill.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/mbarrier.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"
#include "kernels/cuda/internal/prefill_wgmma.cuh"
#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

constexpr int ws_threads = wg_threads + 128;  // two consumer warpgroups, one producer
constexpr int ws_consumer_warps = wg_threads / 32;
constexpr int ws_producer_regs = 40;
constexpr int ws_consumer_regs = 232;
// setmaxnreg.inc takes only what .dec gave back: the block launches with 168
// a thread (65,536 / 384, to a multiple of 8) and the consumers' raise must
// fit in what the producer frees (128 x 40 + 256 x 232 = 384 x 168).
// ptxas spills nothing at 40 / 232; at 24 / 240 the producer spilled (D
// 128: 36 bytes stored, 68 loaded), at 56 / 224 the consumers.
constexpr int ws_launch_regs = 168;
static_assert(128 * ws_producer_regs + wg_threads * ws_consumer_regs <= ws_threads * ws_launch_regs,
              "the registers the block launched with");

// Shared memory: wgmma's three-stage layout, then full[stages] and
// empty[stages] (8 bytes each).
template <int D>
struct ws_shape {
  using S = wg_shape<D, true>;
  static constexpr std::size_t smem_bytes = S::smem_bytes + 16 * S::stages;
  static_assert(smem_bytes <= 227 * 1024, "one block an SM");
};

// One item of the block-uniform walk, as both roles see it.
struct ws_item {
  int kvh;
  int f0;  // first M row of the item in its row
  int m_rows;
  int n_kt;  // K / V tiles up to the item's last row
  row_info ri;
};

// The block's n-th item on the persistent grid (a block an SM): rounds of
// gridDim.x items, every other round dealt to the blocks in reverse, so the
// heaviest-first items even out (block 0 takes the heaviest of even rounds
// and the lightest of odd ones). Producer and consumers walk the same list.
__device__ __forceinline__ long long ws_nth_item(long long n) {
  const long long g = gridDim.x;
  return n * g + (n % 2 == 0 ? blockIdx.x : g - 1 - blockIdx.x);
}

// The item numbered `item` (block-uniform), or false for one with nothing
// to do (past the last, a row's spare tile, a row without pages for its
// tokens).
template <int D>
__device__ __forceinline__ bool ws_item_at(const attn_args& a, long long tiles, long long item,
                                           long long total, ws_item& it) {
  using S = wg_shape<D, true>;
  if (item >= total)
    return false;
  const int rows = a.table.rows;
  it.kvh = static_cast<int>(item % a.kv_heads);
  const long long k = tiles - 1 - item / a.kv_heads;  // heaviest first
  const int r = row_of_tile<S::tile_m>(a.table.qo, rows, a.group, k);
  it.ri = row_at(a.table, a.arena.page_size, r);
  it.m_rows = it.ri.new_tokens * a.group;
  it.f0 = static_cast<int>(k - tile_base<S::tile_m>(a.table.qo, r, a.group)) * S::tile_m;
  if (it.f0 >= it.m_rows || it.ri.length < it.ri.new_tokens)
    return false;
  const row_place place{it.ri.length - it.ri.new_tokens, it.m_rows, a.group, it.f0};
  it.n_kt = place.pos_of(it.f0 + S::tile_m - 1) / S::bn + 1;
  return true;
}

// The producer's copy of one tile (load_kv_tile_wg's thread-to-chunk map,
// 128 threads): each warp reads the tile's page indices once, lane j that
// of page slot t0 / ps + j (one coalesced load), and hands them out by
// shuffles, instead of a dependent load per position and thread that a
// producer at 24 registers could not keep in flight. A tile spanning more
// than 32 page slots (pages under 5 positions) reads them per position.
template <int D>
__device__ __forceinline__ void load_kv_tile_ws(const attn_args& a, const row_info& ri, int kvh,
                                                int t0, std::uint32_t dk, std::uint32_t dv,
                                                int tid) {
  using S = wg_shape<D, true>;
  constexpr int step = 128 / S::chunks;  // positions between a thread's chunks
  const int ps = a.arena.page_size;
  const int slot0 = t0 / ps;
  if ((t0 + S::bn - 1) / ps - slot0 >= 32) {  // uniform over the launch's tiles of a row
    load_kv_tile_wg<D, 128>(a, ri, kvh, t0, dk, dv, tid);
    return;
  }
  const int lane = tid % 32;
  std::int32_t lane_page = 0;
  if ((slot0 + lane) * ps < ri.length)  // slots holding a position of the row
    lane_page = a.table.kv_indices[ri.first_page + slot0 + lane];
  const int row0 = tid / S::chunks;
  const int chunk = tid % S::chunks;
  int page_slot = (t0 + row0) / ps - slot0;  // relative to slot0
  int in_page = (t0 + row0) % ps;
  const std::byte* head = a.arena.at(0, 0, 0, kvh) + chunk * 16;  // K at page 0, slot 0
#pragma unroll
  for (int i = 0; i < S::bn / step; ++i) {
    const int row = row0 + i * step;
    const std::int32_t page = __shfl_sync(0xffffffffU, lane_page, page_slot & 31);
    const std::byte* ks = a.arena.base;
    const std::byte* vs = a.arena.base;
    int bytes = 0;
    if (t0 + row < ri.length) {
      ks = head + static_cast<std::size_t>(page) * a.arena.page_bytes +
           static_cast<std::size_t>(in_page) * a.arena.token_bytes;  // arena.at(0, ...)
      vs = ks + a.arena.half_bytes;                                  // arena.at(1, ...)
      bytes = 16;
    }
    const std::uint32_t off = swizzled<S::bn>(row, chunk);
    cp_async16(dk + off, ks, bytes);
    cp_async16(dv + off, vs, bytes);
    next_slot(page_slot, in_page, step, ps);
  }
}

// The producer warpgroup: every tile of every item of the block into the
// stage ring. `tid`: 0 .. 127.
template <int D>
__device__ void ws_produce(const attn_args& a, long long tiles, std::uint32_t k0, std::uint32_t v0,
                           std::uint32_t full0, std::uint32_t empty0, int tid) {
  using S = wg_shape<D, true>;
  const long long total = tiles * a.kv_heads;
  int it = 0;                 // tiles issued so far
  std::uint32_t pending = 0;  // full barrier of the tile issued last, unpublished
  for (long long n = 0; n * gridDim.x < total; ++n) {
    ws_item w{};
    if (!ws_item_at<D>(a, tiles, ws_nth_item(n), total, w))
      continue;
    for (int kt = 0; kt < w.n_kt; ++kt, ++it) {
      const int stage = it % S::stages;
      const int use = it / S::stages;
      if (use > 0)
        mbar_wait(empty0 + 8 * stage, static_cast<std::uint32_t>(use - 1) & 1U);
      const std::uint32_t off = static_cast<std::uint32_t>(stage) * S::kv_bytes;
      load_kv_tile_ws<D>(a, w.ri, w.kvh, kt * S::bn, k0 + off, v0 + off, tid);
      cp_async_commit();
      if (pending != 0) {
        cp_async_wait<1>();  // the tile before this one has landed
        fence_proxy_async_shared();
        mbar_arrive(pending);
      }
      pending = full0 + 8 * stage;
    }
  }
  if (pending != 0) {
    cp_async_wait<0>();
    fence_proxy_async_shared();
    mbar_arrive(pending);
  }
}

// Named barriers: 1 + wg a consumer warpgroup's own (Q staging), 3 + wg
// its turn to issue (ping-pong).
constexpr int ws_turn_bar = 3;

// One consumer warpgroup (`wg` 0 or 1) over the block's items. `PingPong`:
// the two take turns issuing their tiles' wgmmas (warpgroup 0 first), so
// one's softmax tends to run under the other's GEMMs: before its issue a
// warpgroup syncs on its turn barrier (its 128 threads and the other's 128
// arrivals), after it arrives on the other's. Both take a turn on every
// tile of every item, skipped tiles too, so the counts pair up: warpgroup
// 1 arrives once ahead at the start, warpgroup 0 syncs once more at the
// end.
template <int D, bool PingPong>
__device__ void ws_consume(const attn_args& a, long long tiles, std::byte* sq, std::uint32_t base,
                           std::uint32_t k0, std::uint32_t v0, std::uint32_t full0,
                           std::uint32_t empty0, int wg) {
  using S = wg_shape<D, true>;
  constexpr int bn = S::bn;
  const int tid = static_cast<int>(threadIdx.x) % 128;
  const int warp = tid / 32;
  const bool leader = static_cast<int>(threadIdx.x) % 32 == 0;
  const std::uint32_t q_addr = base + wg * S::group_m * 128;  // the warpgroup's rows
  const long long total = tiles * a.kv_heads;
  const float scale = fabsf(a.scale_log2);
  // Each consumer warp frees a stage once its wgmmas on it are complete.
  const auto release = [&](int stage) {
    __syncwarp();
    mbar_arrive_if(empty0 + 8 * stage, leader);
  };
  const auto my_turn = [&] {
    if constexpr (PingPong)
      named_bar_sync(ws_turn_bar + wg, 256);
  };
  const auto your_turn = [&] {
    if constexpr (PingPong)
      named_bar_arrive(ws_turn_bar + 1 - wg, 256);
  };
  if (wg == 1)
    your_turn();  // warpgroup 0 goes first
  int it = 0;
  for (long long n = 0; n * gridDim.x < total; ++n) {
    ws_item w{};
    if (!ws_item_at<D>(a, tiles, ws_nth_item(n), total, w))
      continue;
    const int fg = w.f0 + wg * S::group_m;  // the warpgroup's first M row
    const row_place place{w.ri.length - w.ri.new_tokens, w.m_rows, a.group, fg + warp * 16};
    const int gmin = place.pos_of(fg);
    const int gmax = fg < w.m_rows ? place.pos_of(fg + S::group_m - 1) : -1;

    // The warpgroup's previous wgmmas are complete (waited at the last
    // item's end) in every warp before any overwrites its Q rows.
    named_bar_sync(1 + wg, 128);
    stage_q_wg<D, S::group_m, 128>(a, w.ri, w.kvh, w.f0, w.m_rows, sq, wg * S::group_m, tid);
    fence_proxy_async_shared();
    named_bar_sync(1 + wg, 128);

    group_rows<D> rows;
    rows.start();
    float sc[16][4];  // S of the tile being attended, then its P (f32)
    float alpha[2];
    // Tiles 0 .. last_kt are the warpgroup's (none when it has no rows);
    // tile kt of the item is the block's tile it + kt. One wgmma issue site
    // a role (S alone, S with the previous P V, the last P V) and no branch
    // inside the loop around them: with the first and last tiles as
    // branches inside one loop, ptxas serialised every wgmma (C7513, non
    // wgmma instructions defining their registers).
    const int last_kt = gmax < 0 ? -1 : min(w.n_kt - 1, gmax / bn);
    const auto stage_of = [&](int kt) { return (it + kt) % S::stages; };
    const auto wait_full = [&](int kt) {
      mbar_wait(full0 + 8 * stage_of(kt), static_cast<std::uint32_t>((it + kt) / S::stages) & 1U);
    };
    const auto k_at = [&](int kt) {
      return k0 + static_cast<std::uint32_t>(stage_of(kt)) * S::kv_bytes;
    };
    const auto v_at = [&](int kt) {
      return v0 + static_cast<std::uint32_t>(stage_of(kt)) * S::kv_bytes;
    };
    if (last_kt >= 0) {
      wait_full(0);  // tile 0: S alone (O is zero, nothing to rescale)
      my_turn();
      issue_s<D>(sc, q_addr, k_at(0));
      your_turn();
      wgmma_wait<0>();
      wgmma_pin(sc);
      softmax_wg<D>(sc, 0, bn - 1 > gmin, place, scale, rows, alpha);
      pack_p(sc, rows.pa);
      for (int kt = 1; kt <= last_kt; ++kt) {
        wait_full(kt);
        my_turn();
        // Tile kt - 1's P V behind this S (the fence in issue_s covers its
        // registers): the softmax of kt runs while it does.
        issue_s<D>(sc, q_addr, k_at(kt));
        issue_pv<D>(rows.o, rows.pa, v_at(kt - 1));
        wgmma_commit();
        your_turn();
        wgmma_wait<1>();  // S of kt
        wgmma_pin(sc);
        const int t0 = kt * bn;
        softmax_wg<D>(sc, t0, t0 + bn - 1 > gmin, place, scale, rows, alpha);
        wgmma_wait<0>();  // tile kt - 1's P V: O and P settled, its stage free
        rows.settle();
        release(stage_of(kt - 1));
        rescale_o<D>(rows.o, alpha);
        pack_p(sc, rows.pa);
      }
      wgmma_pin(rows.o);  // the last tile's P V
      wgmma_fence();
      issue_pv<D>(rows.o, rows.pa, v_at(last_kt));
      wgmma_commit();
      wgmma_wait<0>();
      rows.settle();
      release(stage_of(last_kt));
    }
    for (int kt = last_kt + 1; kt < w.n_kt; ++kt) {  // after its rows: free them unread
      wait_full(kt);
      release(stage_of(kt));
      my_turn();
      your_turn();
    }
    it += w.n_kt;
    if (place.fw < w.m_rows)
      store_rows_wg<D>(a, w.ri, w.kvh, place.fw, w.m_rows, rows);
  }
  if (wg == 0)
    my_turn();  // warpgroup 1's last arrival
}

template <int D, bool PingPong>
__global__ void __launch_bounds__(ws_threads, 1) attend_prefill_wgmma_ws(attn_args a) {
  using S = wg_shape<D, true>;
  extern __shared__ uint4 ws_smem[];
  const std::uint32_t raw = smem_addr(ws_smem);
  const std::uint32_t base = (raw + 1023U) & ~1023U;  // swizzle atoms 1,024-byte aligned
  std::byte* const sq = reinterpret_cast<std::byte*>(ws_smem) + (base - raw);
  const std::uint32_t k0 = base + S::q_bytes;             // K tiles: k0 + i kv_bytes
  const std::uint32_t v0 = k0 + S::stages * S::kv_bytes;  // V tiles: v0 + i kv_bytes
  const std::uint32_t full0 = v0 + S::stages * S::kv_bytes;
  const std::uint32_t empty0 = full0 + 8 * S::stages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::stages; ++s) {
      mbar_init(full0 + 8 * s, 128);
      mbar_init(empty0 + 8 * s, ws_consumer_warps);
    }
  }
  __syncthreads();  // the barriers initialised; the last block-wide barrier
  const long long tiles = tile_base<S::tile_m>(a.table.qo, a.table.rows, a.group);
  // Warp-uniform to the compiler (a shuffle from lane 0), so the role
  // branches and what derives from `wg` are no divergent paths to it
  // (wgmmas on a divergent path get serialised: ptxas C7520).
  const int wg = __shfl_sync(0xffffffffU, static_cast<int>(threadIdx.x) / 128, 0);
  if (wg == wg_groups) {
    setmaxnreg_dec<ws_producer_regs>();
    ws_produce<D>(a, tiles, k0, v0, full0, empty0, static_cast<int>(threadIdx.x) - wg_threads);
    return;
  }
  setmaxnreg_inc<ws_consumer_regs>();
  ws_consume<D, PingPong>(a, tiles, sq, base, k0, v0, full0, empty0, wg);
}

template <int D, bool PingPong>
cudaError_t launch_prefill_wgmma_ws_d(const attn_args& a, std::int64_t token_bound,
                                      cudaStream_t stream) {
  using S = wg_shape<D, true>;
  constexpr std::size_t smem = ws_shape<D>::smem_bytes;
  if (const cudaError_t err = raise_smem_limit<attend_prefill_wgmma_ws<D, PingPong>>(smem);
      err != cudaSuccess)
    return err;
  // Persistent: a block an SM (shared memory and registers allow no
  // second), fewer where the items' bound (as the other kernels') is
  // smaller; each block streams its items' tiles through one stage ring,
  // so the next item's first tiles load under the current one's last.
  const std::int64_t items = (token_bound * a.group / S::tile_m + a.table.rows + 1) * a.kv_heads;
  const unsigned grid = grid_of(items, sm_count());
  attend_prefill_wgmma_ws<D, PingPong><<<grid, ws_threads, smem, stream>>>(a);
  return launch_status();
}

}  // namespace

cudaError_t launch_prefill_wgmma_ws(const attn_args& a, int head_dim, bool ping_pong,
                                    std::int64_t token_bound, cudaStream_t stream) {
  return with_wg_shape(head_dim, ping_pong, [&]<int D, bool PingPong>() {
    return launch_prefill_wgmma_ws_d<D, PingPong>(a, token_bound, stream);
  });
}

}  // namespace mstar::kernels::cuda::detail
