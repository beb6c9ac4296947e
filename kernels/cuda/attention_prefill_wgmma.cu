// The prefill attention of attention_prefill.cu on Hopper's warpgroup MMA
// (wgmma.mma_async; this file alone builds for sm_90a), taken instead of it
// where `attention_prefill::wgmma` or `wgmma_serial` is chosen
// (set_attention_prefill, or MSTAR_ATTN_PREFILL=wgmma / wgmma_serial) for
// head_dim 64 / 128 on a compute 9.0 device
// (see `prefill_wgmma_takes`). The items, the masks and the softmax are that
// kernel's (internal/prefill_rows.cuh): work item (row, tile of 128 M rows,
// kv head), M row f = (token f / group, head kvh * group + f % group).
//
// A block is two warpgroups of 128 threads; warpgroup w owns M rows 64w ..
// 64w + 63 of the item, warp i of it rows 16i .. 16i + 15 of those (the
// wgmma accumulator's rows). Q (bf16, negated for a negative scale) and K /
// V tiles of 128 positions sit in shared memory in the 128-byte swizzle
// layout wgmma reads (internal/wgmma.cuh): a tile of R rows and D columns
// is D / 64 column blocks of R rows x 128 bytes, 16-byte chunk c of row r at
// chunk c ^ (r % 8). Paged K / V rows (one kv head of one position, 256
// bytes at D 128, `token_bytes` apart) are gathered with cp.async 16 bytes
// at a time straight to their swizzled places; Q is written with plain
// stores. Each writer fences its writes to the async proxy before the
// barrier that publishes them.
//
// Per K tile each warpgroup issues S = Q K^T as D / 16 wgmma m64n128k16
// from two shared descriptors (K-major A and B), waits, runs the online
// softmax on its f32 accumulators (per warp the m16n8 layout of the mma.sync
// kernel, so `online_softmax` serves unchanged), packs P to bf16 in
// registers (the accumulator's n tiles 2kk, 2kk + 1 are the A fragment of k
// step kk), rescales O where a maximum rose, and issues O += P V as 8
// wgmma m64nDk16 with A from registers and V MN-major (imm-trans-b 1). One
// barrier per K tile as in the mma.sync kernel: after it tile kt is
// visible, and the copy of tile kt + 1 starts into a buffer no warpgroup
// still reads. `wgmma_serial` (Defer false): two K / V buffers, P V waited
// at the end of its tile, so at barrier kt every wgmma on tile kt - 1 is
// done. `wgmma` (Defer true): three buffers, P V left in flight until the
// next tile's S wait (which completes both), so P V runs on through the
// barrier and the next copy's issue; at barrier kt tile kt - 1's P
// V may still read buffer (kt - 1) % 3, never the (kt + 1) % 3 being
// filled, and a warpgroup that skips a tile waits out its last P V there.
// Warpgroups whose rows all lie before a K tile skip it (the test is
// uniform over the warpgroup, as wgmma needs).
// bench/attention_prefill_wgmma_trace.py replays the layouts, descriptors,
// fragments and buffer reuse on the host.

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>

#include "kernels/cuda/internal/attend_prefill.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"
#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

constexpr int wg_groups = 2;  // warpgroups a block
constexpr int wg_threads = wg_groups * 128;

// Tile shape and shared memory of one block: Q, then `stages` K and
// `stages` V tiles, each 1,024-byte aligned (the swizzle atoms); the base
// is aligned by hand, hence the spare 1,024 bytes. `Defer`: P V left in
// flight until the next tile's S is done, which takes a third buffer (225
// KiB at D 128).
template <int D, bool Defer>
struct wg_shape {
  static constexpr int group_m = 64;                  // M rows a warpgroup
  static constexpr int tile_m = wg_groups * group_m;  // M rows an item
  static constexpr int bn = 128;                      // key positions a K / V tile
  static constexpr int chunks = D / 8;                // 16-byte chunks a head vector
  static constexpr std::uint32_t q_bytes = tile_m * D * 2;
  static constexpr std::uint32_t kv_bytes = bn * D * 2;  // one K (or V) tile
  static constexpr int stages = Defer ? 3 : 2;
  static constexpr std::size_t smem_bytes = q_bytes + 2 * stages * kv_bytes + 1024;
  static_assert(D % 64 == 0, "whole 128-byte swizzle rows");
  static_assert(bn * chunks % wg_threads == 0 && tile_m * chunks % wg_threads == 0);
  static_assert(wg_threads % chunks == 0);  // a thread keeps its column chunk
};

