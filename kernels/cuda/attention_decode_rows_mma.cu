// Whole-token-row decode attention on tensor cores (attention_walk::rows_mma):
// decode steps on bf16 arenas with head_dim 64 or 128, one pass or split-KV
// (the split path's merge kernels read its partials, or its blocks merge
// them themselves: attention_merge::fused, attend_merge_math.cuh).
//
// Why: the rows walk (attention_decode_rows.cu) brings every kv head of a
// token in with bulk copies, but consumes on CUDA cores: ~100 warp
// instructions a (position, kv head) of shuffles, conversions and FMAs,
// which is what bounds it (bigger rings did not help). Here the same block
// and ring feed mma.sync, so a warp spends ~60 instructions on 8 positions.
//
// Work item and ring as the rows walk: a block per (row, kv_per_block kv
// heads, split), a warp per (kv head, chunk of GC = 4 or 8 query heads,
// decode_mma_heads); `stages` (3) stages of `tile` positions (a multiple of
// 8), K rows then V rows, one mbarrier a stage, a block barrier after each
// consume before warp 0 refills the stage. (Reading the page ids a refill
// ahead, so that a refill waits on no L2 round trip of its own, changed
// nothing: H100, session 52's call2, 60.3 / 206.1 / 748.5 us at 16 / 64 /
// 256 rows of 2,048 positions against 60.6 / 206.0 / 748.4.)
//
// The last-warp hand-off (session 53: each warp counting itself out of a
// stage in shared memory, the last one refilling it, in place of the block
// barrier) lost on an H100 (session 55's call1, 16 / 64 / 256 rows of 2,048
// positions: the split launches the rule takes 60.5-60.6 / 202.0-202.3 /
// 749.0-750.5 us against 60.3-60.4 / 201.1-201.4 / 747.1-749.6, one pass at
// 16 / 64 rows 401-408 / 375-377 against 347-349 / 352-354), and racecheck
// reported its refills against other warps' ldmatrix reads: taken out.
//
// Shared layout and bank conflicts: a row is one position's kv_per_block x
// head bytes (2 KiB at 8 x D 128), and ldmatrix reads an 8 x 8 matrix as
// 8 rows of 16 bytes: for K and V those are 8 positions of one head at
// the same dims, so at a 2 KiB stride all 8 fall on the same 4 banks
// (8-way conflicts). No choice of fragments avoids it: the 8 rows of a
// matrix must share their dims (the reduction pairs them with the same
// q or output dims) and so differ in position, and a warp has one kv
// head. So the rows are copied one position each (cp.async.bulk of
// row_bytes) to a stride of row_bytes + 16: 8 consecutive positions then
// start 16 bytes apart mod 128, distinct banks. It costs more copies, one
// per position for K and one for V (16 a stage at 8 positions: lanes of
// warp 0 issue them in one step), each still a 2 KiB contiguous run; the
// page-run copies of the rows walk were at most 12 positions long anyway.
// Positions past the range's end copy the range's last position again, so
// no stale (possibly NaN) bytes meet a zero weight in an mma.
//
// Per warp and 8 positions (an n tile), q and P split into bf16 high + low
// parts (as the mma walk, attention_decode_mma.cu; 1e-4 normalised holds):
//   S = Q K^T:  m16n8k16, A = Q in registers (row r < 8: high part of head
//               r % GC; row r + 8: its low part), B = K^T by ldmatrix (x4:
//               32 dims of the 8 positions); lane (g, q) gets S of head
//               g % GC at positions 2q, 2q + 1 as c0 + c2, c1 + c3.
//   softmax:    per head max over xor 1 / 2 (2 shuffles an n tile), exp2 in
//               f32; running sums rescaled only when some maximum grows.
//   O^T += V^T P^T: m16n8k8, A = V^T by ldmatrix.trans (x4: 32 dims), B =
//               P^T straight from the S registers (b0 = (positions 2q..,
//               column g)): GC 4: column c < 4 the high part of head c, c >=
//               4 the low part of head c - 4 (summed with the xor-2 lane at
//               the end); GC 8: two mmas (high, then low) into the same
//               accumulators, column = head.
// Registers: Q D / 4, O^T D / 4 (32 + 32 at D 128). D 256 would need 128
// for those alone: it falls back. bench/decode_attention_rows_mma_trace.py
// replays the lanes, ldmatrix addresses and banks on the host.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "kernels/cuda/internal/attend_decode_mma.cuh"
#include "kernels/cuda/internal/attend_decode_rows_mma.cuh"
#include "kernels/cuda/internal/attend_merge_math.cuh"
#include "kernels/cuda/internal/bulk_copy.cuh"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

