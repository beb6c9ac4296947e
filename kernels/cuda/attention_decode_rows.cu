// Whole-token-row decode attention (attention_walk::rows): decode steps on
// bf16 arenas with head_dim 64, 128 or 256, one pass or split-KV (the split
// path's merge kernels read its partials).
//
// Why: a page holds page[layer][K or V][slot][kv head][D], so the kv heads
// of one token sit side by side and a page's K (or V) is one contiguous run
// of page_size x token_bytes. The other walks take a block per kv head and
// read that head's 256-byte vector every token_bytes (2 KiB at 8 heads x
// D 128): short pieces far apart, the same token's heads read by unrelated
// blocks. Here one block takes (row, kv heads, chunk of positions) and
// brings each stage in as a few large Hopper bulk copies (cp.async.bulk,
// one per page run of K and of V, completing on an mbarrier), so the DRAM
// and L2 see long sequential reads.
//
// Work item: (row, block of `kv_per_block` kv heads, split). kv_per_block
// is every kv head where the GQA chunks fit in 8 warps (then a run is
// page-contiguous), else fewer (then one copy per token of kv_per_block x
// head_bytes). Warp w takes kv head w / chunks of the block and query heads
// chunk w % chunks (GC = 1, 2 or 4 of its group): q and the GC heads'
// online softmax in registers (f32, exp2 with the scale folded into q),
// each lane holding 8 of D (16 bytes of bf16); a "slot" of D / 8 lanes
// takes one position, so a warp consumes 32 / (D / 8) positions a step
// from shared memory and the slots merge by shuffles at the end. The
// math is lean because at ~4.5 TB/s an SM has only ~100 warp instructions
// per (position, kv head): the slot's GC dot products are summed by one
// halving butterfly (not one per head), and the running sums are rescaled
// only when a head's maximum grows.
//
// The ring: `stages` stages (2; MSTAR_ATTN_ROWS_STAGES and
// MSTAR_ATTN_ROWS_STAGE_KIB tune it) of `tile` positions (K then V, tile x
// kv_per_block x head_bytes each), one mbarrier a stage. Warp 0 issues a
// stage: lane 0 arms the barrier with the stage's bytes (arrive.expect_tx),
// then each lane that starts a run (the tile's first position, or a page's
// first slot) copies it. Every thread waits on the barrier's phase (parity
// of the block's tile count / stages), consumes, and a block barrier after
// the consume guarantees no warp still reads the stage when warp 0 refills
// it with tile j + stages. So stages - 1 tiles are in flight while one is
// consumed: 2 stages of 48 KiB (24 KiB K + 24 KiB V) are 96 KiB a block, 2
// blocks an SM, 96 KiB of K/V in flight an SM (Little's law at ~4.5 TB/s
// and ~1.5 us asks ~50 KiB an SM). Measured on the H200 (session 35, second
// call; 2,048 positions, 32 / 8 heads, D 128), us at 64 rows split / 256
// rows: 2 x 48 KiB 173.4 / 594.5, 3 x 32 180.7 / 643.1, 3 x 64 242.4 /
// 893.8, 4 x 32 279.4 / 1053.2, 4 x 48 257.9 / 955.5: two blocks an SM
// and fewer, larger tiles pay; more bytes in flight alone does not. Positions past the range's end
// are never copied: their stale shared bytes are read but scored -inf and their V skipped, never
// multiplied in. bench/decode_attention_rows_trace.py replays the copies and the ring on the host.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "kernels/cuda/internal/attend_decode_rows.cuh"
#include "kernels/cuda/internal/bulk_copy.cuh"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

// The ring's default stages and stage budget (K + V bytes a stage, at
// most); MSTAR_ATTN_ROWS_STAGES (2 to 4) and MSTAR_ATTN_ROWS_STAGE_KIB (8
// to 64, stages x KiB at most 192) override them, read once: tuning on
// the device without a rebuild.
constexpr int rows_stages = 2;
constexpr int rows_stage_budget = 48 * 1024;
constexpr int rows_max_stages = 4;
constexpr int rows_max_tile = 64;
constexpr int rows_max_threads = decode_rows_max_warps * 32;
constexpr std::size_t rows_max_smem = std::size_t{192} * 1024;