// Byte offset of 16-byte chunk c of row r in a swizzled tile of `Rows` rows.
template <int Rows>
__device__ __forceinline__ std::uint32_t swizzled(int r, int c) {
  return static_cast<std::uint32_t>((c / 8) * Rows * 128 + r * 128 + (((c % 8) ^ (r % 8)) << 4));
}

// Starts the copy of K and V at positions t0 .. t0 + bn - 1 of the row into
// the tiles at shared addresses dk, dv; positions at or past `length` are
// zero-filled. As the mma.sync kernel's: a thread copies one column chunk
// of every `step`-th position, one page-size division a tile.
template <int D>
__device__ __forceinline__ void load_kv_tile_wg(const attn_args& a, const row_info& ri, int kvh,
                                                int t0, std::uint32_t dk, std::uint32_t dv) {
  using S = wg_shape<D, false>;
  constexpr int step = wg_threads / S::chunks;  // positions between a thread's chunks
  const int ps = a.arena.page_size;
  const int row0 = static_cast<int>(threadIdx.x) / S::chunks;
  const int chunk = static_cast<int>(threadIdx.x) % S::chunks;
  int page_slot = (t0 + row0) / ps;
  int in_page = (t0 + row0) % ps;
  const std::byte* head = a.arena.at(0, 0, 0, kvh) + chunk * 16;  // K at page 0, slot 0
#pragma unroll
  for (int i = 0; i < S::bn / step; ++i) {
    const int row = row0 + i * step;
    const std::byte* ks = a.arena.base;
    const std::byte* vs = a.arena.base;
    int bytes = 0;
    if (t0 + row < ri.length) {
      const std::int32_t page = a.table.kv_indices[ri.first_page + page_slot];
      ks = head + static_cast<std::size_t>(page) * a.arena.page_bytes +
           static_cast<std::size_t>(in_page) * a.arena.token_bytes;  // arena.at(0, ...)
      vs = ks + a.arena.half_bytes;                                  // arena.at(1, ...)
      bytes = 16;
    }
    const std::uint32_t off = swizzled<S::bn>(row, chunk);
    cp_async16(dk + off, ks, bytes);
    cp_async16(dv + off, vs, bytes);
    in_page += step;
    while (in_page >= ps) {  // once at most unless pages are shorter than `step`
      in_page -= ps;
      ++page_slot;
    }
  }
}

// Writes the item's Q tile (M rows f0 .. f0 + tile_m - 1) at `sq` as bf16,
// swizzled; M rows past the row's last are zeros; Q negated for a negative
// scale (exact).
template <int D>
__device__ __forceinline__ void stage_q_wg(const attn_args& a, const row_info& ri, int kvh, int f0,
                                           int m_rows, std::byte* sq) {
  using S = wg_shape<D, false>;
  const int group = a.group;
  const float sign = a.scale_log2 < 0.0F ? -1.0F : 1.0F;
#pragma unroll
  for (int i = 0; i < S::tile_m * S::chunks / wg_threads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * wg_threads;
    const int row = c / S::chunks;
    const int chunk = c % S::chunks;
    const int f = f0 + row;
    uint4 packed = make_uint4(0U, 0U, 0U, 0U);
    if (f < m_rows) {
      const int token = ri.first_token + f / group;
      const int head = kvh * group + f % group;
      const auto* src = reinterpret_cast<const float4*>(
          a.q + (static_cast<std::size_t>(token) * a.q_heads + head) * D + chunk * 8);
      const float4 x = src[0];
      const float4 y = src[1];
      packed = make_uint4(pack_bf16(sign * x.x, sign * x.y), pack_bf16(sign * x.z, sign * x.w),
                          pack_bf16(sign * y.x, sign * y.y), pack_bf16(sign * y.z, sign * y.w));
    }
    *reinterpret_cast<uint4*>(sq + swizzled<S::tile_m>(row, chunk)) = packed;
  }
}

