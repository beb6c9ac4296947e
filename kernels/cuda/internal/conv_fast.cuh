#pragma once

// The causal conv's fast kernels (conv.cu): widths 2..4, V = 4 channels per
// lane with 16-byte accesses where the launcher found every array aligned,
// else V = 1. conv.cu includes this, and gemv.cu for `finish` (its conv
// fold computes what conv_step_kernel does).
//
// Prefill: a warp item is (chunk of `chunk_tokens` tokens of one row, group
// of 32 V channels). Row r owns the virtual chunks [b(r), b(r + 1)),
// b(r) = floor(cu[r] / chunk_tokens) + r: that is room for its
// ceil(n_r / chunk_tokens) chunks plus at most one spare that does nothing,
// so a warp finds its row by one binary search over b(), and the items of
// the step, (floor(T / chunk_tokens) + R) x groups, are known on the device
// without a scan. A lane loads its W - 1 + chunk_tokens inputs once (the
// halo from x, or from the slot for a row's first chunk), holds its taps in
// registers and writes its chunk's outputs. The first chunk of a row is the
// only one reading the slot (W - 1 <= chunk_tokens), so it also writes the
// row's final state, after its own reads: no second launch, no race.

#include <cstdint>

#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail::conv {

constexpr int chunk_tokens = 16;  // tokens per lane in prefill
constexpr int tile_threads = 128;
constexpr int step_threads = 64;

/// What every conv kernel reads (the generic ones in conv.cu too).
struct args {
  const float* weight;  // [C][W]
  const float* bias;    // [C] or null
  int channels;
  int width;  // W (the fast kernels take it as a template argument)
  bool silu;
  const float* x;
  std::int64_t x_stride;
  float* out;    // [T][C]
  float* state;  // [slots][C][W-1]
  const std::int32_t* slots;
  const std::uint8_t* has_state;  // null: every row resumes
};

/// V consecutive floats (one lane's channels).
template <int V>
struct lanes {
  float v[V];
};

template <int V>
__device__ __forceinline__ lanes<V> zeros() {
  lanes<V> r;
#pragma unroll
  for (int i = 0; i < V; ++i)
    r.v[i] = 0.0F;
  return r;
}