// Lanes a position takes (16 bytes of bf16 each) and positions a warp step.
template <int D>
struct rows_layout {
  static constexpr int lanes = D / 8 < 32 ? D / 8 : 32;
  static constexpr int elems = D / lanes;  // 8: one uint4 of bf16
  static constexpr int per_step = 32 / lanes;
  static_assert(elems == 8);
};

// What every block of a launch knows about its shape.
struct rows_geom {
  int kv_per_block;
  int tile;
  int stages;
};

// Warp 0 issues positions [t0, t0 + n) (n >= 1) into `stage` (K rows at
// stage, V rows at stage + tile x row_bytes): one copy per run of
// positions that are consecutive slots of one page when `whole` (the block
// has every kv head: a row is the token), else one per position.
__device__ __forceinline__ void issue_stage(const attn_args& a, const rows_geom& g,
                                            std::uint32_t row_bytes, bool whole, int first_page,
                                            int kv0, int t0, int n, std::uint32_t stage,
                                            std::uint32_t bar) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int ps = a.arena.page_size;
  // The block barrier before this ordered every warp's reads of the stage
  // before it; the fence carries that order over to the bulk copies.
  fence_proxy_async();
  if (lane == 0)
    mbar_arrive_expect(bar, 2U * static_cast<std::uint32_t>(n) * row_bytes);
  __syncwarp();  // the barrier is armed before any copy can complete on it
  const std::uint32_t v_off = static_cast<std::uint32_t>(g.tile) * row_bytes;
  for (int i = lane; i < n; i += 32) {
    const int t = t0 + i;
    const int slot = t % ps;
    if (whole && i != 0 && slot != 0)
      continue;  // inside a run another lane copies
    const int run = whole ? min(n - i, ps - slot) : 1;
    const std::int32_t page = load_coherent(a.table.kv_indices + first_page + t / ps);
    const std::byte* k = a.arena.at(0, page, slot, kv0);
    const std::uint32_t bytes = static_cast<std::uint32_t>(run) * row_bytes;
    const std::uint32_t dst = stage + static_cast<std::uint32_t>(i) * row_bytes;
    bulk_copy(dst, k, bytes, bar);
    bulk_copy(dst + v_off, k + a.arena.half_bytes, bytes, bar);
  }
}

// One warp's state over an item: its lane's 8 dims of each of GC heads.
template <int GC>
struct rows_state {
  float q[GC][8];
  float acc[GC][8];
  float m[GC];
  float l[GC];
};

__device__ __forceinline__ void unpack8(uint4 raw, float (&f)[8]) {
  const std::uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int e = 0; e < 8; ++e)
    f[e] = __uint_as_float(e % 2 == 0 ? w[e / 2] << 16 : w[e / 2] & 0xffff0000U);
}

// The slot's dot products of its GC heads summed over its lanes, every
// lane getting all GC sums: the halving butterfly (log2(lanes) + GC - 1
// shuffles, where a butterfly per head takes GC log2(lanes)), then one
// broadcast a head from a lane that holds it.
template <int Lanes, int GC>
__device__ __forceinline__ void slot_sums(float (&x)[GC], int lane) {
  if constexpr (GC == 1) {
    x[0] = group_sum<Lanes>(x[0]);
  } else {
    halving_sums<Lanes>(x, lane);
    const float mine = x[0];  // lane l holds head l / (Lanes / GC)
#pragma unroll
    for (int h = 0; h < GC; ++h)
      x[h] = __shfl_sync(0xffffffffU, mine, h * (Lanes / GC), Lanes);
  }
}