constexpr int rm_stages = 3;                // the ring's stages (MSTAR_ATTN_ROWS_MMA_STAGES)
constexpr int rm_max_stages = 6;            // the most the A/B switch may ask for
constexpr int rm_stage_budget = 33 * 1024;  // K + V bytes a stage, padding included
constexpr int rm_n = 8;                     // positions an n tile
constexpr int rm_max_tile = 64;
constexpr int rm_pad = 16;  // bytes after each shared row
constexpr int rm_max_threads = decode_rows_max_warps * 32;
constexpr std::size_t rm_max_smem = std::size_t{192} * 1024;

// The fused merge (attention_merge::fused) with 32 floats of partials in
// flight a lane: the walk's registers are free by then.
template <int D>
__device__ __forceinline__ void rm_fused_merge(const attn_args& a, const split_args& s, int token,
                                               int positions, int h0, int heads) {
  constexpr int e = merge_elems<D>;
  fused_merge<D, e, 32 / e>(a, s, token, positions, h0, heads);
}

// What every block of a launch knows about its shape.
struct rm_geom {
  int kv_per_block;
  int tile;
  int stages;
};

// One warp's state over an item; lane (g = lane / 4, q = lane % 4).
template <int D, int GC>
struct rm_warp {
  static constexpr int kc = D / 16;  // k steps of S, m tiles of O^T
  std::uint32_t qa[kc][4];           // Q A fragments: a0 / a2 high, a1 / a3 low of head g % GC
  float o[kc][4];                    // O^T: dims 16i + g (+ 8) by columns 2q, 2q + 1
  float m;                           // running maximum of head g % GC (exp2 domain)
  float l;                           // the lane's share of its running sum
};

// The lane's Q fragments for heads h0 .. h0 + GC - 1 (zeros from `valid`):
// k step k holds dims 16k + 2q, + 1 (a0, a1) and those + 8 (a2, a3).
template <int D, int GC>
__device__ __forceinline__ void load_q(const attn_args& a, int token, int h0, int valid,
                                       rm_warp<D, GC>& w) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int head = lane / 4 % GC;
  const float* qp = a.q + (static_cast<std::size_t>(token) * a.q_heads + h0 + head) * D;
#pragma unroll
  for (int k = 0; k < rm_warp<D, GC>::kc; ++k) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float2 x = make_float2(0.0F, 0.0F);
      if (head < valid)
        x = *reinterpret_cast<const float2*>(qp + k * 16 + 2 * (lane % 4) + 8 * r);
      x.x *= a.scale_log2;
      x.y *= a.scale_log2;
      const std::uint32_t hi = pack_bf16(x.x, x.y);
      w.qa[k][2 * r] = hi;
      w.qa[k][2 * r + 1] = bf16_rest(x.x, x.y, hi);
    }
  }
#pragma unroll
  for (int i = 0; i < rm_warp<D, GC>::kc; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      w.o[i][e] = 0.0F;
  }
  w.m = -INFINITY;
  w.l = 0.0F;
}

// Warp 0 issues positions [t0, t0 + n) (n >= 1) into `stage`: K of
// position i at stage + i stride, V at stage + (tile + i) stride, one copy
// of row_bytes each; rows from n copy position t0 + n - 1 again.
__device__ __forceinline__ void issue_stage(const attn_args& a, const rm_geom& g,
                                            std::uint32_t row_bytes, int first_page, int kv0,
                                            int t0, int n, std::uint32_t stage, std::uint32_t bar) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int ps = a.arena.page_size;
  const std::uint32_t stride = row_bytes + rm_pad;
  // The block barrier before this ordered every warp's reads of the stage
  // before it; the fence carries that order over to the bulk copies.
  fence_proxy_async();
  if (lane == 0)
    mbar_arrive_expect(bar, 2U * static_cast<std::uint32_t>(g.tile) * row_bytes);
  __syncwarp();  // the barrier is armed before any copy can complete on it
  for (int i = lane; i < 2 * g.tile; i += 32) {
    const bool v = i >= g.tile;
    const int r = v ? i - g.tile : i;
    const int t = t0 + min(r, n - 1);
    const std::int32_t page = load_coherent(a.table.kv_indices + first_page + t / ps);
    bulk_copy(stage + static_cast<std::uint32_t>(i) * stride,
              a.arena.at(v ? 1 : 0, page, t % ps, kv0), row_bytes, bar);
  }
}