// Running state of one thread's rows (g, g + 8 of its warp's 16): output in
// the accumulator layout, maxima and sums.
template <int D>
struct group_rows {
  float o[D / 8][4];
  float m[2];
  float l[2];
  // P of the last tile: the A operand of a P V that may still run, so held
  // (pinned) until the wait that completes it, never reused before.
  std::uint32_t pa[8][4];

  // After a wait that completes every wgmma group: O and P are settled.
  __device__ __forceinline__ void settle() {
    wgmma_pin(o);
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("" : "+r"(pa[kk][j])::"memory");
    }
  }
};

// O += P V for one warpgroup: 64 x D, from the packed P fragments and the V
// tile at shared address v_addr (MN-major: rows are positions).
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4], const std::uint32_t (&pa)[8][4],
                                         std::uint32_t v_addr) {
  constexpr int bn = wg_shape<D, false>::bn;
#pragma unroll
  for (int kk = 0; kk < bn / 16; ++kk) {
    // K step kk: positions 16kk .. 16kk + 15, two 8-row groups 1,024 bytes
    // apart; D / 64 column blocks bn * 128 bytes apart.
    const std::uint64_t vd = wgmma_desc(v_addr + kk * 16 * 128, bn * 128, 1024);
    if constexpr (D == 128)
      wgmma_rs_n128_mn(o, pa[kk], vd);
    else
      wgmma_rs_n64_mn(o, pa[kk], vd);
  }
}

// One warpgroup's 64 M rows against one K / V tile: S = Q K^T, online
// softmax, O += P V. `q_addr`: the warpgroup's first Q row (a column block
// of Q is tile_m rows); `place.fw`: the warp's first M row. `Defer`: the P
// V of the previous tile may still be in flight on entry (the wait for S
// completes it before O is touched), and this tile's is left in flight.
template <int D, bool Defer>
__device__ __forceinline__ void attend_tile_wg(std::uint32_t q_addr, std::uint32_t k_addr,
                                               std::uint32_t v_addr, int t0, bool masked,
                                               const row_place& place, float scale,
                                               group_rows<D>& w) {
  using S = wg_shape<D, false>;
  constexpr int bn = S::bn;
  static_assert(bn == 128, "S is issued as m64n128");
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float s[bn / 8][4];
#pragma unroll
  for (int n = 0; n < bn / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s[n][e] = 0.0F;
  }
  wgmma_pin(s);
  wgmma_fence();
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    // K step kc: column block kc / 4, 32 bytes into its 128-byte rows per
    // step inside it; 8-row groups 1,024 bytes apart (LBO unused: 16).
    const std::uint32_t in_row = (kc % 4) * 32U;
    const std::uint64_t qd = wgmma_desc(q_addr + (kc / 4) * S::tile_m * 128 + in_row, 16, 1024);
    const std::uint64_t kd = wgmma_desc(k_addr + (kc / 4) * bn * 128 + in_row, 16, 1024);
    wgmma_ss_n128(s, qd, kd, kc > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();  // S, and the previous tile's P V where deferred
  wgmma_pin(s);
  w.settle();

  float alpha[2];
  const int f = place.fw + lane / 4;  // the lane's rows f, f + 8
  online_softmax<bn>(s, t0, masked, masked ? place.pos_of(f) : 0, masked ? place.pos_of(f + 8) : 0,
                     scale, w.m, w.l, alpha);
  auto& pa = w.pa;
#pragma unroll
  for (int kk = 0; kk < bn / 16; ++kk) {
    pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
  // Rescale only where some row of the warp raised its maximum (past the
  // first tiles most leave every maximum where it was).
  if (!__all_sync(0xffffffffU, alpha[0] == 1.0F && alpha[1] == 1.0F)) {
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      w.o[dn][0] *= alpha[0];
      w.o[dn][1] *= alpha[0];
      w.o[dn][2] *= alpha[1];
      w.o[dn][3] *= alpha[1];
    }
  }
  wgmma_pin(w.o);
  wgmma_fence();
  issue_pv<D>(w.o, pa, v_addr);
  wgmma_commit();
  if constexpr (!Defer) {
    wgmma_wait<0>();
    w.settle();
  }
}

// Writes the warp's normalised output rows (first M row fw), skipping M
// rows past the row's last.
template <int D>
__device__ __forceinline__ void store_rows_wg(const attn_args& a, const row_info& ri, int kvh,
                                              int fw, int m_rows, const group_rows<D>& w) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = w.l[h];
    sum += __shfl_xor_sync(0xffffffffU, sum, 1);
    sum += __shfl_xor_sync(0xffffffffU, sum, 2);
    const int f = fw + lane / 4 + 8 * h;
    if (f >= m_rows)
      continue;
    const float inv = 1.0F / sum;
    const int token = ri.first_token + f / a.group;
    const int head = kvh * a.group + f % a.group;
    float* op = a.out + (static_cast<std::size_t>(token) * a.q_heads + head) * D;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<float2*>(op + dn * 8 + 2 * (lane % 4)) =
          make_float2(w.o[dn][2 * h] * inv, w.o[dn][2 * h + 1] * inv);
    }
  }
}