// The warp's positions of one stage holding [t0, t0 + tile): slot s takes
// rows s, s + per_step, ... (the same count for every slot: tile is a
// multiple of per_step, so every lane meets the shuffles); rows at or past
// `end` are scored but left out. The running sums are rescaled only when
// a head's maximum grows (after the first few positions, rarely): one
// exp2 and 8 FMAs a head a position where the textbook update takes two
// and 16.
template <int D, int GC>
__device__ __forceinline__ void consume_stage(const std::byte* stage, std::uint32_t row_bytes,
                                              int tile, int head_off, int t0, int end,
                                              rows_state<GC>& st) {
  using L = rows_layout<D>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int slot = lane / L::lanes;
  const std::byte* kp = stage + head_off + (lane % L::lanes) * 16;
  const std::byte* vp = kp + static_cast<std::size_t>(tile) * row_bytes;
  for (int r = slot; r < tile; r += L::per_step) {
    float k[8];
    unpack8(*reinterpret_cast<const uint4*>(kp + static_cast<std::size_t>(r) * row_bytes), k);
    float sc[GC];
#pragma unroll
    for (int h = 0; h < GC; ++h) {
      float dot = 0.0F;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        dot = fmaf(st.q[h][e], k[e], dot);
      sc[h] = dot;
    }
    slot_sums<L::lanes, GC>(sc, lane);  // equal in every lane of the slot
    if (t0 + r >= end)
      continue;  // no shuffles below: slots may part here
    float v[8];
    unpack8(*reinterpret_cast<const uint4*>(vp + static_cast<std::size_t>(r) * row_bytes), v);
#pragma unroll
    for (int h = 0; h < GC; ++h) {
      if (sc[h] > st.m[h]) {  // a new maximum (the first position: m = -inf, alpha 0)
        const float alpha = exp2f(st.m[h] - sc[h]);
        st.m[h] = sc[h];
        st.l[h] *= alpha;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          st.acc[h][e] *= alpha;
      }
      const float p = exp2f(sc[h] - st.m[h]);
      st.l[h] += p;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        st.acc[h][e] = fmaf(p, v[e], st.acc[h][e]);
    }
  }
}

// The warp's slots merged into every lane (butterfly over the lanes that
// hold the same dims); a slot that saw nothing has m = -inf and weighs 0.
template <int D, int GC>
__device__ __forceinline__ void merge_slots_warp(rows_state<GC>& st) {
  using L = rows_layout<D>;
#pragma unroll
  for (int off = L::lanes; off < 32; off *= 2) {
#pragma unroll
    for (int h = 0; h < GC; ++h) {
      const float mo = __shfl_xor_sync(0xffffffffU, st.m[h], off);
      const float lo = __shfl_xor_sync(0xffffffffU, st.l[h], off);
      const float top = fmaxf(st.m[h], mo);
      const float fa = st.m[h] == -INFINITY ? 0.0F : exp2f(st.m[h] - top);
      const float fb = mo == -INFINITY ? 0.0F : exp2f(mo - top);
      st.l[h] = st.l[h] * fa + lo * fb;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float ao = __shfl_xor_sync(0xffffffffU, st.acc[h][e], off);
        st.acc[h][e] = st.acc[h][e] * fa + ao * fb;
      }
      st.m[h] = top;
    }
  }
}