// One stage's positions [t0, t0 + tile) into the warp's state, an n tile
// of 8 at a time; `k_base` / `v_base`: the shared addresses of the warp's
// head in the stage's first K / V row; positions at or past `end` weigh 0.
template <int D, int GC>
__device__ __forceinline__ void consume_stage(std::uint32_t k_base, std::uint32_t v_base,
                                              std::uint32_t stride, int tile, int t0, int end,
                                              rm_warp<D, GC>& w) {
  constexpr int kc = rm_warp<D, GC>::kc;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4;
  const int qd = lane % 4;
  // ldmatrix rows: lanes 8j .. 8j + 7 give positions 0 .. 7 at dims 8j
  // (+ 32 an x4 load).
  const std::uint32_t row_off = static_cast<std::uint32_t>(lane % 8) * stride + (lane / 8) * 16U;
  // Where the xor-2 lanes' columns take their rescale from: the lane of
  // the column's head.
  const int src0 = 4 * (2 * qd % GC);
  const int src1 = 4 * ((2 * qd + 1) % GC);
#pragma unroll 1
  for (int nb = 0; nb < tile; nb += rm_n) {
    const std::uint32_t off = static_cast<std::uint32_t>(nb) * stride + row_off;
    float s[4] = {0.0F, 0.0F, 0.0F, 0.0F};
#pragma unroll
    for (int c = 0; c < kc / 2; ++c) {
      std::uint32_t kb[4];
      ldmatrix_x4(kb, k_base + off + 64U * c);
      mma_bf16(s, w.qa[2 * c], kb[0], kb[1]);
      mma_bf16(s, w.qa[2 * c + 1], kb[2], kb[3]);
    }
    float p0 = s[0] + s[2];  // position 2q: high + low rows of head g % GC
    float p1 = s[1] + s[3];
    const int t = t0 + nb + 2 * qd;
    if (t0 + nb + rm_n > end) {  // warp-uniform: only a range's last tile pays
      if (t >= end)
        p0 = -INFINITY;
      if (t + 1 >= end)
        p1 = -INFINITY;
    }
    float top = fmaxf(p0, p1);
    top = fmaxf(top, __shfl_xor_sync(0xffffffffU, top, 1));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffU, top, 2));
    const float mx = fmaxf(w.m, top);
    const float ref = mx == -INFINITY ? 0.0F : mx;  // nothing seen yet: weights 0
    if (__any_sync(0xffffffffU, mx > w.m)) {        // some head's maximum grew: rescale
      const float alpha = exp2_ftz(w.m - ref);
      w.l *= alpha;
      const float a0 = __shfl_sync(0xffffffffU, alpha, src0);
      const float a1 = __shfl_sync(0xffffffffU, alpha, src1);
#pragma unroll
      for (int i = 0; i < kc; ++i) {
        w.o[i][0] *= a0;
        w.o[i][1] *= a1;
        w.o[i][2] *= a0;
        w.o[i][3] *= a1;
      }
      w.m = mx;
    }
    p0 = exp2_ftz(p0 - ref);
    p1 = exp2_ftz(p1 - ref);
    w.l += p0 + p1;
    // P^T B fragments (positions 2q, 2q + 1 of column g).
    const std::uint32_t hi = pack_bf16(p0, p1);
    std::uint32_t pb[GC / 4];
    if constexpr (GC == 4) {
      pb[0] = g < 4 ? hi : bf16_rest(p0, p1, hi);
    } else {
      pb[0] = hi;
      pb[1] = bf16_rest(p0, p1, hi);
    }
