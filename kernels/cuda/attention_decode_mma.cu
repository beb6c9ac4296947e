// Tensor-core decode attention (attention_walk::mma): decode steps on bf16
// arenas with head_dim 64, 128 or 256, one pass or split-KV (the split
// path's merge kernels read its partials, or its blocks merge them
// themselves: attention_merge::fused, attend_merge_math.cuh).
//
// Work item: (row, kv head, chunk of GC query heads of its group, split),
// a block of 4 warps each. The product is turned around so that positions
// fill the mma's M: S^T = K Q^T (A: 16 positions of K from shared memory,
// B: the heads' q, held in registers for the whole item) and O^T = V^T P^T
// (A: V transposed by ldmatrix.trans, B: P^T through a small per-warp
// shared tile). The n dimension (8 columns) holds the heads twice: q (and
// P) are split into a bf16 part and the bf16 rounding of what that part
// leaves over, so the sums keep ~16 mantissa bits where a bare bf16 q
// would keep 8 (the CUDA-core walks' f32 budget holds: 1e-4 normalised).
// Up to 4 heads: one n tile, columns 0-3 the high parts, 4-7 the low ones
// (a lane and its xor-2 partner hold a head's two parts); 8 heads: two n
// tiles. Groups of 1 to 3 are padded to 4, groups past 8 take chunks of 8.
//
// Each warp walks its own positions: 16-position tiles w, w + 4, w + 8, ...
// of the block's range [begin, end), gathered from the pages with 16-byte
// cp.async into `stages` per-warp shared stages (K and V, rows padded by 16
// bytes: conflict-free ldmatrix), stages - 1 tiles in flight while one is
// consumed. Lane l copies every other 16-byte piece of position l / 2 (one
// page id a lane per tile, read a tile ahead of its copies; lanes 2r, 2r + 1
// cover whole 32-byte sectors). No block barrier inside the walk: a warp
// waits only on its own copies (cp.async.wait_group, then __syncwarp). The
// online softmax runs on the S^T accumulators in f32 (exp2, scale folded
// into q; lane (g, q) holds positions g and g + 8 of two heads); the warps'
// states merge through shared memory (aliasing the stages) at the end.
//
// Shared memory a block: 4 warps x (stages x 16 x (D + 8) x 2 x 2 bytes +
// the P tile): 55 / 103 / 133 KiB at D 64 / 128 / 256 (3 / 3 / 2 stages),
// so 4 / 2 / 1 blocks an SM and 128 / 128 / 64 KiB of K/V reads in flight
// an SM.
//
// Bulk copies (by default where a launch has a block for every three SMs,
// `bulk_pays`; MSTAR_ATTN_MMA_BULK=0 / 1, set_attention_mma_bulk): a tile's
// 32 rows (16 positions of K and of V, D x 2 bytes each) gathered by one
// cp.async.bulk a lane, completing on the stage's mbarrier (one a warp a
// stage, static shared memory), so that the copies in flight are the
// bulk-copy unit's rather than 16 a lane in the load-store unit; a
// position past the end copies the range's last one
// (finite, weighed 0), as rows_mma does. The same bits: the same tiles in
// the same shared layout, consumed alike.
// bench/decode_attention_mma_trace.py replays the lanes on the host.

#include <algorithm>
#include <cmath>

#include "kernels/cuda/internal/attend_decode_mma.cuh"
#include "kernels/cuda/internal/attend_merge_math.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"
#include "kernels/cuda/internal/bulk_copy.cuh"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

constexpr int mma_warps = 4;
constexpr int mma_threads = mma_warps * 32;
constexpr int mma_tile = 16;  // positions a warp takes per step: the mma's M
static_assert(mma_warps * mma_tile == decode_mma_step);

