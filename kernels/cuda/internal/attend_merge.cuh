#pragma once

// The two kernels that merge the split-KV decode path's partials
// (attend_split.cuh) into the output (attention_merge::warp,
// attention_merge::block; attend_merge_math.cuh the block merge's sums,
// which the split kernels' fused merge shares). It defines kernels: only
// attention_split.cu includes it.

#include "kernels/cuda/internal/attend_merge_math.cuh"

namespace mstar::kernels::cuda::detail {

inline constexpr int merge_warps = 4;

/// attention_merge::warp: a warp per (row, query head), `merge_warps` a
/// block: out = sum_i acc_i 2^(m_i - M) / sum_i l_i 2^(m_i - M) over the
/// row's written partials, M their maximum. Each lane reads the partials one
/// by one for its elements: `used` dependent rounds of L2 reads.
__global__ void __launch_bounds__(merge_warps * 32)
    merge_splits_warp(attn_args a, split_args s, int head_dim) {
  chain_start();
  __shared__ float s_weight[merge_warps][max_splits];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  float* weight = s_weight[warp];
  const long long total = static_cast<long long>(a.table.rows) * a.q_heads;
  for (long long w = static_cast<long long>(blockIdx.x) * merge_warps + warp; w < total;
       w += static_cast<long long>(gridDim.x) * merge_warps) {
    const int h = static_cast<int>(w % a.q_heads);
    const query_at qa = query_of(a, a.table.rows, w / a.q_heads);
    const int used = used_chunks(qa.positions, s);
    if (written_directly(qa.positions, s))
      continue;  // warp-uniform: the split kernel wrote the row
    const std::size_t part = (static_cast<std::size_t>(qa.token) * a.q_heads + h) * s.splits;
    float top = -INFINITY;
    for (int i = lane; i < used; i += 32)
      top = fmaxf(top, s.m[part + i]);
    top = group_max(top);
    float sum = 0.0F;
    for (int i = lane; i < used; i += 32) {
      const float mi = s.m[part + i];
      const float f = mi == -INFINITY ? 0.0F : exp2f(mi - top);  // an empty partial weighs 0
      weight[i] = f;
      sum += s.l[part + i] * f;
    }
    sum = group_sum(sum);
    __syncwarp();
    float* out = a.out + (static_cast<std::size_t>(qa.token) * a.q_heads + h) * head_dim;
    for (int d = lane; d < head_dim; d += 32) {
      float o = 0.0F;
      for (int i = 0; i < used; ++i)
        o += weight[i] * s.acc[(part + i) * head_dim + d];
      out[d] = o / sum;  // a row without positions: 0 / 0, as the one-pass kernel
    }
    __syncwarp();  // the weights are read before the next item overwrites them
  }
}

inline constexpr int merge_threads = 128;

/// attention_merge::block: a block per (row, query head), the same sums.
/// Thread i weighs partial i (max_splits == merge_threads); warp w then adds
/// partials w, w + 4, ... over its lanes' D / 32 output elements with four
/// vector loads in flight, and the warps' sums are added in warp order: the
/// order is fixed, so results repeat bit for bit. At one row of 64 partials
/// a warp waits on 4 rounds of L2 reads, where the warp merge's lanes wait
/// on 64. The arithmetic is attend_merge_math.cuh's, which the fused merge
/// repeats.
template <int D>
__global__ void __launch_bounds__(merge_threads) merge_splits_block(attn_args a, split_args s) {
  chain_start();
  static_assert(max_splits == merge_threads, "one thread weighs one partial");
  constexpr int warps = merge_threads / 32;
  static_assert(warps == merge_sums, "a warp an output sum");
  constexpr int per_lane = D / 32;  // 2, 4 or 8
  __shared__ float s_weight[max_splits];
  __shared__ float s_red[warps][D];
  __shared__ float s_scratch[32];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int i = static_cast<int>(threadIdx.x);
  const long long total = static_cast<long long>(a.table.rows) * a.q_heads;
  for (long long w = blockIdx.x; w < total; w += gridDim.x) {
    const int h = static_cast<int>(w % a.q_heads);
    const query_at qa = query_of(a, a.table.rows, w / a.q_heads);
    const int used = used_chunks(qa.positions, s);
    if (written_directly(qa.positions, s))
      continue;  // block-uniform: the split kernel wrote the row
    const std::size_t part = (static_cast<std::size_t>(qa.token) * a.q_heads + h) * s.splits;
    const float mi = i < used ? s.m[part + i] : -INFINITY;
    const float top = block_max(mi, s_scratch);  // ends with a barrier: s_scratch is free
    const float f = merge_weight(mi, top);       // unused partials weigh 0
    s_weight[i] = f;
    const float warp_sum = group_sum(i < used ? s.l[part + i] * f : 0.0F);
    if (lane == 0)
      s_scratch[warp] = warp_sum;
    __syncthreads();  // publishes s_weight and the warp sums
    const float by_warp[warps] = {s_scratch[0], s_scratch[1], s_scratch[2], s_scratch[3]};
    const float sum = merge_denominator(by_warp);
    float o[per_lane] = {};
#pragma unroll 4
    for (int k = warp; k < used; k += warps) {
      const float wk = s_weight[k];
      const float* src = s.acc + (part + k) * D + lane * per_lane;
      float v[per_lane];
      if constexpr (per_lane % 4 == 0) {
#pragma unroll
        for (int e = 0; e < per_lane; e += 4)
          *reinterpret_cast<float4*>(v + e) = *reinterpret_cast<const float4*>(src + e);
      } else {
        *reinterpret_cast<float2*>(v) = *reinterpret_cast<const float2*>(src);
      }
      merge_add(o, wk, v);
    }
#pragma unroll
    for (int e = 0; e < per_lane; ++e)
      s_red[warp][lane * per_lane + e] = o[e];
    __syncthreads();
    float* out = a.out + (static_cast<std::size_t>(qa.token) * a.q_heads + h) * D;
    for (int d = i; d < D; d += merge_threads) {
      const float by_sum[warps] = {s_red[0][d], s_red[1][d], s_red[2][d], s_red[3][d]};
      out[d] = merge_result(by_sum, sum);
    }
    __syncthreads();  // s_red, s_weight and s_scratch are read before the next item writes them
  }
}

}  // namespace mstar::kernels::cuda::detail
