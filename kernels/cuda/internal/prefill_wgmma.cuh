#pragma once

// The warpgroup-MMA pieces of the wgmma prefill kernels
// (attention_prefill_wgmma.cu, and the lean consumer's
// attention_prefill_wgmma_lean.cu): the tile shape, the 128-byte swizzle, one consumer
// warpgroup's running rows, its S = Q K^T / online softmax / O += P V on
// one K / V tile, and its output store. Layouts and schedule are explained
// at the top of attention_prefill_wgmma.cu. Only sm_90a .cu files include it.

#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/attend.cuh"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"
#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {

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
// of every `step`-th position, one page-size division a tile. `Threads`
// threads copy, `tid` this one's index among them.
template <int D, int Threads>
__device__ __forceinline__ void load_kv_tile_wg(const attn_args& a, const row_info& ri, int kvh,
                                                int t0, std::uint32_t dk, std::uint32_t dv,
                                                int tid) {
  using S = wg_shape<D, false>;
  static_assert(S::bn * S::chunks % Threads == 0 && Threads % S::chunks == 0);
  constexpr int step = Threads / S::chunks;  // positions between a thread's chunks
  const int ps = a.arena.page_size;
  const int row0 = tid / S::chunks;
  const int chunk = tid % S::chunks;
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
    next_slot(page_slot, in_page, step, ps);
  }
}

// Writes rows r0 .. r0 + Rows - 1 of the item's Q tile (M rows f0 .. f0 +
// tile_m - 1) at `sq` as bf16, swizzled; M rows past the row's last are
// zeros; Q negated for a negative scale (exact). `Threads` threads write,
// `tid` this one's index among them.
template <int D, int Rows, int Threads>
__device__ __forceinline__ void stage_q_wg(const attn_args& a, const row_info& ri, int kvh, int f0,
                                           int m_rows, std::byte* sq, int r0, int tid) {
  using S = wg_shape<D, false>;
  static_assert(Rows * S::chunks % Threads == 0);
  const int group = a.group;
  const float sign = a.scale_log2 < 0.0F ? -1.0F : 1.0F;
#pragma unroll
  for (int i = 0; i < Rows * S::chunks / Threads; ++i) {
    const int c = tid + i * Threads;
    const int row = r0 + c / S::chunks;
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

  // Before an item's first tile: nothing seen.
  __device__ __forceinline__ void start() {
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[dn][e] = 0.0F;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0F;
    }
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        pa[kk][j] = 0U;
    }
  }

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

// Issues S = Q K^T (64 x bn, f32, into `s`, zeroed here) for one warpgroup
// as one committed group, behind a wgmma fence (which also covers wgmmas
// issued after it on registers written before it). `q_addr`: the
// warpgroup's first Q row (a column block of Q is tile_m rows).
template <int D>
__device__ __forceinline__ void issue_s(float (&s)[16][4], std::uint32_t q_addr,
                                        std::uint32_t k_addr) {
  using S = wg_shape<D, false>;
  constexpr int bn = S::bn;
  static_assert(bn == 128, "S is issued as m64n128");
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
}

// The online softmax of a completed S (tile from t0; `masked`: it reaches
// past the warpgroup's first row) for the lane's rows; `place.fw`: the
// warp's first M row. P stays in `s` as f32.
template <int D>
__device__ __forceinline__ void softmax_wg(float (&s)[16][4], int t0, bool masked,
                                           const row_place& place, float scale, group_rows<D>& w,
                                           float (&alpha)[2]) {
  constexpr int bn = wg_shape<D, false>::bn;
  const int f = place.fw + static_cast<int>(threadIdx.x) % 32 / 4;  // the lane's rows f, f + 8
  online_softmax<bn>(s, t0, masked, masked ? place.pos_of(f) : 0, masked ? place.pos_of(f + 8) : 0,
                     scale, w.m, w.l, alpha);
}

// P (f32 in `s`) packed to bf16 as the A fragments of P V: the
// accumulator's n tiles 2kk, 2kk + 1 are k step kk.
__device__ __forceinline__ void pack_p(const float (&s)[16][4], std::uint32_t (&pa)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// O *= alpha by rows, only where some row of the warp raised its maximum
// (past the first tiles most leave every maximum where it was).
template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 8][4], const float (&alpha)[2]) {
  if (!__all_sync(0xffffffffU, alpha[0] == 1.0F && alpha[1] == 1.0F)) {
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      o[dn][0] *= alpha[0];
      o[dn][1] *= alpha[0];
      o[dn][2] *= alpha[1];
      o[dn][3] *= alpha[1];
    }
  }
}

// One warpgroup's 64 M rows against one K / V tile: S = Q K^T, online
// softmax, O += P V. `q_addr`: the warpgroup's first Q row; `place.fw`:
// the warp's first M row. `Defer`: the P V of the previous tile may still
// be in flight on entry (the wait for S completes it before O is touched),
// and this tile's is left in flight.
template <int D, bool Defer>
__device__ __forceinline__ void attend_tile_wg(std::uint32_t q_addr, std::uint32_t k_addr,
                                               std::uint32_t v_addr, int t0, bool masked,
                                               const row_place& place, float scale,
                                               group_rows<D>& w) {
  float s[16][4];
  issue_s<D>(s, q_addr, k_addr);
  wgmma_wait<0>();  // S, and the previous tile's P V where deferred
  wgmma_pin(s);
  w.settle();

  float alpha[2];
  softmax_wg<D>(s, t0, masked, place, scale, w, alpha);
  pack_p(s, w.pa);
  rescale_o<D>(w.o, alpha);
  wgmma_pin(w.o);
  wgmma_fence();
  issue_pv<D>(w.o, w.pa, v_addr);
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

// Returns launch.template operator()<D, Flag>() for head_dim 64 or 128
// and the launcher's flag (`Defer`); cudaErrorInvalidValue for another
// head_dim. Host code: launch_prefill_wgmma's dispatch.
template <class Launch>
cudaError_t with_wg_shape(int head_dim, bool flag, Launch&& launch) {
  switch (head_dim) {
    case 64:
      return flag ? launch.template operator()<64, true>()
                  : launch.template operator()<64, false>();
    case 128:
      return flag ? launch.template operator()<128, true>()
                  : launch.template operator()<128, false>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace mstar::kernels::cuda::detail