// Block per (row, block of kv heads, split): with s.acc null one pass over
// the row, writing a.out; else the split's chunk of the row (chunk_length,
// s.step == g.tile), writing its partials (nothing for a chunk past the
// end). blockDim.x = 32 x kv_per_block x a.chunks.
template <int D, int GC>
__global__ void __launch_bounds__(rows_max_threads, 2)
    attend_decode_rows(attn_args a, split_args s, rows_geom g) {
  chain_start();
  using L = rows_layout<D>;
  __shared__ alignas(8) std::uint64_t full[rows_max_stages];
  extern __shared__ uint4 rows_smem[];
  auto* smem = reinterpret_cast<std::byte*>(rows_smem);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < rows_max_stages; ++k)
      mbar_init(smem_addr(&full[k]), 1);
    mbar_init_fence();
  }
  __syncthreads();
  const auto row_bytes = static_cast<std::uint32_t>(g.kv_per_block * a.arena.head_bytes);
  const std::uint32_t stage_bytes = 2U * static_cast<std::uint32_t>(g.tile) * row_bytes;
  const std::uint32_t smem_base = smem_addr(smem);
  const bool whole = g.kv_per_block == a.kv_heads;
  const int kv_blocks = a.kv_heads / g.kv_per_block;
  const int hk = warp / a.chunks;  // the warp's kv head within the block
  const int hc = warp % a.chunks;  // and its chunk of that head's group
  const int head_off = hk * static_cast<int>(a.arena.head_bytes);
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
    if (begin >= end)
      continue;
    const int kv0 = kb * g.kv_per_block;
    const int tiles = ceil_div(end - begin, g.tile);
    const auto stages = static_cast<unsigned>(g.stages);
    auto stage_of = [&](int j) { return (filled + static_cast<unsigned>(j)) % stages; };
    auto issue = [&](int j) {
      const int t0 = begin + j * g.tile;
      const unsigned k = stage_of(j);
      issue_stage(a, g, row_bytes, whole, qa.first_page, kv0, t0, min(g.tile, end - t0),
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
    const int dim0 = (lane % L::lanes) * 8;
    rows_state<GC> st;
#pragma unroll
    for (int h = 0; h < GC; ++h) {
      const float* qp = a.q + (static_cast<std::size_t>(qa.token) * a.q_heads + h0 + h) * D + dim0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        st.q[h][e] = h < valid ? qp[e] * a.scale_log2 : 0.0F;
        st.acc[h][e] = 0.0F;
      }
      st.m[h] = -INFINITY;
      st.l[h] = 0.0F;
    }
    for (int j = 0; j < tiles; ++j) {
      const unsigned k = stage_of(j);
      // The stage's fills so far: this is its ((filled + j) / stages)-th.
      mbar_wait(smem_addr(&full[k]), ((filled + static_cast<unsigned>(j)) / stages) & 1U);
      consume_stage<D, GC>(smem + k * stage_bytes, row_bytes, g.tile, head_off, begin + j * g.tile,
                           end, st);
      __syncthreads();  // every warp is done with stage k before it is refilled
      if (warp == 0 && j + g.stages < tiles)
        issue(j + g.stages);
    }
    filled += static_cast<unsigned>(tiles);
    merge_slots_warp<D, GC>(st);
    if (lane >= L::lanes)
      continue;  // slot 0 writes (no barrier before the next item's first)
#pragma unroll
    for (int h = 0; h < GC; ++h) {
      if (h >= valid)
        break;
      const std::size_t head = static_cast<std::size_t>(qa.token) * a.q_heads + h0 + h;
      if (split) {
        const std::size_t at = head * s.splits + chunk;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          s.acc[at * D + dim0 + e] = st.acc[h][e];
        if (lane == 0) {
          s.m[at] = st.m[h];
          s.l[at] = st.l[h];
        }
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          a.out[head * D + dim0 + e] = st.acc[h][e] / st.l[h];
      }
    }
  }
}

template <int D, int GC>
cudaError_t launch(attn_args a, const decode_rows_shape& shape, split_args s, cudaStream_t stream) {
  if (const cudaError_t err = raise_smem_limit<attend_decode_rows<D, GC>>(rows_max_smem);
      err != cudaSuccess)
    return err;
  a.chunks = ceil_div(a.group, GC);
  const unsigned grid =
      grid_of(std::int64_t{a.table.rows} * shape.blocks_per_row(a.kv_heads) * s.splits);
  launch_chained(attend_decode_rows<D, GC>, grid, static_cast<unsigned>(shape.warps * 32),
                 shape.smem_bytes, stream, a, s,
                 rows_geom{shape.kv_per_block, shape.tile, shape.stages});
  return launch_status();
}