// The fused merge (attention_merge::fused) with 64 floats of partials in
// flight a lane at D 128 (16 partials: a row of 64 partials in 4 rounds),
// 32 at D 64 (4 blocks an SM cap it at 128 registers) and 16 at D 256: the
// walk's registers are free by then.
template <int D>
__device__ __forceinline__ void mma_fused_merge(const attn_args& a, const split_args& s, int token,
                                                int positions, int h0, int heads) {
  constexpr int e = merge_elems<D>;
  fused_merge<D, e, D == 256 ? 4 : (D == 128 ? 16 : 32 / e)>(a, s, token, positions, h0, heads);
}

// Tile shape and shared memory of one block, in one place: per warp its
// stages (K then V, `stride` bf16 a row) and its P^T tile ([n tile][16
// positions][8 columns] bf16); after the walk the merge scratch overlays
// them.
template <int D, int GC>
struct mma_shape {
  static_assert(GC == 4 || GC == 8);
  static constexpr int stages = D == 256 ? 2 : 3;
  static constexpr int stride = D + 8;  // bf16 elements per shared row
  static constexpr int nt = GC / 4;     // n tiles: the GC heads' high and low parts
  static constexpr int kc = D / 16;     // k steps of S^T, m tiles of O^T
  static constexpr int half_elems = mma_tile * stride;
  static constexpr int stage_elems = 2 * half_elems;
  static constexpr int p_elems = nt * mma_tile * 8;
  static constexpr int warp_elems = stages * stage_elems + p_elems;
  static constexpr int pieces = D / 8;  // 16-byte pieces per head vector
  static constexpr int per_lane = pieces / 2;
  static constexpr std::size_t smem_bytes =
      static_cast<std::size_t>(mma_warps) * warp_elems * sizeof(std::uint16_t);
  // The bulk copies' barriers: one a warp a stage (static shared memory,
  // declared by the bulk kernels only).
  static constexpr int bars = mma_warps * stages;
};

// Blocks an SM a kernel's shared memory allows (228 KiB, 1 KiB reserved a
// block), its __launch_bounds__: 4 / 2 / 1 at D 64 / 128 / 256, 3 at D 64
// with 8 heads and the bulk copies' barriers.
template <int D, int GC, bool Bulk>
constexpr int mma_min_blocks() {
  using S = mma_shape<D, GC>;
  constexpr std::size_t bar_bytes = Bulk ? S::bars * sizeof(std::uint64_t) : 0;
  constexpr int cap = D == 64 ? 4 : (D == 128 ? 2 : 1);
  constexpr int by_smem = static_cast<int>(228 * 1024 / (S::smem_bytes + 1024 + bar_bytes));
  static_assert(by_smem >= 1);
  return cap < by_smem ? cap : by_smem;
}

// The warps' states while merging, over the stages.
template <int D, int GC>
struct merge_scratch {
  float acc[mma_warps][GC][D];
  float m[mma_warps][GC];
  float l[mma_warps][GC];
};

// One warp's state over an item. Lane (g = lane / 4, q = lane % 4) holds,
// of its S^T and O^T tiles, columns 2q, 2q + 1: heads 2 (q % (GC / 2)) and
// the one after (`m`, `l` index them 0 / 1); of n tile t, column c is the
// high part of head (8t + c) % GC when 8t + c < GC, else the low part.
template <int D, int GC>
struct warp_state {
  using S = mma_shape<D, GC>;
  std::uint32_t qb[S::kc][S::nt][2];  // Q^T B fragments, k step by n tile
  float o[S::kc][S::nt][4];           // O^T accumulators: dims 16i + g (+ 8), the lane's columns
  float m[2];                         // running maxima (exp2 domain)
  float l[2];                         // this lane's share of the running sums
};

