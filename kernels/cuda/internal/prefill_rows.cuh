#pragma once

// The pieces the tensor-core prefill kernels share (attention_prefill.cu on
// mma.sync, attention_prefill_wgmma.cu and attention_prefill_wgmma_lean.cu
// on Hopper's warpgroup MMA): the scan-free enumeration of (row, M tile)
// items and the decoding of one, where an M row sits in its row, and the
// online softmax of one m16 tile's accumulators (the two
// kernels' S accumulators share the m16n8 lane layout). Only .cu files
// include it.

#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/attend.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"
#include "kernels/cuda/internal/paged.cuh"

namespace mstar::kernels::cuda::detail {

// First virtual tile of row r (r = rows: the total).
template <int TileM>
__device__ __forceinline__ long long tile_base(const std::int32_t* qo, int r, int group) {
  return static_cast<long long>(qo[r]) * group / TileM + r;
}

// The row owning virtual tile k: the last r < rows with tile_base(r) <= k.
template <int TileM>
__device__ __forceinline__ int row_of_tile(const std::int32_t* qo, int rows, int group,
                                           long long k) {
  int lo = 0;
  int hi = rows;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (tile_base<TileM>(qo, mid, group) <= k)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// One work item of a prefill kernel: M tile k of kv head kvh, items
// counted kv head fastest and tiles from the last (each row's heaviest
// tiles first).
struct prefill_item {
  int kvh;      // the kv head
  row_info ri;  // the tile's row
  int m_rows;   // the row's M rows: its new tokens x the group
  int f0;       // the tile's first M row in its row
};

// Decodes work item `item` of `tiles` M tiles x a.kv_heads into `it`;
// false where the item has nothing to do (the row's spare tile, or a row
// without pages for its tokens). Block-uniform.
template <int TileM>
__device__ __forceinline__ bool prefill_item_of(const attn_args& a, long long tiles, long long item,
                                                prefill_item& it) {
  it.kvh = static_cast<int>(item % a.kv_heads);
  const long long k = tiles - 1 - item / a.kv_heads;
  const int r = row_of_tile<TileM>(a.table.qo, a.table.rows, a.group, k);
  it.ri = row_at(a.table, a.arena.page_size, r);
  it.m_rows = it.ri.new_tokens * a.group;
  it.f0 = static_cast<int>(k - tile_base<TileM>(a.table.qo, r, a.group)) * TileM;
  return it.f0 < it.m_rows && it.ri.length >= it.ri.new_tokens;
}

// Online softmax of one m16 tile's scores `s` (bn columns from t0) in place:
// when `masked`, positions past the lane's rows' p0 / p1 become -inf; the
// maxima are taken on the raw scores and scaled once (`scale` > 0, so the
// order is the scaled one); the weights 2^(s scale - max) come from one FMA
// each. Raises the running maxima m (exp2 domain), folds the weights into
// the running sums l and returns each half's output rescale in alpha. Lane
// (g = lane / 4, q = lane % 4) holds rows g (e < 2) and g + 8 (e >= 2),
// columns 2q, 2q + 1 of each 8-wide n tile.
template <int Bn>
__device__ __forceinline__ void online_softmax(float (&s)[Bn / 8][4], int t0, bool masked, int p0,
                                               int p1, float scale, float (&m)[2], float (&l)[2],
                                               float (&alpha)[2]) {
  if (masked) {  // warp-uniform: only the diagonal tiles pay for the compares
    const int c0 = t0 + 2 * (static_cast<int>(threadIdx.x) % 4);
#pragma unroll
    for (int n = 0; n < Bn / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (c0 + n * 8 + (e & 1) > (e < 2 ? p0 : p1))
          s[n][e] = -INFINITY;
      }
    }
  }
  float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < Bn / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      top[e / 2] = fmaxf(top[e / 2], s[n][e]);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffU, top[h], 1));
    top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffU, top[h], 2));
    const float mx = fmaxf(m[h], top[h] * scale);
    const float ref = mx == -INFINITY ? 0.0F : mx;  // nothing seen yet: keep zeros
    alpha[h] = exp2_ftz(m[h] - ref);
    m[h] = mx;
    float sum = 0.0F;
#pragma unroll
    for (int n = 0; n < Bn / 8; ++n) {
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        s[n][e] = exp2_ftz(fmaf(s[n][e], scale, -ref));
        sum += s[n][e];
      }
    }
    l[h] = l[h] * alpha[h] + sum;  // this lane's columns; the quad sums at the end
  }
}

// Where a warp's M rows sit in their row: M row f (of the row's m_rows)
// is at absolute position prefix + min(f, m_rows - 1) / group (rows past the
// last clamp to it). Only masked tiles ask, so the lane's positions are not
// held in registers across the K loop.
struct row_place {
  int prefix;
  int m_rows;
  int group;
  int fw;  // the warp's first M row

  __device__ __forceinline__ int pos_of(int f) const { return prefix + min(f, m_rows - 1) / group; }
};

// Moves a thread's place in the row's pages (page_slot, in_page: page
// size `ps`) on by `step` positions: the step between the positions one
// thread copies in the three prefill kernels' K / V tile loads.
__device__ __forceinline__ void next_slot(int& page_slot, int& in_page, int step, int ps) {
  in_page += step;
  while (in_page >= ps) {  // once at most unless pages are shorter than `step`
    in_page -= ps;
    ++page_slot;
  }
}

}  // namespace mstar::kernels::cuda::detail