template <int D, bool Defer>
__global__ void __launch_bounds__(wg_threads, 1) attend_prefill_wgmma(attn_args a) {
  using S = wg_shape<D, Defer>;
  constexpr int bn = S::bn;
  constexpr int tile_m = S::tile_m;
  extern __shared__ uint4 wg_smem[];
  const std::uint32_t raw = smem_addr(wg_smem);
  const std::uint32_t base = (raw + 1023U) & ~1023U;  // swizzle atoms 1,024-byte aligned
  std::byte* const sq = reinterpret_cast<std::byte*>(wg_smem) + (base - raw);
  const std::uint32_t k0 = base + S::q_bytes;             // K tiles: k0 + i kv_bytes
  const std::uint32_t v0 = k0 + S::stages * S::kv_bytes;  // V tiles: v0 + i kv_bytes
  const int wg = static_cast<int>(threadIdx.x) / 128;
  const int warp = static_cast<int>(threadIdx.x) / 32 % 4;  // in the warpgroup
  const int rows = a.table.rows;
  const long long tiles = tile_base<tile_m>(a.table.qo, rows, a.group);
  const long long total = tiles * a.kv_heads;
  const std::uint32_t q_addr = base + wg * S::group_m * 128;  // the warpgroup's rows
  for (long long item = blockIdx.x; item < total; item += gridDim.x) {
    // Block-uniform: every `continue` and barrier below is taken by all.
    const int kvh = static_cast<int>(item % a.kv_heads);
    const long long k = tiles - 1 - item / a.kv_heads;
    const int r = row_of_tile<tile_m>(a.table.qo, rows, a.group, k);
    const row_info ri = row_at(a.table, a.arena.page_size, r);
    const int m_rows = ri.new_tokens * a.group;
    const int f0 = static_cast<int>(k - tile_base<tile_m>(a.table.qo, r, a.group)) * tile_m;
    if (f0 >= m_rows || ri.length < ri.new_tokens)
      continue;  // the row's spare tile, or a row without pages for its tokens
    const int fg = f0 + wg * S::group_m;  // the warpgroup's first M row
    const row_place place{ri.length - ri.new_tokens, m_rows, a.group, fg + warp * 16};
    const int n_kt = place.pos_of(f0 + tile_m - 1) / bn + 1;

    // The previous item ended at a barrier after its last wgmma wait: every
    // buffer is free.
    load_kv_tile_wg<D>(a, ri, kvh, 0, k0, v0);
    cp_async_commit();
    stage_q_wg<D>(a, ri, kvh, f0, m_rows, sq);

    // The warpgroup attends tiles up to its last row's position; none if it
    // has no valid M row. Uniform over the warpgroup.
    const int gmin = place.pos_of(fg);
    const int gmax = fg < m_rows ? place.pos_of(fg + S::group_m - 1) : -1;
    group_rows<D> w;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w.o[dn][e] = 0.0F;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      w.m[h] = -INFINITY;
      w.l[h] = 0.0F;
    }
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w.pa[kk][j] = 0U;
    }
    for (int kt = 0; kt < n_kt; ++kt) {
      const std::uint32_t buf = static_cast<std::uint32_t>(kt % S::stages) * S::kv_bytes;
      const std::uint32_t next = static_cast<std::uint32_t>((kt + 1) % S::stages) * S::kv_bytes;
      cp_async_wait<0>();          // this thread's copies of tile kt (the only ones in flight)
      fence_proxy_async_shared();  // its copies and Q stores, to the wgmma's async proxy
      // Tile kt (and Q) visible to every warpgroup, and every warpgroup has
      // waited out its wgmmas on tile kt - 1 (two stages) or kt - 2 (three:
      // tile kt - 1's P V may still run): buffer `next` is free.
      __syncthreads();
      if (kt + 1 < n_kt) {
        load_kv_tile_wg<D>(a, ri, kvh, (kt + 1) * bn, k0 + next, v0 + next);
        cp_async_commit();
      }
      const int t0 = kt * bn;
      if (t0 <= gmax) {
        attend_tile_wg<D, Defer>(q_addr, k0 + buf, v0 + buf, t0, t0 + bn - 1 > gmin, place,
                                 fabsf(a.scale_log2), w);
      } else if constexpr (Defer) {
        // Done before the other warpgroup: the last P V must finish before
        // the next barrier hands its buffer to tile kt + 2.
        wgmma_wait<0>();
        w.settle();
      }
    }
    wgmma_wait<0>();  // the last P V where deferred
    w.settle();
    if (place.fw < m_rows)
      store_rows_wg<D>(a, ri, kvh, place.fw, m_rows, w);
    __syncthreads();  // every warpgroup done with Q and the last K / V tile
  }
}