// The lane's Q^T B fragments: column c of n tile t is head (8t + c) % GC
// (zeros past `valid`), high part below GC, low part from GC; b0 holds
// dims 16k + 2q, + 1 and b1 those + 8 (q scaled into the exp2 domain).
template <int D, int GC>
__device__ __forceinline__ void load_q_frags(const attn_args& a, int token, int h0, int valid,
                                             warp_state<D, GC>& w) {
  using S = mma_shape<D, GC>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int t = 0; t < S::nt; ++t) {
    const int col = t * 8 + lane / 4;
    const int head = col % GC;
    const bool low = col >= GC;
    const float* qp = a.q + (static_cast<std::size_t>(token) * a.q_heads + h0 + head) * D;
#pragma unroll
    for (int k = 0; k < S::kc; ++k) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float2 x = make_float2(0.0F, 0.0F);
        if (head < valid)
          x = *reinterpret_cast<const float2*>(qp + k * 16 + 2 * (lane % 4) + 8 * r);
        x.x *= a.scale_log2;
        x.y *= a.scale_log2;
        const std::uint32_t hi = pack_bf16(x.x, x.y);
        w.qb[k][t][r] = low ? bf16_rest(x.x, x.y, hi) : hi;
      }
    }
  }
}

// Starts the lane's copies of the tile at `t0` into `stage`: every other
// 16-byte piece (from lane % 2) of K and V at position t0 + lane / 2, whose
// page id is `page`; a position at or past `end` is zero-filled unread.
template <int D, int GC>
__device__ __forceinline__ void issue_tile(const attn_args& a, int kvh, int t0, int end,
                                           std::int32_t page, std::uint16_t* stage) {
  using S = mma_shape<D, GC>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = lane / 2;
  const int t = t0 + row;
  const bool ok = t < end;
  const std::byte* kp = a.arena.at(0, ok ? page : 0, ok ? t % a.arena.page_size : 0, kvh);
  const std::byte* vp = kp + a.arena.half_bytes;  // arena.at(1, ...)
  std::uint16_t* dk = stage + row * S::stride;
  std::uint16_t* dv = dk + S::half_elems;
  const int bytes = ok ? 16 : 0;
#pragma unroll
  for (int c = 0; c < S::per_lane; ++c) {
    const int piece = 2 * c + lane % 2;
    cp_async16(smem_addr(dk + piece * 8), kp + piece * 16, bytes);
    cp_async16(smem_addr(dv + piece * 8), vp + piece * 16, bytes);
  }
}

// The bulk form of issue_tile: lane l copies row l % 16 of K (l < 16) or V
// of the tile at `t0`, position min(t0 + l % 16, end - 1) (whose page id is
// `page`), D x 2 bytes, completing on `bar` (armed by lane 0 for all 32).
// The warp's reads of the stage came before (the __syncwarp before the
// call); the fence carries that order over to the copies.
template <int D, int GC>
__device__ __forceinline__ void issue_tile_bulk(const attn_args& a, int kvh, int t0, int end,
                                                std::int32_t page, std::uint16_t* stage,
                                                std::uint64_t* bar) {
  using S = mma_shape<D, GC>;
  constexpr std::uint32_t row_bytes = D * sizeof(std::uint16_t);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = lane % mma_tile;
  const bool v = lane >= mma_tile;
  const int t = min(t0 + row, end - 1);
  fence_proxy_async();
  if (lane == 0)
    mbar_arrive_expect(smem_addr(bar), 2U * mma_tile * row_bytes);
  __syncwarp();  // armed before any copy can complete on it
  bulk_copy(smem_addr(stage + (v ? S::half_elems : 0) + row * S::stride),
            a.arena.at(v ? 1 : 0, page, t % a.arena.page_size, kvh), row_bytes, smem_addr(bar));
}