// Query heads a warp takes for GQA group `group`.
constexpr int heads_per_warp(int group) {
  return group == 1 ? 1 : (group == 2 ? 2 : 4);
}

// Calls fn.template operator()<D, GC>() for the instantiation of this
// shape; false for a head_dim it does not take.
template <class Fn>
bool with_shape(int head_dim, int group, Fn&& fn) {
  return with_head_dim<256>(head_dim, [&]<int D>() {
    switch (heads_per_warp(group)) {
      case 1:
        fn.template operator()<D, 1>();
        break;
      case 2:
        fn.template operator()<D, 2>();
        break;
      default:
        fn.template operator()<D, 4>();
        break;
    }
  });
}

// The ring's stages and stage budget in bytes: the defaults, or both
// environment variables where each is set, in range and the product fits.
struct ring_config {
  int stages = rows_stages;
  int budget = rows_stage_budget;
};

ring_config ring_from_env() {
  ring_config r;
  const char* s = std::getenv("MSTAR_ATTN_ROWS_STAGES");
  const char* k = std::getenv("MSTAR_ATTN_ROWS_STAGE_KIB");
  const int stages = s != nullptr ? std::atoi(s) : rows_stages;
  const int kib = k != nullptr ? std::atoi(k) : rows_stage_budget / 1024;
  if (stages >= 2 && stages <= rows_max_stages && kib >= 8 && kib <= 64 &&
      static_cast<std::size_t>(stages) * kib * 1024 <= rows_max_smem) {
    r.stages = stages;
    r.budget = kib * 1024;
  }
  return r;
}

}  // namespace

bool decode_rows_shape_of(int kv_heads, int group, int head_dim, decode_rows_shape& out) {
  if (kv_heads <= 0 || group <= 0 || (head_dim != 64 && head_dim != 128 && head_dim != 256))
    return false;
  const int chunks = ceil_div(group, heads_per_warp(group));
  if (chunks > decode_rows_max_warps)
    return false;
  int kv = std::min(kv_heads, decode_rows_max_warps / chunks);
  while (kv_heads % kv != 0)
    --kv;
  const int per_step = 32 / std::min(head_dim / 8, 32);
  const int row_bytes = kv * head_dim * 2;
  static const ring_config ring = ring_from_env();
  int tile = ring.budget / (2 * row_bytes) / per_step * per_step;
  tile = std::clamp(tile, per_step, rows_max_tile);
  out.kv_per_block = kv;
  out.warps = kv * chunks;
  out.tile = tile;
  out.stages = ring.stages;
  out.smem_bytes = static_cast<std::size_t>(ring.stages) * 2 * static_cast<std::size_t>(tile) *
                   static_cast<std::size_t>(row_bytes);
  return true;
}

int decode_rows_resident(int head_dim, int group, const decode_rows_shape& shape) {
  int n = 1;
  static_cast<void>(with_shape(head_dim, group, [&]<int D, int GC>() {
    n = resident_blocks<attend_decode_rows<D, GC>>(rows_max_smem, shape.warps * 32,
                                                   shape.smem_bytes);
  }));
  return n;
}

cudaError_t launch_decode_rows(attn_args a, int head_dim, const split_args* s,
                               cudaStream_t stream) {
  decode_rows_shape shape;
  if (!decode_rows_shape_of(a.kv_heads, a.group, head_dim, shape))
    return cudaErrorInvalidValue;
  const split_args use = split_or_one(s, shape.tile);
  if (use.step != shape.tile)
    return cudaErrorInvalidValue;  // the merge would cut other chunks
  cudaError_t err = cudaErrorInvalidValue;
  static_cast<void>(with_shape(
      head_dim, a.group, [&]<int D, int GC>() { err = launch<D, GC>(a, shape, use, stream); }));
  return err;
}

}  // namespace mstar::kernels::cuda::detail