#pragma unroll
    for (int c = 0; c < kc / 2; ++c) {
      std::uint32_t va[4];
      ldmatrix_x4_trans(va, v_base + off + 64U * c);
#pragma unroll
      for (int t2 = 0; t2 < GC / 4; ++t2) {
        mma_bf16_k8(w.o[2 * c], va[0], va[1], pb[t2]);
        mma_bf16_k8(w.o[2 * c + 1], va[2], va[3], pb[t2]);
      }
    }
  }
}

// The warp's result for heads below `valid`: calls sink(h, d, o, l, m)
// once per (h, d). GC 4 adds each head's low-part columns (xor-2 lane) in.
template <int D, int GC, class Sink>
__device__ __forceinline__ void finish_warp(rm_warp<D, GC>& w, int valid, Sink&& sink) {
  constexpr int kc = rm_warp<D, GC>::kc;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4;
  const int qd = lane % 4;
  w.l += __shfl_xor_sync(0xffffffffU, w.l, 1);
  w.l += __shfl_xor_sync(0xffffffffU, w.l, 2);
  if constexpr (GC == 4) {
#pragma unroll
    for (int i = 0; i < kc; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w.o[i][e] += __shfl_xor_sync(0xffffffffU, w.o[i][e], 2);
    }
  }
  const int h[2] = {2 * qd % GC, (2 * qd + 1) % GC};
  float m[2];
  float l[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    m[c] = __shfl_sync(0xffffffffU, w.m, 4 * h[c]);
    l[c] = __shfl_sync(0xffffffffU, w.l, 4 * h[c]);
  }
  if (GC == 4 && qd >= 2)
    return;  // the low-part columns, added above
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    if (h[c] >= valid)
      continue;
#pragma unroll
    for (int i = 0; i < kc; ++i) {
      sink(h[c], 16 * i + g, w.o[i][c], l[c], m[c]);
      sink(h[c], 16 * i + g + 8, w.o[i][2 + c], l[c], m[c]);
    }
  }
}