// One tile of 16 positions from `t0` (K, V in `stage`) into the warp's
// state: S^T = K Q^T, the two parts of each head added, positions at or
// past `end` masked, the online softmax, P^T (high and low parts) through
// the warp's tile `pt`, O^T = O^T alpha + V^T P^T.
template <int D, int GC>
__device__ __forceinline__ void consume_tile(const std::uint16_t* stage, std::uint16_t* pt, int t0,
                                             int end, warp_state<D, GC>& w) {
  using S = mma_shape<D, GC>;
  constexpr int nt = S::nt;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4;
  const int qd = lane % 4;
  const std::uint32_t k_addr = smem_addr(stage);
  const std::uint32_t v_addr = smem_addr(stage + S::half_elems);
  float s[nt][4];
#pragma unroll
  for (int t = 0; t < nt; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s[t][e] = 0.0F;
  }
#pragma unroll
  for (int k = 0; k < S::kc; ++k) {
    std::uint32_t ka[4];
    ldmatrix_x4(ka, k_addr + 2U * static_cast<std::uint32_t>((lane % 16) * S::stride + k * 16 +
                                                             (lane / 16) * 8));
#pragma unroll
    for (int t = 0; t < nt; ++t)
      mma_bf16(s[t], ka, w.qb[k][t][0], w.qb[k][t][1]);
  }
  // p[e]: position g (e < 2) or g + 8, the lane's head e % 2.
  float p[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if constexpr (nt == 1)
      p[e] = s[0][e] + __shfl_xor_sync(0xffffffffU, s[0][e], 2);
    else
      p[e] = s[0][e] + s[1][e];
  }
  if (t0 + mma_tile > end) {  // warp-uniform: only a row's last tile pays
    if (t0 + g >= end)
      p[0] = p[1] = -INFINITY;
    if (t0 + g + 8 >= end)
      p[2] = p[3] = -INFINITY;
  }
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float top = fmaxf(p[h], p[h + 2]);
    top = fmaxf(top, __shfl_xor_sync(0xffffffffU, top, 4));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffU, top, 8));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffU, top, 16));
    const float mx = fmaxf(w.m[h], top);
    const float ref = mx == -INFINITY ? 0.0F : mx;  // nothing seen yet: keep zeros
    alpha[h] = exp2_ftz(w.m[h] - ref);
    w.m[h] = mx;
    p[h] = exp2_ftz(p[h] - ref);
    p[h + 2] = exp2_ftz(p[h + 2] - ref);
    w.l[h] = w.l[h] * alpha[h] + p[h] + p[h + 2];
  }
  // P^T tile: the lane's columns of each n tile at positions g and g + 8
  // (one 32-bit word each; a store's 32 words are distinct banks).
  auto* pt32 = reinterpret_cast<std::uint32_t*>(pt);
  const std::uint32_t hi0 = pack_bf16(p[0], p[1]);
  const std::uint32_t hi1 = pack_bf16(p[2], p[3]);
#pragma unroll
  for (int t = 0; t < nt; ++t) {
    const bool low = t * 8 + 2 * qd >= GC;
    pt32[(t * mma_tile + g) * 4 + qd] = low ? bf16_rest(p[0], p[1], hi0) : hi0;
    pt32[(t * mma_tile + g + 8) * 4 + qd] = low ? bf16_rest(p[2], p[3], hi1) : hi1;
  }
  __syncwarp();  // the tile written before any lane reads it
  std::uint32_t pb[nt][2];
  const std::uint32_t p_addr =
      smem_addr(pt) + 16U * static_cast<std::uint32_t>((lane / 16 % nt) * mma_tile + lane % 16);
  if constexpr (nt == 1) {
    ldmatrix_x2_trans(pb[0], p_addr);
  } else {
    std::uint32_t r[4];
    ldmatrix_x4_trans(r, p_addr);
    pb[0][0] = r[0];
    pb[0][1] = r[1];
    pb[1][0] = r[2];
    pb[1][1] = r[3];
  }
#pragma unroll
  for (int i = 0; i < S::kc; ++i) {
#pragma unroll
    for (int t = 0; t < nt; ++t) {
      w.o[i][t][0] *= alpha[0];
      w.o[i][t][1] *= alpha[1];
      w.o[i][t][2] *= alpha[0];
      w.o[i][t][3] *= alpha[1];
    }
    std::uint32_t va[4];
    ldmatrix_x4_trans(
        va, v_addr + 2U * static_cast<std::uint32_t>(((lane / 16) * 8 + lane % 8) * S::stride +
                                                     i * 16 + (lane / 8 % 2) * 8));
#pragma unroll
    for (int t = 0; t < nt; ++t)
      mma_bf16(w.o[i][t], va, pb[t][0], pb[t][1]);
  }
}

