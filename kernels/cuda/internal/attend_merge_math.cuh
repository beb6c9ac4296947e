#pragma once

// The arithmetic of the split-KV merges in one place: the block merge
// kernel (attend_merge.cuh) and the fused merge the split kernels run
// themselves (attention_merge::fused: attention_decode_mma.cu,
// attention_decode_rows_mma.cu, attention_split.cu) call these functions
// on the same values in the same order, so the fused merge writes the
// block merge's bits. Device functions only; it defines no kernels.
//
// The block merge, per (row, query head) over `used` partials: thread i
// weighs partial i, f_i = 2^(m_i - M) (M the maximum); the denominator is
// block_sum's: each warp's butterfly (group_sum) over its 32 l_i f_i,
// then the four warp sums; output element d is four sums, sum c adding
// f_k acc_k[d] over k = c, c + 4, ... (warp c's), added in order onto 0
// and divided by the denominator. The fused merge gives each query head a
// warp: lane l weighs partials l, l + 32, l + 64, l + 96 (the four warps'
// lanes l), and keeps the four output sums of its elements itself.

#include "kernels/cuda/internal/attend_split.cuh"

namespace mstar::kernels::cuda::detail {

/// Output sums a merge keeps per element (the block merge's warps).
inline constexpr int merge_sums = 4;
static_assert(max_splits == merge_sums * 32, "a warp's lanes weigh four partials each");

/// Partial i's weight: 2^(m_i - M), M the maximum of the row's partials; 0
/// for an empty one (m_i = -inf).
__device__ __forceinline__ float merge_weight(float mi, float top) {
  return mi == -INFINITY ? 0.0F : exp2f(mi - top);
}

/// One partial into an output sum: o += wk * v, element by element, as
/// fused multiply-adds.
template <int N>
__device__ __forceinline__ void merge_add(float (&o)[N], float wk, const float (&v)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e)
    o[e] = fmaf(wk, v[e], o[e]);
}

/// The denominator from the four warp sums of l_i f_i (sum c over partials
/// 32c .. 32c + 31, by group_sum): what block_sum's second butterfly makes
/// of them (lanes 0-3 holding them, the others 0; every term is >= 0, so
/// the zeros add nothing).
__device__ __forceinline__ float merge_denominator(const float (&w)[merge_sums]) {
  return (w[0] + w[2]) + (w[1] + w[3]);
}

/// An output element from its output sums, added in order onto 0, over
/// the denominator (a row without positions: 0 / 0, as the one-pass
/// kernel).
__device__ __forceinline__ float merge_result(const float (&o)[merge_sums], float sum) {
  float r = 0.0F;
#pragma unroll
  for (int c = 0; c < merge_sums; ++c)
    r += o[c];
  return r / sum;
}

/// attention_merge::fused, the arrival: every thread of a split block calls
/// it (block-uniform arguments) once its partials of an item are written,
/// `used` the partials the item's row writes; true, in every thread, for
/// the block that arrived last. `counter` counts the item's arrivals and
/// wraps back to 0 at the last (atomicInc), so it is 0 again for the next
/// launch or graph replay. The fences order every thread's partials before
/// the arrival, and the last block's reads after it.
__device__ __forceinline__ bool arrive_last(unsigned* counter, int used) {
  __threadfence();
  __syncthreads();
  int last = 0;
  if (threadIdx.x == 0) {
    const auto top = static_cast<unsigned>(used - 1);
    last = atomicInc(counter, top) == top ? 1 : 0;
  }
  last = __syncthreads_or(last);
  if (last != 0)
    __threadfence();
  return last != 0;
}

/// Elements of a lane's D / 32 a fused merge pass takes at most (its loads
/// are float2 or float4).
template <int D>
inline constexpr int merge_elems = D / 32 < 4 ? D / 32 : 4;

/// `n` floats of the partials at `p` (16-byte aligned for 4, 8 for 2),
/// from L2: other blocks of this launch wrote them.
template <int N>
__device__ __forceinline__ void load_partial(float (&v)[N], const float* p) {
  if constexpr (N == 4) {
    const float4 x = __ldcg(reinterpret_cast<const float4*>(p));
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  } else {
    static_assert(N == 2);
    const float2 x = __ldcg(reinterpret_cast<const float2*>(p));
    v[0] = x.x;
    v[1] = x.y;
  }
}