// Block per (row, block of kv heads, split): with s.acc null one pass over
// the row, writing a.out; else the split's chunk of the row (chunk_length,
// s.step == g.tile), writing its partials (nothing for a chunk past the
// end), and with `Fused` (s.counters set) the item's last block merges the
// block's kv_per_block x group query heads (fused_merge; an instantiation
// of its own, so the others keep their registers). blockDim.x = 32 x
// kv_per_block x a.chunks.
template <int D, int GC, bool Fused>
__global__ void __launch_bounds__(rm_max_threads, 2)
    attend_decode_rows_mma(attn_args a, split_args s, rm_geom g) {
  chain_start();
  __shared__ alignas(8) std::uint64_t full[rm_max_stages];
  extern __shared__ uint4 rm_smem[];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x == 0) {
    for (int k = 0; k < g.stages; ++k)
      mbar_init(smem_addr(&full[k]), 1);
    mbar_init_fence();
  }
  __syncthreads();
  const auto row_bytes = static_cast<std::uint32_t>(g.kv_per_block * a.arena.head_bytes);
  const std::uint32_t stride = row_bytes + rm_pad;
  const std::uint32_t stage_bytes = 2U * static_cast<std::uint32_t>(g.tile) * stride;
  const std::uint32_t smem_base = smem_addr(rm_smem);
  const int kv_blocks = a.kv_heads / g.kv_per_block;
  const int hk = warp / a.chunks;  // the warp's kv head within the block
  const int hc = warp % a.chunks;  // and its chunk of that head's group
  const std::uint32_t head_off = static_cast<std::uint32_t>(hk) * a.arena.head_bytes;
  const bool split = s.acc != nullptr;
  const long long per_row = static_cast<long long>(kv_blocks) * s.splits;
  const long long total = per_row * a.table.rows;
  unsigned filled = 0;  // tiles the block has consumed over its earlier items
  for (long long w = blockIdx.x; w < total; w += gridDim.x) {
    // Block-uniform: the `continue` and every barrier below are taken by all.
    const int chunk = static_cast<int>(w % s.splits);
    const int kb = static_cast<int>((w / s.splits) % kv_blocks);
    const query_at qa = query_of(a, a.table.rows, w / per_row);
    int begin = 0;
    int end = qa.positions;
    if (split) {
      const int length = chunk_length(qa.positions, s);
      begin = chunk * length;
      end = min(begin + length, qa.positions);
    }
    if (begin >= end) {
      if constexpr (Fused) {
        if (chunk == 0)  // a row without positions
          rm_fused_merge<D>(a, s, qa.token, qa.positions, kb * g.kv_per_block * a.group,
                            g.kv_per_block * a.group);
      }
      continue;
    }
    const int kv0 = kb * g.kv_per_block;
    const int tiles = ceil_div(end - begin, g.tile);
    const auto stages = static_cast<unsigned>(g.stages);
    auto stage_of = [&](int j) { return (filled + static_cast<unsigned>(j)) % stages; };
    auto issue = [&](int j) {
      const int t0 = begin + j * g.tile;
      const unsigned k = stage_of(j);
      issue_stage(a, g, row_bytes, qa.first_page, kv0, t0, min(g.tile, end - t0),
                  smem_base + k * stage_bytes, smem_addr(&full[k]));
    };
    // Every stage is free: the last item ended with a block barrier after
    // its last consume.
    if (warp == 0) {
      for (int j = 0; j < min(g.stages, tiles); ++j)
        issue(j);
    }
    const int h0 = (kv0 + hk) * a.group + hc * GC;
    const int valid = min(GC, a.group - hc * GC);
    rm_warp<D, GC> st;
    load_q<D, GC>(a, qa.token, h0, valid, st);
    for (int j = 0; j < tiles; ++j) {
      const unsigned k = stage_of(j);
      // The stage's fills so far: this is its ((filled + j) / stages)-th.
      mbar_wait(smem_addr(&full[k]), ((filled + static_cast<unsigned>(j)) / stages) & 1U);
      const std::uint32_t k_base = smem_base + k * stage_bytes + head_off;
      consume_stage<D, GC>(k_base, k_base + static_cast<std::uint32_t>(g.tile) * stride, stride,
                           g.tile, begin + j * g.tile, end, st);
      __syncthreads();  // every warp is done with stage k before it is refilled
      if (warp == 0 && j + g.stages < tiles)
        issue(j + g.stages);
    }
    filled += static_cast<unsigned>(tiles);
    // Recomputed rather than kept live over the walk (registers).
    const int token = query_of(a, a.table.rows, w / per_row).token;
    const std::size_t head0 =
        static_cast<std::size_t>(token) * a.q_heads + (kv0 + hk) * a.group + hc * GC;
    if (split) {
      finish_warp<D, GC>(st, valid, [&](int h, int d, float o, float l, float m) {
        const std::size_t at = (head0 + h) * s.splits + chunk;
        s.acc[at * D + d] = o;
        if (d == 0) {
          s.m[at] = m;
          s.l[at] = l;
        }
      });
      if constexpr (Fused) {
        const query_at qb = query_of(a, a.table.rows, w / per_row);
        rm_fused_merge<D>(a, s, qb.token, qb.positions, kv0 * a.group, g.kv_per_block * a.group);
      }
    } else {
      finish_warp<D, GC>(st, valid, [&](int h, int d, float o, float l, float) {
        a.out[(head0 + h) * D + d] = o / l;
      });
    }
  }
}

// `Kernel` (an instantiation of attend_decode_rows_mma<D, GC, ...>) over
// the step.
template <auto Kernel, int GC>
cudaError_t launch_kernel(attn_args a, const decode_rows_shape& shape, const split_args& s,
                          cudaStream_t stream) {
  if (const cudaError_t err = raise_smem_limit<Kernel>(rm_max_smem); err != cudaSuccess)
    return err;
  a.chunks = ceil_div(a.group, GC);
  const unsigned grid =
      grid_of(std::int64_t{a.table.rows} * shape.blocks_per_row(a.kv_heads) * s.splits);
  launch_chained(Kernel, grid, static_cast<unsigned>(shape.warps * 32), shape.smem_bytes, stream, a,
                 s, rm_geom{shape.kv_per_block, shape.tile, shape.stages});
  return launch_status();
}

template <int D, int GC>
cudaError_t launch(const attn_args& a, const decode_rows_shape& shape, const split_args& s,
                   cudaStream_t stream) {
  if (s.counters != nullptr)
    return launch_kernel<attend_decode_rows_mma<D, GC, true>, GC>(a, shape, s, stream);
  return launch_kernel<attend_decode_rows_mma<D, GC, false>, GC>(a, shape, s, stream);
}

}  // namespace