// The warp's walk over its tiles of [begin, end) (tile j at begin + (4j +
// warp) 16), `stages` - 1 in flight while one is consumed; `wsm` is the
// warp's shared memory. `copies_out()` runs once the first tiles' copies
// are issued, before the first wait (the kernel loads q there). Ends with
// none of the warp's copies in flight. `Bulk`: the tiles come by
// issue_tile_bulk on the warp's barriers `bars` (one a stage), whose phase
// bits `phases` carries over the block's items (a bit flips at each wait).
template <int D, int GC, bool Bulk, class AfterIssue>
__device__ __forceinline__ void walk_mma(const attn_args& a, std::uint16_t* wsm, int first_page,
                                         int kvh, int begin, int end, warp_state<D, GC>& w,
                                         std::uint64_t* bars, unsigned& phases,
                                         AfterIssue&& copies_out) {
  using S = mma_shape<D, GC>;
  constexpr int st = S::stages;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
  for (int i = 0; i < S::kc; ++i) {
#pragma unroll
    for (int t = 0; t < S::nt; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w.o[i][t][e] = 0.0F;
    }
  }
  w.m[0] = w.m[1] = -INFINITY;
  w.l[0] = w.l[1] = 0.0F;
  const int tiles = ceil_div(end - begin, mma_tile);
  const int mine = tiles > warp ? (tiles - warp + mma_warps - 1) / mma_warps : 0;
  const int ps = a.arena.page_size;
  const int row = Bulk ? lane % mma_tile : lane / 2;
  auto start = [&](int j) { return begin + (j * mma_warps + warp) * mma_tile; };
  // The page id of the lane's position in tile j (0 past the end: unread;
  // the bulk form's lanes there copy the range's last position).
  auto page_of = [&](int j) {
    const int t = Bulk ? min(start(j) + row, end - 1) : start(j) + row;
    return t < end ? load_coherent(a.table.kv_indices + first_page + t / ps) : 0;
  };
  auto issue = [&](int j, std::int32_t page) {
    const int k = j % st;
    if constexpr (Bulk)
      issue_tile_bulk<D, GC>(a, kvh, start(j), end, page, wsm + k * S::stage_elems, bars + k);
    else
      issue_tile<D, GC>(a, kvh, start(j), end, page, wsm + k * S::stage_elems);
  };
  // Prologue: tiles 0 .. st - 2, a commit group each (empty past the
  // warp's last, so the wait below counts groups alike for every range).
  std::int32_t first[st - 1];
#pragma unroll
  for (int k = 0; k < st - 1; ++k)
    first[k] = page_of(k);
#pragma unroll
  for (int k = 0; k < st - 1; ++k) {
    if (k < mine)
      issue(k, first[k]);
    if constexpr (!Bulk)
      cp_async_commit();
  }
  std::int32_t next = page_of(st - 1);  // the page id of the next tile to issue
  copies_out();
  for (int j = 0; j < mine; ++j) {
    if constexpr (Bulk) {
      const int k = j % st;
      mbar_wait(smem_addr(bars + k), (phases >> k) & 1U);  // tile j has landed
      phases ^= 1U << k;
    } else {
      cp_async_wait<st - 2>();  // the lane's copies of tile j have landed
    }
    // Every lane's copies of tile j are visible, and every lane is done
    // with tile j - 1, whose stage the next issue overwrites (and with the
    // P tile, rewritten below).
    __syncwarp();
    if (j + st - 1 < mine) {
      issue(j + st - 1, next);
      next = page_of(j + st);
    }
    if constexpr (!Bulk)
      cp_async_commit();
    consume_tile<D, GC>(wsm + j % st * S::stage_elems, wsm + st * S::stage_elems, start(j), end, w);
  }
  if constexpr (!Bulk)
    cp_async_wait<0>();  // only empty groups remain; keeps the invariant plain
}

