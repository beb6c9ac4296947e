#pragma once

// The gated delta rule's decode kernel with fewer registers a thread
// (delta_rule.cu's decode table from entry 14 on). Decode moves the whole
// state once (read and written in place) and little else, so what bounds it
// is how many state bytes the SMs keep in flight; the scan kernel's decode
// instantiation spends 120 registers a thread (16 warps an SM: four files
// of 16K registers, 4 warps each), a third of them on q and k, which every
// value row of a head shares. Here, as
// `decode_shape` chooses:
// - q and k staged once per warp in shared memory and read from there in
//   the dot products and the update (`shared_qk`), or held in registers
//   only for the lane's own key columns, which are few when a value row
//   spans more lanes (`cols` 4: a warp per row, one float4 a lane, as
//   flash-linear-attention's fused recurrent kernel tiles it);
// - S k and S q of every row of the thread summed over the row's lanes in
//   one butterfly that halves the values at each step (`split_sums`): the
//   lane left with row m's sums makes its delta and output and hands the
//   delta back, 3 rows + log2(lanes / (2 rows)) shuffles in place of
//   2 rows log2(lanes) (25 for 80 at 8 rows over a warp), and the sums
//   leave registers at each step;
// - every state access at a constant offset from one address (K = 16
//   KLanes and V a multiple of the block's rows, or the launcher takes
//   another shape), v, a and b asked for right behind the state, and a
//   register cap (`max_regs`, `__maxnreg__`) that sets the warps an SM:
//   ptxas otherwise spends registers on hoisting loads for as long as the
//   cap allows.
// Only delta_rule.cu includes it.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_step.cuh"

namespace mstar::kernels::cuda::detail {

/// A launch shape of `gated_delta_decode_kernel`.
struct decode_shape {
  int cols = 16;     ///< key columns a lane holds of each of its value rows: 4, 8 or 16
  int threads = 32;  ///< threads a block, a multiple of 32
  int rows = 2;      ///< value rows a thread (a power of two)
  int stream = 3;    ///< cache-streaming hints on the state's loads (bit 0) and stores (bit 1)
  bool shared_qk = false;   ///< q and k staged per warp in shared memory, not held a thread
  bool split_sums = false;  ///< S k, S q summed by the halving butterfly (above)
  int max_regs = 0;         ///< registers a thread at K 128 (`__maxnreg__`); 0 and other K: 128
  bool pdl = false;         ///< launched as a programmatic dependent launch (the kernel says how)
};

/// Lanes sharing one value row when the widest K is 16 `KLanes` columns and
/// each lane holds `cols` of them (at most a warp).
constexpr int decode_lanes(int k_lanes, int cols) {
  const int lanes = 16 * k_lanes / cols;
  return lanes < 1 ? 1 : lanes > 32 ? 32 : lanes;
}

template <int Stream>
__device__ __forceinline__ float4 load_state(const float4* at) {
  if constexpr ((Stream & 1) != 0)
    return __ldcs(at);
  else
    return *at;
}

template <int Stream>
__device__ __forceinline__ void store_state(float4* at, float4 v) {
  if constexpr ((Stream & 2) != 0)
    __stcs(at, v);
  else
    *at = v;
}

// A float4 from shared memory, read again at each use: a plain load of the
// same address would be merged with the previous one and held in registers
// across the shuffles, which is what staging avoids.
__device__ __forceinline__ float4 reload_shared(const float4* at) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(at))));
  return v;
}

// Block (x, h, r): value rows [x * rows_per_block, ...) of head h of row r;
// `lanes` consecutive lanes share a value row, `chunks` float4 of its key
// columns each (float4 lane + j * lanes); a thread's rows are `groups`
// apart. Takes K = 16 KLanes and V a multiple of rows_per_block only
// (`decode_shape_fits`): every state load and store at a constant offset
// from one address, none predicated. The shape's fields come as separate
// template arguments (nvcc's kernel stubs take no class-type ones).
template <int KLanes, int Cols, int Threads, int Rows, int Stream, bool SharedQk, bool SplitSums,
          int MaxRegs, bool Pdl>