template <int D, bool Defer>
cudaError_t launch_prefill_wgmma_d(const attn_args& a, std::int64_t token_bound,
                                   cudaStream_t stream) {
  using S = wg_shape<D, Defer>;
  // Raise the dynamic shared memory limit once per device.
  constexpr int max_devices = 64;
  static std::array<std::atomic<bool>, max_devices> raised{};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess)
    return err;
  const bool cached = device >= 0 && device < max_devices;
  if (!cached || !raised[static_cast<std::size_t>(device)].load(std::memory_order_relaxed)) {
    err = cudaFuncSetAttribute(attend_prefill_wgmma<D, Defer>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(S::smem_bytes));
    if (err != cudaSuccess)
      return err;
    if (cached)
      raised[static_cast<std::size_t>(device)].store(true, std::memory_order_relaxed);
  }
  // Items bound as the mma.sync kernel's; blocks past the device-side count
  // exit at once, the rest stride.
  const std::int64_t items = (token_bound * a.group / S::tile_m + a.table.rows + 1) * a.kv_heads;
  const std::int64_t cap = std::int64_t{sm_count()} * 32;
  const auto grid = static_cast<unsigned>(std::max<std::int64_t>(1, std::min(items, cap)));
  attend_prefill_wgmma<D, Defer><<<grid, wg_threads, S::smem_bytes, stream>>>(a);
  return launch_status();
}

// Whether the current device runs sm_90a code (compute capability 9.0),
// asked once per device.
bool device_is_sm90() {
  constexpr int max_devices = 64;
  static std::array<std::atomic<int>, max_devices> known{};  // 0 unknown, 1 yes, 2 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return false;
  const bool cached = device >= 0 && device < max_devices;
  if (cached) {
    const int k = known[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
    if (k != 0)
      return k == 1;
  }
  int major = 0;
  int minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  const bool yes = major == 9 && minor == 0;
  if (cached)
    known[static_cast<std::size_t>(device)].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}

}  // namespace

bool prefill_wgmma_takes(const paged_attention_params& p) {
  const int d = p.arena.geometry.head_dim;
  return prefill_takes(p) && (d == 64 || d == 128) && device_is_sm90();
}

cudaError_t launch_prefill_wgmma(const attn_args& a, int head_dim, bool defer,
                                 std::int64_t token_bound, cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return defer ? launch_prefill_wgmma_d<64, true>(a, token_bound, stream)
                   : launch_prefill_wgmma_d<64, false>(a, token_bound, stream);
    case 128:
      return defer ? launch_prefill_wgmma_d<128, true>(a, token_bound, stream)
                   : launch_prefill_wgmma_d<128, false>(a, token_bound, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace mstar::kernels::cuda::detail