// Merges the block's warps for heads below `valid`: calls sink(h, d, o, l,
// m) once per (h, d) as merge_slots (attend.cuh) does. Every thread of the
// block calls it; three barriers (the scratch overlays the stages).
template <int D, int GC, class Sink>
__device__ __forceinline__ void merge_warp_states(std::uint16_t* smem, int valid,
                                                  warp_state<D, GC>& w, Sink&& sink) {
  using S = mma_shape<D, GC>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int g = lane / 4;
  const int qd = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    w.l[h] += __shfl_xor_sync(0xffffffffU, w.l[h], 4);
    w.l[h] += __shfl_xor_sync(0xffffffffU, w.l[h], 8);
    w.l[h] += __shfl_xor_sync(0xffffffffU, w.l[h], 16);
  }
  // The high and low parts of each head's column added.
#pragma unroll
  for (int i = 0; i < S::kc; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (S::nt == 1)
        w.o[i][0][e] += __shfl_xor_sync(0xffffffffU, w.o[i][0][e], 2);
      else
        w.o[i][0][e] += w.o[i][1][e];
    }
  }
  auto& sc = *reinterpret_cast<merge_scratch<D, GC>*>(smem);
  __syncthreads();  // every warp is done with its stages
  if (qd < GC / 2) {
#pragma unroll
    for (int i = 0; i < S::kc; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sc.acc[warp][2 * qd + e % 2][i * 16 + g + 8 * (e / 2)] = w.o[i][0][e];
    }
    if (g == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sc.m[warp][2 * qd + h] = w.m[h];
        sc.l[warp][2 * qd + h] = w.l[h];
      }
    }
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < GC * D; i += mma_threads) {
    const int h = i / D;
    const int d = i % D;
    if (h >= valid)
      continue;
    float top = -INFINITY;
#pragma unroll
    for (int k = 0; k < mma_warps; ++k)
      top = fmaxf(top, sc.m[k][h]);
    float total_l = 0.0F;
    float o = 0.0F;
#pragma unroll
    for (int k = 0; k < mma_warps; ++k) {
      if (sc.m[k][h] == -INFINITY)
        continue;  // a warp that saw no position
      const float f = exp2f(sc.m[k][h] - top);
      total_l += sc.l[k][h] * f;
      o += sc.acc[k][h][d] * f;
    }
    sink(h, d, o, total_l, top);
  }
  __syncthreads();  // the scratch is read before the next item's copies land
}