/// N floats from p, as float4s when `Wide` (p 16-byte aligned, N % 4 == 0:
/// the V = 4 kernels, whose launcher checked every array); `Nc` loads
/// through the read-only path (weights and bias only: no kernel writes them).
template <int N, bool Nc, bool Wide>
__device__ __forceinline__ void load(const float* p, float (&dst)[N]) {
  static_assert(!Wide || N % 4 == 0);
  if constexpr (Wide) {
    const auto* p4 = reinterpret_cast<const float4*>(p);
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 f = Nc ? load_weight(p4 + i) : p4[i];
      dst[4 * i] = f.x;
      dst[4 * i + 1] = f.y;
      dst[4 * i + 2] = f.z;
      dst[4 * i + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      dst[i] = Nc ? load_weight(p + i) : p[i];
  }
}

template <int N, bool Wide>
__device__ __forceinline__ void store(float* p, const float (&src)[N]) {
  static_assert(!Wide || N % 4 == 0);
  if constexpr (Wide) {
    auto* p4 = reinterpret_cast<float4*>(p);
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      p4[i] = make_float4(src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      p[i] = src[i];
  }
}

// An input's V channels: another kernel's output, so a coherent load
// (common.cuh, load_coherent), never the read-only path.
template <int V>
__device__ __forceinline__ lanes<V> load_x(const float* p) {
  lanes<V> r;
  load<V, false, V == 4>(p, r.v);
  return r;
}

template <int V>
__device__ __forceinline__ void store_lanes(float* p, const lanes<V>& r) {
  store<V, V == 4>(p, r.v);
}

/// SiLU when asked, with the fast intrinsics (a few ulp: far inside the
/// conv's 1e-4 budget; y < -88 gives y / inf = -0 as the exact form does).
__device__ __forceinline__ float finish(bool silu, float y) {
  return silu ? __fdividef(y, 1.0F + __expf(-y)) : y;
}

/// The lane's taps ([V][W], channel-major as the weights) and biases.
template <int V, int W>
struct taps {
  float w[V * W];
  float b[V];

  __device__ __forceinline__ taps(const args& a, int c) {
    load<V * W, true, V == 4>(a.weight + static_cast<std::int64_t>(c) * W, w);
    if (a.bias != nullptr) {
      load<V, true, V == 4>(a.bias + c, b);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        b[i] = 0.0F;
    }
  }

  /// Outputs of one token: window[j] holds the input W - 1 - j tokens back.
  __device__ __forceinline__ lanes<V> apply(const lanes<V>* window, bool silu) const {
    lanes<V> y;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float acc = b[i];
#pragma unroll
      for (int j = 0; j < W; ++j)
        acc += w[i * W + j] * window[j].v[i];
      y.v[i] = finish(silu, acc);
    }
    return y;
  }
};

/// Prefill and the final state, persistent over the step's warp items.
template <int V, int W>
__global__ void __launch_bounds__(tile_threads, 3)
    conv_tile_kernel(args a, const std::int32_t* cu, int rows) {
  constexpr int keep = W - 1;
  constexpr int span = keep + chunk_tokens;
  static_assert(keep <= chunk_tokens, "only a row's first chunk may read its slot");
  const int lane = static_cast<int>(threadIdx.x % 32U);
  const int groups = ceil_div(a.channels, 32 * V);
  const std::int64_t items = (std::int64_t{cu[rows] / chunk_tokens} + rows) * groups;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32U);
  for (std::int64_t item = std::int64_t{blockIdx.x} * (blockDim.x / 32U) + threadIdx.x / 32U;
       item < items; item += warps) {
    const auto chunk = static_cast<int>(item / groups);
    const int c = (static_cast<int>(item % groups) * 32 + lane) * V;
    int r = 0;  // the last r with b(r) <= chunk
    for (int hi = rows; hi - r > 1;) {
      const int mid = (r + hi) / 2;
      if (cu[mid] / chunk_tokens + mid <= chunk)
        r = mid;
      else
        hi = mid;
    }
    const int begin = cu[r];
    const int end = cu[r + 1];
    const int t0 = begin + (chunk - begin / chunk_tokens - r) * chunk_tokens;
    if (t0 >= end || c >= a.channels)
      continue;  // a spare chunk, or a lane past the channels
    const int here = min(chunk_tokens, end - t0);
    const bool first = t0 == begin;
    // Inputs first (valid addresses whatever the slot says): window[k] is
    // the input at token t0 - keep + k.
    lanes<V> window[span];
    const float* xp = a.x + static_cast<std::int64_t>(t0) * a.x_stride + c;
#pragma unroll
    for (int k = 0; k < keep; ++k)
      window[k] = first ? zeros<V>() : load_x<V>(xp - (keep - k) * a.x_stride);
#pragma unroll
    for (int k = 0; k < chunk_tokens; ++k)
      window[keep + k] = k < here ? load_x<V>(xp + k * a.x_stride) : zeros<V>();
    const taps<V, W> tp(a, c);
    const std::int32_t slot = a.slots[r];
    float* out = a.out + static_cast<std::int64_t>(t0) * a.channels + c;
    if (slot < 0) {
#pragma unroll
      for (int k = 0; k < chunk_tokens; ++k) {
        if (k < here)
          store_lanes<V>(out + static_cast<std::int64_t>(k) * a.channels, zeros<V>());
      }
      continue;
    }
    // The slot's V channels x keep columns are contiguous (channel-major).
    float* st = a.state + (static_cast<std::int64_t>(slot) * a.channels + c) * keep;
    if (first) {
      float old[V * keep];
      load<V * keep, false, V == 4>(st, old);  // issued with has_state's load
      const bool resume = a.has_state == nullptr || a.has_state[r] != 0;
#pragma unroll
      for (int e = 0; e < V * keep; ++e)
        old[e] = resume ? old[e] : 0.0F;
#pragma unroll
      for (int k = 0; k < keep; ++k) {
#pragma unroll
        for (int i = 0; i < V; ++i)
          window[k].v[i] = old[i * keep + k];
      }
      // The row's last keep inputs: column j is token end - keep + j, from
      // x (cached: this lane just read it, or will never need it otherwise)
      // or, in a row shorter than keep, the old column j + n. Selected with
      // constant indices, so `window` stays in registers; all before the
      // outputs' stores, which the compiler cannot move loads across.
      const int n = end - begin;
      float next[V * keep];
#pragma unroll
      for (int j = 0; j < keep; ++j) {
        const int tau = end - keep + j;
        lanes<V> v = zeros<V>();
        if (tau >= begin) {
          v = load_x<V>(a.x + static_cast<std::int64_t>(tau) * a.x_stride + c);
        } else {
#pragma unroll
          for (int m = j + 1; m < keep; ++m) {
#pragma unroll
            for (int i = 0; i < V; ++i)
              v.v[i] = m == j + n ? old[i * keep + m] : v.v[i];
          }
        }
#pragma unroll
        for (int i = 0; i < V; ++i)
          next[i * keep + j] = v.v[i];
      }
      store<V * keep, V == 4>(st, next);
    }
#pragma unroll
    for (int k = 0; k < chunk_tokens; ++k) {
      if (k < here)
        store_lanes<V>(out + static_cast<std::int64_t>(k) * a.channels,
                       tp.apply(window + k, a.silu));
    }
  }
}

/// One decode token per row: grid (lane groups of the channels, rows).
template <int V, int W>
__global__ void __launch_bounds__(step_threads) conv_step_kernel(args a, int batch) {
  constexpr int keep = W - 1;
  chain_release();
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (c >= a.channels)
    return;                   // channel 0's thread always goes on to chain_wait
  const taps<V, W> tp(a, c);  // weights: read before the wait (chained launch)
  chain_wait();
  for (int b = static_cast<int>(blockIdx.y); b < batch; b += static_cast<int>(gridDim.y)) {
    lanes<V> window[W];
    window[keep] = load_x<V>(a.x + static_cast<std::int64_t>(b) * a.x_stride + c);
    const std::int32_t slot = a.slots[b];
    float* out = a.out + static_cast<std::int64_t>(b) * a.channels + c;
    if (slot < 0) {
      store_lanes<V>(out, zeros<V>());
      continue;
    }
    float* st = a.state + (static_cast<std::int64_t>(slot) * a.channels + c) * keep;
    float old[V * keep];
    load<V * keep, false, V == 4>(st, old);  // issued with has_state's load, not after it
    const bool resume = a.has_state == nullptr || a.has_state[b] != 0;
#pragma unroll
    for (int k = 0; k < keep; ++k) {
#pragma unroll
      for (int i = 0; i < V; ++i)
        window[k].v[i] = resume ? old[i * keep + k] : 0.0F;
    }
    store_lanes<V>(out, tp.apply(window, a.silu));
    float next[V * keep];
#pragma unroll
    for (int k = 0; k < keep; ++k) {
#pragma unroll
      for (int i = 0; i < V; ++i)
        next[i * keep + k] = window[k + 1].v[i];
    }
    store<V * keep, V == 4>(st, next);
  }
}

}  // namespace mstar::kernels::cuda::detail::conv