__global__ void __launch_bounds__(Threads) __maxnreg__(KLanes == 8 && MaxRegs > 0 ? MaxRegs : 128)
    gated_delta_decode_kernel(rule_args p) {
  chain_start();
  constexpr int lanes = decode_lanes(KLanes, Cols);
  constexpr int chunks = 4 * KLanes / lanes;
  constexpr int groups = Threads / lanes;
  constexpr int rows = Rows;
  constexpr int k4 = 4 * KLanes;  // float4s of a state row, of q and of k
  constexpr int warps = Threads / 32;
  static_assert(Threads % 32 == 0 && lanes * chunks == k4);
  static_assert(rows > 0 && (rows & (rows - 1)) == 0);
  __shared__ float4 staged[SharedQk ? warps : 1][2][SharedQk ? k4 : 1];
  if constexpr (Pdl) {
    // Launched with programmatic stream serialization: the next kernel may
    // launch once every block of this one has started, its blocks taking
    // the SMs' slots as ours leave (the launch and the first blocks'
    // dispatch hidden behind our last ones). Nothing is read before the
    // previous kernel is done and its writes visible: the step's metadata
    // may be its output.
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }

  const int r = static_cast<int>(blockIdx.z);
  const int h = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int v0 =
      static_cast<int>(blockIdx.x) * groups * rows + static_cast<int>(threadIdx.x) / lanes;
  // The row's metadata asked for together, ahead of the branches (the scan
  // kernel reads has_state after the slot's check: a round trip more
  // before the state's loads can go out).
  const std::int64_t t0 = p.cu[r];
  const std::int64_t t1 = p.cu[r + 1];
  const std::int32_t slot = p.slots[r];
  const bool carried = p.has_state[r] != 0;
  if (p.chunked_rows != nullptr && p.chunked_rows[r] >= 0)
    return;
  if (slot < 0) {
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < rows; ++m) {
        for (std::int64_t t = t0; t < t1; ++t)
          p.out[(t * p.hv + h) * p.v_dim + v0 + m * groups] = 0.0F;
      }
    }
    return;
  }
  // The thread's first float4 of its first row.
  float4* const first = reinterpret_cast<float4*>(p.state) +
                        ((static_cast<std::int64_t>(slot) * p.hv + h) * p.v_dim + v0) * k4 + lane;
  const int kh = h / p.group;
  // With the halving butterfly the thread makes the deltas and outputs of
  // `pairs` rows from m0 on (the butterfly's comment below), else of all
  // its rows: `own` rows' v.
  constexpr int pairs = lanes == 1 ? rows : 2 * rows > lanes ? 2 * rows / lanes : 1;
  constexpr int own = SplitSums ? pairs : rows;
  const int across = lane % (lanes > 1 ? lanes / 2 : 1);
  const int m0 = SplitSums ? across * 2 * rows / lanes : 0;
  const bool lower = lanes == 1 || lane < lanes / 2;
  const bool writes = lower && across * 2 * rows % lanes == 0;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_lane = static_cast<int>(threadIdx.x) % 32;
  // One token: the state in, the rule, the state out. A row of several
  // tokens (`decode` is only a hint) stores its state and loads it again
  // between them, so the loop holds no state.
  const auto step = [&](std::int64_t t, bool from_slot) {
    float4 s[rows][chunks];
#pragma unroll
    for (int m = 0; m < rows; ++m) {
#pragma unroll
      for (int j = 0; j < chunks; ++j) {
        s[m][j] = from_slot ? load_state<Stream>(first + (m * groups * k4 + j * lanes))
                            : make_float4(0.F, 0.F, 0.F, 0.F);
      }
    }
    const float* row = p.qkv + t * p.qkv_stride;
    const auto* q4 = reinterpret_cast<const float4*>(row + static_cast<std::int64_t>(kh) * p.k_dim);
    const auto* k4p =
        reinterpret_cast<const float4*>(row + static_cast<std::int64_t>(p.hk + kh) * p.k_dim);
    const float* v_row = row + 2 * static_cast<std::int64_t>(p.hk) * p.k_dim +
                         static_cast<std::int64_t>(h) * p.v_dim + v0;
    float* const out = p.out + (t * p.hv + h) * p.v_dim + v0;
    // The step's small inputs, asked for right behind the state: used
    // where they are needed, each would add a round trip to the block's
    // life (v after the dot products, a and b after the norms).
    const float a_raw = load_coherent(p.a + t * p.ab_stride + h);
    const float b_raw = load_coherent(p.b + t * p.ab_stride + h);
    const float a_log = load_weight(p.a_log + h);
    const float bias = load_weight(p.dt_bias + h);
    float vs[own];
#pragma unroll
    for (int i = 0; i < own; ++i)
      vs[i] = load_coherent(v_row + (m0 + i) * groups);
    float kq = 0.F, kk = 0.F, qq = 0.F;
    float4 qr[SharedQk ? 1 : chunks];
    float4 kr[SharedQk ? 1 : chunks];
    if constexpr (SharedQk) {
      // The warp's copy: each lane stages whole float4s; the norms summed
      // over the warp.
      __syncwarp();  // the previous token's q / k are read
#pragma unroll
      for (int i0 = 0; i0 < k4; i0 += 32) {
        const int i = i0 + warp_lane;
        if (i < k4) {
          const float4 q = load_coherent(q4 + i);
          const float4 k = load_coherent(k4p + i);
          kq = dot4(k, q, kq);
          kk = dot4(k, k, kk);
          qq = dot4(q, q, qq);
          staged[warp][0][i] = q;
          staged[warp][1][i] = k;
        }
      }
      __syncwarp();
      kq = group_sum<32>(kq);
      kk = group_sum<32>(kk);
      qq = group_sum<32>(qq);
    } else {
#pragma unroll
      for (int j = 0; j < chunks; ++j) {
        qr[j] = load_coherent(q4 + lane + j * lanes);
        kr[j] = load_coherent(k4p + lane + j * lanes);
        kq = dot4(kr[j], qr[j], kq);
        kk = dot4(kr[j], kr[j], kk);
        qq = dot4(qr[j], qr[j], qq);
      }
      kq = group_sum<lanes>(kq);
      kk = group_sum<lanes>(kk);
      qq = group_sum<lanes>(qq);
    }
    const auto key = [&](int j) {
      if constexpr (SharedQk)
        return reload_shared(&staged[warp][1][lane + j * lanes]);
      else
        return kr[j];
    };
    const auto query = [&](int j) {
      if constexpr (SharedQk)
        return reload_shared(&staged[warp][0][lane + j * lanes]);
      else
        return qr[j];
    };
    token_scalars sc;
    sc.kq = kq;
    sc.inv_k = 1.0F / sqrtf(kk + 1e-6F);
    sc.inv_q = p.scale / sqrtf(qq + 1e-6F);
    decay_beta(a_raw, b_raw, -expf(a_log), bias, sc);
    // S k and S q of every row from the old state (S' q = decay S q + u k q),
    // one pass over the chunks.
    float sums[2 * rows];
#pragma unroll
    for (int i = 0; i < 2 * rows; ++i)
      sums[i] = 0.F;
#pragma unroll
    for (int j = 0; j < chunks; ++j) {
      const float4 kj = key(j);
      const float4 qj = query(j);
#pragma unroll
      for (int m = 0; m < rows; ++m) {
        sums[m] = dot4(s[m][j], kj, sums[m]);
        sums[rows + m] = dot4(s[m][j], qj, sums[rows + m]);
      }
    }
    // Row m's delta over |k| on every lane of the row; o: its output.
    const auto delta = [&](float sk, float sq, float v, float& o) {
      const float u = sc.beta * (v - sc.decay * sk * sc.inv_k);
      o = (sc.decay * sq + u * sc.kq * sc.inv_k) * sc.inv_q;
      return u * sc.inv_k;
    };
    float uk[rows];
    if constexpr (SplitSums) {
      // Lane l of the row's lanes is left with S k (lower half of the
      // lanes) or S q (upper half) of rows m0 + i, which the lane across
      // the halves has the other of.
      halving_sums<lanes>(sums, lane);
      float owned[pairs];
#pragma unroll
      for (int i = 0; i < pairs; ++i) {
        float sk = sums[i];
        float sq = lanes == 1 ? sums[rows + i] : sums[i];
        if constexpr (lanes > 1) {
          const float other = __shfl_xor_sync(0xffffffffU, sums[i], lanes / 2, lanes);
          sk = lower ? sums[i] : other;
          sq = lower ? other : sums[i];
        }
        float o = 0.F;
        owned[i] = delta(sk, sq, vs[i], o);
        if (writes)
          out[(m0 + i) * groups] = o;
      }
#pragma unroll
      for (int m = 0; m < rows; ++m)
        uk[m] = __shfl_sync(0xffffffffU, owned[m % pairs], m * lanes / (2 * rows), lanes);
    } else {
#pragma unroll
      for (int m = 0; m < rows; ++m) {
        float o = 0.F;
        uk[m] = delta(group_sum<lanes>(sums[m]), group_sum<lanes>(sums[rows + m]), vs[m], o);
        if (lane == 0)
          out[m * groups] = o;
      }
    }
#pragma unroll
    for (int j = 0; j < chunks; ++j) {
      const float4 kj = key(j);
#pragma unroll
      for (int m = 0; m < rows; ++m) {
        s[m][j].x = fmaf(uk[m], kj.x, sc.decay * s[m][j].x);
        s[m][j].y = fmaf(uk[m], kj.y, sc.decay * s[m][j].y);
        s[m][j].z = fmaf(uk[m], kj.z, sc.decay * s[m][j].z);
        s[m][j].w = fmaf(uk[m], kj.w, sc.decay * s[m][j].w);
        store_state<Stream>(first + (m * groups * k4 + j * lanes), s[m][j]);
      }
    }
  };
  for (std::int64_t t = t0; t < t1; ++t)
    step(t, carried || t > t0);
}