// Block per (row, kv head, chunk of GC heads, split): with s.acc null one
// pass over the row, writing a.out; else the split's chunk of the row
// (chunk_length), writing its partials (nothing for a chunk past the end),
// and with `Fused` (s.counters set) the item's last block merges them
// (fused_merge): an instantiation of its own, so the others keep their
// registers. An item reads its page ids and issues its first tiles' copies
// before it loads q (session 53; the default since session 55): with q
// first, the SASS (cuobjdump, sm_90) had the page-id loads wait behind q's
// loads and bf16 conversions, so the K / V stream started two dependent L2
// round trips after the row's offsets rather than one. The same bits either
// way; on an H100 (session 55's call1, 2,048 positions) the split launch
// at 1 / 4 rows took 11.44 / 19.97 us against 11.70-11.83 / 20.45, one row
// of 160 positions 6.83-6.91 against 7.12-7.14.
template <int D, int GC, bool Fused, bool Bulk>
__global__ void __launch_bounds__(mma_threads, mma_min_blocks<D, GC, Bulk>())
    attend_decode_mma(attn_args a, split_args s) {
  chain_start();
  using S = mma_shape<D, GC>;
  static_assert(sizeof(merge_scratch<D, GC>) <= S::smem_bytes);
  extern __shared__ uint4 mma_smem[];
  auto* smem = reinterpret_cast<std::uint16_t*>(mma_smem);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  std::uint16_t* wsm = smem + warp * S::warp_elems;
  std::uint64_t* bars = nullptr;  // the warp's barriers (bulk copies only)
  unsigned phases = 0;            // their next phases (bit k: stage k)
  if constexpr (Bulk) {
    // Declared here so that the cp.async kernels hold no static shared
    // memory (8 bytes more would leave D 64 with 8 heads 3 blocks an SM).
    __shared__ alignas(8) std::uint64_t mma_bars[S::bars];
    bars = mma_bars + warp * S::stages;
    if (threadIdx.x % 32 == 0) {
      for (int k = 0; k < S::stages; ++k)
        mbar_init(smem_addr(bars + k), 1);
      mbar_init_fence();
    }
    __syncwarp();
  }
  const bool split = s.acc != nullptr;
  const long long per_row = static_cast<long long>(a.kv_heads) * a.chunks * s.splits;
  const long long total = per_row * a.table.rows;
  for (long long w = blockIdx.x; w < total; w += gridDim.x) {
    // Block-uniform: the `continue` and every barrier below are taken by all.
    const int chunk = static_cast<int>(w % s.splits);
    const long long item = w / s.splits;
    const int head_chunk = static_cast<int>(item % a.chunks);
    const int kvh = static_cast<int>((item / a.chunks) % a.kv_heads);
    const query_at qa = query_of(a, a.table.rows, w / per_row);
    int begin = 0;
    int end = qa.positions;
    if (split) {
      const int length = chunk_length(qa.positions, s);
      begin = chunk * length;
      if (begin >= qa.positions) {
        if constexpr (Fused) {
          if (chunk == 0)  // a row without positions
            mma_fused_merge<D>(a, s, qa.token, qa.positions, kvh * a.group + head_chunk * GC,
                               min(GC, a.group - head_chunk * GC));
        }
        continue;
      }
      end = min(begin + length, qa.positions);
    }
    const int h0 = kvh * a.group + head_chunk * GC;
    const int valid = min(GC, a.group - head_chunk * GC);
    warp_state<D, GC> st;
    walk_mma<D, GC, Bulk>(a, wsm, qa.first_page, kvh, begin, end, st, bars, phases,
                          [&] { load_q_frags<D, GC>(a, qa.token, h0, valid, st); });
    if (split && written_directly(qa.positions, s)) {
      // The row's one chunk: its output as the merge kernel would write it.
      merge_warp_states<D, GC>(smem, valid, st, [&](int h, int d, float o, float sum, float) {
        a.out[(static_cast<std::size_t>(qa.token) * a.q_heads + h0 + h) * D + d] = (0.0F + o) / sum;
      });
    } else if (split) {
      const std::size_t part =
          (static_cast<std::size_t>(qa.token) * a.q_heads + h0) * s.splits + chunk;
      merge_warp_states<D, GC>(smem, valid, st, [&](int h, int d, float o, float sum, float top) {
        const std::size_t at = part + static_cast<std::size_t>(h) * s.splits;
        s.acc[at * D + d] = o;
        if (d == 0) {
          s.m[at] = top;
          s.l[at] = sum;
        }
      });
      if constexpr (Fused)
        mma_fused_merge<D>(a, s, qa.token, qa.positions, h0, valid);
    } else {
      merge_warp_states<D, GC>(smem, valid, st, [&](int h, int d, float o, float sum, float) {
        a.out[(static_cast<std::size_t>(qa.token) * a.q_heads + h0 + h) * D + d] = o / sum;
      });
    }
  }
}

// Blocks of the step's launch.
std::int64_t blocks_of(const attn_args& a, int gc, const split_args& s) {
  return std::int64_t{a.table.rows} * a.kv_heads * ceil_div(a.group, gc) * s.splits;
}

// `Kernel` (an instantiation of attend_decode_mma<D, GC, ...>) over the step.
template <auto Kernel, int D, int GC>
cudaError_t launch_kernel(attn_args a, const split_args& s, cudaStream_t stream) {
  using S = mma_shape<D, GC>;
  if (const cudaError_t err = raise_smem_limit<Kernel>(S::smem_bytes); err != cudaSuccess)
    return err;
  a.chunks = ceil_div(a.group, GC);
  const unsigned grid = grid_of(blocks_of(a, GC, s));
  launch_chained(Kernel, grid, mma_threads, S::smem_bytes, stream, a, s);
  return launch_status();
}