/// One query head's fused merge by one warp: its `used` partials from
/// `part` (index into s.m / s.l; s.acc at part * D) into `out` (D floats),
/// the block merge's sums in its order. Lane l weighs partials l + 32j and
/// owns elements l D / 32 onwards; each pass, `E` of them walk the
/// partials in order, `Batch` partials' loads in flight, partial k into
/// output sum k % 4, its weight shuffled from lane k % 32. Registers: about
/// (Batch + 4) E.
template <int D, int E, int Batch>
__device__ __forceinline__ void merge_head_warp(const split_args& s, std::size_t part, int used,
                                                float* out) {
  constexpr int per_lane = D / 32;
  static_assert((E == 2 || E == 4) && per_lane % E == 0);
  static_assert(Batch % merge_sums == 0 && 32 % Batch == 0);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float mi[merge_sums];
  float top = -INFINITY;
#pragma unroll
  for (int j = 0; j < merge_sums; ++j) {
    const int k = lane + 32 * j;
    mi[j] = k < used ? __ldcg(s.m + part + k) : -INFINITY;
    top = fmaxf(top, mi[j]);
  }
  top = group_max(top);  // block_max's maximum: the same set, max is exact
  float f[merge_sums];
  float warp_sum[merge_sums];
#pragma unroll
  for (int j = 0; j < merge_sums; ++j) {
    const int k = lane + 32 * j;
    f[j] = merge_weight(mi[j], top);
    warp_sum[j] = group_sum(k < used ? __ldcg(s.l + part + k) * f[j] : 0.0F);
  }
  const float sum = merge_denominator(warp_sum);
#pragma unroll
  for (int pass = 0; pass < per_lane / E; ++pass) {
    const int d0 = lane * per_lane + pass * E;
    const float* src = s.acc + part * D + d0;
    float o[merge_sums][E] = {};
    for (int k0 = 0; k0 < used; k0 += Batch) {
      float v[Batch][E];
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        if (k0 + b < used) {
          load_partial<E>(v[b], src + static_cast<std::size_t>(k0 + b) * D);
        } else {
#pragma unroll
          for (int e = 0; e < E; ++e)
            v[b][e] = 0.0F;
        }
      }
      const int j = k0 / 32;  // the batch lies within one j: Batch divides 32
      const float fj = j == 0 ? f[0] : (j == 1 ? f[1] : (j == 2 ? f[2] : f[3]));
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        const float wk = __shfl_sync(0xffffffffU, fj, (k0 + b) % 32);
        if (k0 + b < used)
          merge_add(o[b % merge_sums], wk, v[b]);  // k0 % 4 == 0
      }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float by_sum[merge_sums] = {o[0][e], o[1][e], o[2][e], o[3][e]};
      out[d0 + e] = merge_result(by_sum, sum);
    }
  }
}

/// attention_merge::fused: every thread of a split block calls it
/// (block-uniform arguments, s.counters set) after writing its partials of
/// query heads [h0, h0 + heads) of token `token`, a row of `positions`
/// positions; and, for a row without positions, chunk 0's block, which
/// wrote none. The last of the row's used_chunks blocks to arrive merges
/// those heads into a.out, a warp a head (merge_head_warp's E and Batch);
/// without partials the caller merges at once (0 / 0, as the merge
/// kernels). Uses no shared memory; leaves no barrier pending.
template <int D, int E, int Batch>
__device__ __forceinline__ void fused_merge(const attn_args& a, const split_args& s, int token,
                                            int positions, int h0, int heads) {
  const int used = used_chunks(positions, s);
  const std::size_t head0 = static_cast<std::size_t>(token) * a.q_heads + h0;
  if (used > 0 && !arrive_last(s.counters + head0, used))
    return;
  const int warps = static_cast<int>(blockDim.x) / 32;
  for (int h = static_cast<int>(threadIdx.x) / 32; h < heads; h += warps) {
    merge_head_warp<D, E, Batch>(s, (head0 + h) * s.splits, used,
                                 a.out + (head0 + static_cast<std::size_t>(h)) * D);
  }
}

}  // namespace mstar::kernels::cuda::detail