/// Whether `gated_delta_decode_kernel` takes these arguments in shape `S`
/// (K 16 KLanes, V a multiple of the block's value rows).
template <int KLanes, decode_shape S>
bool decode_shape_fits(const rule_args& a) {
  constexpr int rows_per_block = S.threads / decode_lanes(KLanes, S.cols) * S.rows;
  return a.k_dim == 16 * KLanes && a.v_dim % rows_per_block == 0;
}

template <int KLanes, decode_shape S>
void launch_decode_shape(const rule_args& a, int rows, cudaStream_t stream) {
  constexpr int rows_per_block = S.threads / decode_lanes(KLanes, S.cols) * S.rows;
  const dim3 grid(static_cast<unsigned>(a.v_dim / rows_per_block), static_cast<unsigned>(a.hv),
                  static_cast<unsigned>(rows));
  const auto kernel = gated_delta_decode_kernel<KLanes, S.cols, S.threads, S.rows, S.stream,
                                                S.shared_qk, S.split_sums, S.max_regs, S.pdl>;
  if constexpr (S.pdl) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(S.threads);
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    // A failure stays the runtime's last error, which the caller returns
    // (launch_status).
    static_cast<void>(cudaLaunchKernelEx(&config, kernel, a));
  } else {
    launch_chained(kernel, grid, S.threads, 0, stream, a);
  }
}

}  // namespace mstar::kernels::cuda::detail