namespace {

// The ring and block of the walk for A/B runs on the device (session 52;
// each read once, anything out of range or unset keeps the default):
// MSTAR_ATTN_ROWS_MMA_STAGES (2 to rm_max_stages), _STAGE_KIB (8 to 64: K
// + V bytes a stage, padding included; the product at most rm_max_smem)
// and _KV (the most kv heads a block takes: 1 to 8; the largest divisor of
// the step's kv heads at or under it).
struct rm_ring {
  int stages = rm_stages;
  int budget = rm_stage_budget;
  int kv_cap = decode_rows_max_warps;
};

int env_in(const char* name, int lo, int hi, int fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr)
    return fallback;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return end != e && *end == '\0' && v >= lo && v <= hi ? static_cast<int>(v) : fallback;
}

// Shared bytes of a ring of `stages` stages of `tile` K and V rows.
std::size_t rm_ring_bytes(int stages, int tile, int stride) {
  return static_cast<std::size_t>(stages) * 2 * static_cast<std::size_t>(tile) *
         static_cast<std::size_t>(stride);
}

const rm_ring& ring_of_env() {
  static const rm_ring ring = [] {
    rm_ring r;
    const int stages = env_in("MSTAR_ATTN_ROWS_MMA_STAGES", 2, rm_max_stages, rm_stages);
    const int kib = env_in("MSTAR_ATTN_ROWS_MMA_STAGE_KIB", 8, 64, rm_stage_budget / 1024);
    if (static_cast<std::size_t>(stages) * static_cast<std::size_t>(kib) * 1024 <= rm_max_smem) {
      r.stages = stages;
      r.budget = kib * 1024;
    }
    r.kv_cap = env_in("MSTAR_ATTN_ROWS_MMA_KV", 1, decode_rows_max_warps, r.kv_cap);
    return r;
  }();
  return ring;
}

}  // namespace

bool decode_rows_mma_shape_of(int kv_heads, int group, int head_dim, decode_rows_shape& out) {
  if (kv_heads <= 0 || group <= 0 || (head_dim != 64 && head_dim != 128))
    return false;
  const int chunks = ceil_div(group, decode_mma_heads(group));
  if (chunks > decode_rows_max_warps)
    return false;
  const rm_ring& ring = ring_of_env();
  int kv = std::min({kv_heads, decode_rows_max_warps / chunks, ring.kv_cap});
  while (kv_heads % kv != 0)
    --kv;
  const int stride = kv * head_dim * 2 + rm_pad;
  int tile = ring.budget / (2 * stride) / rm_n * rm_n;
  tile = std::clamp(tile, rm_n, rm_max_tile);
  out.kv_per_block = kv;
  out.warps = kv * chunks;
  out.tile = tile;
  // A tile clamped up past the budget can pass the limit: the default ring then.
  out.stages = ring.stages;
  if (rm_ring_bytes(ring.stages, tile, stride) > rm_max_smem)
    out.stages = rm_stages;
  out.smem_bytes = rm_ring_bytes(out.stages, tile, stride);
  return true;
}

int decode_rows_mma_resident(int head_dim, int group, const decode_rows_shape& shape) {
  int n = 1;
  static_cast<void>(with_decode_mma_shape<128>(head_dim, group, [&]<int D, int GC>() {
    n = resident_blocks<attend_decode_rows_mma<D, GC, false>>(rm_max_smem, shape.warps * 32,
                                                              shape.smem_bytes);
  }));
  return n;
}

cudaError_t launch_decode_rows_mma(attn_args a, int head_dim, const split_args* s,
                                   cudaStream_t stream) {
  decode_rows_shape shape;
  if (!decode_rows_mma_shape_of(a.kv_heads, a.group, head_dim, shape))
    return cudaErrorInvalidValue;
  const split_args use = split_or_one(s, shape.tile);
  if (use.step != shape.tile)
    return cudaErrorInvalidValue;  // the merge would cut other chunks
  cudaError_t err = cudaErrorInvalidValue;
  static_cast<void>(with_decode_mma_shape<128>(
      head_dim, a.group, [&]<int D, int GC>() { err = launch<D, GC>(a, shape, use, stream); }));
  return err;
}

}  // namespace mstar::kernels::cuda::detail