// Where bulk copies may take the walk at all: rows of 256 bytes and more
// (head_dim 128 / 256, the sizes measured; at head_dim 64 each copy is
// half as long, so bulk_pays's per-SM limit would bite sooner, unmeasured)
// whose barriers leave the blocks an SM as they were (so the split rule,
// which counts the cp.async kernel's, holds for both).
template <int D, int GC>
constexpr bool bulk_fits() {
  return D >= 128 && mma_min_blocks<D, GC, true>() == mma_min_blocks<D, GC, false>();
}

// Whether bulk copies take a launch of `blocks` by default (no override):
// where bulk_fits and the launch has at least one block for every three
// SMs. Session 58's call2 (H100, 2,048 positions, 32 q / 8 kv heads, D 128,
// us a call, cp.async / bulk):
// they won at 64 blocks and more (one row in 16 splits, 128 blocks, 11.5 /
// 11.1; 4 rows in 8, 256, 20.0 / 16.7; 8 rows in 4, 256, 39.3 / 32.9; 8
// rows unsplit, 64, 67.2 / 60.4) and lost at 32 and fewer (4 rows unsplit,
// 32, 53.7 / 59.6; one row unsplit, 8, 38.9 / 57.9; one row of 160, 8,
// 6.9 / 8.5): with few SMs busy, each SM's bulk copies of 256 bytes (one a
// K or V row) are what limits.
template <int D, int GC>
bool bulk_pays(std::int64_t blocks) {
  return bulk_fits<D, GC>() && blocks * 3 >= sm_count();
}

// Calls fn.template operator()<Bulk>() with how the walk gathers its tiles
// for a launch of `blocks` (-1: the kernel the split rule counts):
// mma_bulk_choice's override or environment where set, else bulk copies
// where bulk_pays. The bulk copies came after session 56's Nsight Compute
// page of the 4-row split launch (H100: 1.25 TB/s, 31% of its sectors
// "excessive", the L1TEX scoreboard the first stall) and session 57's call1
// (two stages a warp at three blocks an SM lost: the copies in flight a
// warp, not the warps, bound it). The same bits either way.
template <int D, int GC, class Fn>
void with_copies(std::int64_t blocks, Fn&& fn) {
  const int choice = mma_bulk_choice();
  if (choice == 1 || (choice < 0 && blocks >= 0 && bulk_pays<D, GC>(blocks)))
    fn.template operator()<true>();
  else
    fn.template operator()<false>();
}

template <int D, int GC>
cudaError_t launch(const attn_args& a, const split_args& s, cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  with_copies<D, GC>(blocks_of(a, GC, s), [&]<bool Bulk>() {
    err = s.counters != nullptr
              ? launch_kernel<attend_decode_mma<D, GC, true, Bulk>, D, GC>(a, s, stream)
              : launch_kernel<attend_decode_mma<D, GC, false, Bulk>, D, GC>(a, s, stream);
  });
  return err;
}

}  // namespace

bool decode_mma_bulk_fits(int head_dim, int group) {
  bool fits = false;
  static_cast<void>(with_decode_mma_shape<256>(
      head_dim, group, [&]<int D, int GC>() { fits = bulk_fits<D, GC>(); }));
  return fits;
}

int decode_mma_resident(int head_dim, int group) {
  int n = 1;
  static_cast<void>(with_decode_mma_shape<256>(head_dim, group, [&]<int D, int GC>() {
    with_copies<D, GC>(-1, [&]<bool Bulk>() {
      constexpr std::size_t smem = mma_shape<D, GC>::smem_bytes;
      n = resident_blocks<attend_decode_mma<D, GC, false, Bulk>>(smem, mma_threads, smem);
    });
  }));
  return n;
}

cudaError_t launch_decode_mma(attn_args a, int head_dim, const split_args* s, cudaStream_t stream) {
  const split_args use = split_or_one(s, decode_mma_step);
  cudaError_t err = cudaErrorInvalidValue;
  static_cast<void>(with_decode_mma_shape<256>(
      head_dim, a.group, [&]<int D, int GC>() { err = launch<D, GC>(a, use, stream); }));
  return err;
}

}  // namespace mstar::kernels::cuda::detail
