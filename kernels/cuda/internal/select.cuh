#pragma once

// Block-wide radix selection over one row of logits, for sampling: every
// finite logit l at id i has the unique 64-bit key (order(l) << 32) | ~i, so
// "larger key" is "earlier in the CPU's candidate order" (higher logit, then
// lower id). Selection walks the key's bytes from the top, building a
// histogram (of counts or of probability mass) over the candidates that
// share the prefix chosen so far.

#include <cstdint>

#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

/// Threads of a sampling block.
inline constexpr int select_threads = 512;

/// One row of logits.
struct row_view {
  const float* data;
  std::int64_t stride;
  std::int64_t n;
  __device__ __forceinline__ float operator[](std::int64_t i) const { return data[i * stride]; }
};

/// What one pass over a row finds.
struct block_stats {
  bool bad;             // a NaN or +inf entry
  std::int64_t finite;  // finite entries
  float max;            // largest finite entry
  std::int32_t argmax;  // its lowest id
};

/// Shared memory of one sampling block.
struct select_scratch {
  double hist[256];
  double lane_vals[select_threads / 32][32];
  double warp_d[32];
  std::uint64_t warp_u[32];
  block_stats warp_stats[32];
  block_stats stats;
  int chosen;
  double above;
  double result_d;
  std::uint64_t result_u;
};

/// The candidate key of logit `l` at `id` (-0 ordered as +0, as the CPU's
/// comparison does).
__device__ __forceinline__ std::uint64_t key_of(float l, std::int64_t id) {
  const std::uint32_t bits = __float_as_uint(l == 0.0F ? 0.0F : l);
  const std::uint32_t ord = (bits & 0x80000000U) != 0 ? ~bits : (bits | 0x80000000U);
  return (static_cast<std::uint64_t>(ord) << 32) | (0xffffffffU - static_cast<std::uint32_t>(id));
}

/// The token id of a key.
__device__ __forceinline__ std::int32_t id_of(std::uint64_t key) {
  return static_cast<std::int32_t>(0xffffffffU - static_cast<std::uint32_t>(key));
}

/// exp((l - max) / temperature) in f64, the CPU's unnormalised probability.
struct weight_fn {
  double max;
  double temperature;
  __device__ __forceinline__ double operator()(float l) const {
    return exp((static_cast<double>(l) - max) / temperature);
  }
};

__device__ __forceinline__ block_stats merge(block_stats a, const block_stats& b) {
  a.bad = a.bad || b.bad;
  a.finite += b.finite;
  if (b.max > a.max || (b.max == a.max && b.argmax < a.argmax)) {
    a.max = b.max;
    a.argmax = b.argmax;
  }
  return a;
}

__device__ __forceinline__ block_stats shfl(const block_stats& s, int off) {
  block_stats o;
  o.bad = __shfl_xor_sync(0xffffffffU, static_cast<int>(s.bad), off) != 0;
  o.finite = __shfl_xor_sync(0xffffffffU, s.finite, off);
  o.max = __shfl_xor_sync(0xffffffffU, s.max, off);
  o.argmax = __shfl_xor_sync(0xffffffffU, s.argmax, off);
  return o;
}

/// No entries: what `merge` leaves unchanged.
__device__ __forceinline__ block_stats no_stats() {
  return block_stats{false, 0, -INFINITY, 0x7fffffff};
}

/// Merges every thread's stats over the block; thread 0 gets the block's
/// (the others partial ones). `slots`: shared, one a warp, free again after
/// the caller's next barrier.
__device__ inline block_stats block_merge(block_stats mine, block_stats* slots) {
  for (int off = 16; off > 0; off /= 2)
    mine = merge(mine, shfl(mine, off));
  if (threadIdx.x % 32 == 0)
    slots[threadIdx.x / 32] = mine;
  __syncthreads();
  if (threadIdx.x < 32) {
    mine = threadIdx.x < blockDim.x / 32 ? slots[threadIdx.x] : no_stats();
    for (int off = 16; off > 0; off /= 2)
      mine = merge(mine, shfl(mine, off));
  }
  return mine;
}

/// NaN/+inf, finite count, max and its lowest id, for the whole block.
__device__ inline block_stats row_stats(const row_view& row, select_scratch& s) {
  block_stats mine = no_stats();
  for (std::int64_t i = threadIdx.x; i < row.n; i += blockDim.x) {
    const float l = row[i];
    mine.bad = mine.bad || isnan(l) || l == INFINITY;
    if (isfinite(l)) {
      ++mine.finite;
      mine = merge(mine, block_stats{false, 0, l, static_cast<std::int32_t>(i)});
    }
  }
  mine = block_merge(mine, s.warp_stats);
  if (threadIdx.x == 0)
    s.stats = mine;
  __syncthreads();
  const block_stats out = s.stats;
  __syncthreads();
  return out;
}

/// Entry `l` at `id` into one thread's stats. A thread takes its entries in
/// increasing id order, so a strict > keeps the lowest id of a tie.
__device__ __forceinline__ void take(block_stats& st, float l, std::int64_t id) {
  st.bad = st.bad || isnan(l) || l == INFINITY;
  if (isfinite(l)) {
    ++st.finite;
    if (l > st.max) {
      st.max = l;
      st.argmax = static_cast<std::int32_t>(id);
    }
  }
}

/// This thread's stats over entries [begin, end) of `row`, one entry at a
/// time, `Loads` loads in flight (-inf, which changes nothing, past the end).
template <int Loads>
__device__ __forceinline__ block_stats scan_entries(const row_view& row, std::int64_t begin,
                                                    std::int64_t end) {
  block_stats st = no_stats();
  const std::int64_t step = blockDim.x;
  for (std::int64_t base = begin + threadIdx.x; base < end; base += step * Loads) {
    float v[Loads];
#pragma unroll
    for (int u = 0; u < Loads; ++u) {
      const std::int64_t i = base + u * step;
      v[u] = i < end ? load_coherent(row.data + i * row.stride) : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < Loads; ++u)
      take(st, v[u], base + u * step);
  }
  return st;
}

/// This thread's stats over the `quads` float4s at `p` (16-byte aligned,
/// unit stride), whose first entry has id `first`; `Loads` float4s in
/// flight.
template <int Loads>
__device__ __forceinline__ block_stats scan_quads(const float* p, std::int64_t first,
                                                  std::int64_t quads) {
  const auto* q = reinterpret_cast<const float4*>(p);
  block_stats st = no_stats();
  const std::int64_t step = blockDim.x;
  for (std::int64_t base = threadIdx.x; base < quads; base += step * Loads) {
    float4 v[Loads];
#pragma unroll
    for (int u = 0; u < Loads; ++u) {
      const std::int64_t k = base + u * step;
      v[u] = k < quads ? load_coherent(q + k)
                       : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
#pragma unroll
    for (int u = 0; u < Loads; ++u) {
      const std::int64_t id = first + 4 * (base + u * step);
      take(st, v[u].x, id);
      take(st, v[u].y, id + 1);
      take(st, v[u].z, id + 2);
      take(st, v[u].w, id + 3);
    }
  }
  return st;
}

/// The block's stats over entries [begin, end) of `row`, in thread 0 (as
/// `block_merge`): float4 loads where the range starts 16-byte aligned at
/// unit stride (its last few entries one at a time), single ones otherwise.
/// 64 KiB (float4s) or 32 KiB in flight a block: a block or two draw about
/// an SM's share of the memory bandwidth.
__device__ inline block_stats range_stats(const row_view& row, std::int64_t begin, std::int64_t end,
                                          block_stats* slots) {
  constexpr int quad_loads = 8;
  constexpr int entry_loads = 16;
  const float* p = row.data + begin * row.stride;
  block_stats st;
  if (row.stride == 1 && reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
    const std::int64_t quads = (end - begin) / 4;
    st = merge(scan_quads<quad_loads>(p, begin, quads),
               scan_entries<1>(row, begin + 4 * quads, end));
  } else {
    st = scan_entries<entry_loads>(row, begin, end);
  }
  return block_merge(st, slots);
}

/// Sum over the block of f64 values; every thread gets it.
__device__ inline double block_sum_d(double v, select_scratch& s) {
  for (int off = 16; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffU, v, off);
  if (threadIdx.x % 32 == 0)
    s.warp_d[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double all = 0.0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w)
      all += s.warp_d[w];
    s.result_d = all;
  }
  __syncthreads();
  const double out = s.result_d;
  __syncthreads();
  return out;
}

/// Total weight of the finite candidates with key >= floor.
template <class W>
__device__ double kept_mass(const row_view& row, std::uint64_t floor, const W& w,
                            select_scratch& s) {
  double sum = 0.0;
  for (std::int64_t i = threadIdx.x; i < row.n; i += blockDim.x) {
    const float l = row[i];
    if (isfinite(l) && key_of(l, i) >= floor)
      sum += w(l);
  }
  return block_sum_d(sum, s);
}

/// The smallest finite key >= floor: the CPU's last candidate.
__device__ inline std::uint64_t min_kept_key(const row_view& row, std::uint64_t floor,
                                             select_scratch& s) {
  std::uint64_t best = ~std::uint64_t{0};
  for (std::int64_t i = threadIdx.x; i < row.n; i += blockDim.x) {
    const float l = row[i];
    if (isfinite(l) && key_of(l, i) >= floor)
      best = min(best, key_of(l, i));
  }
  for (int off = 16; off > 0; off /= 2)
    best = min(best, __shfl_xor_sync(0xffffffffU, best, off));
  if (threadIdx.x % 32 == 0)
    s.warp_u[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w)
      best = min(best, s.warp_u[w]);
    s.result_u = best;
  }
  __syncthreads();
  const std::uint64_t out = s.result_u;
  __syncthreads();
  return out;
}

/// What `radix_select` looks for, walking candidates from the largest key.
enum class select_mode : std::uint8_t {
  count_at_least,  // the key where the running count first reaches target
  mass_at_least,   // the key where the running mass first reaches target
  mass_above,      // the key where the running mass first exceeds target
};

/// Finds the candidate (finite, key >= floor) at which the running count or
/// mass, taken in descending key order, first crosses `target`. False when
/// no candidate does (rounding left the total short of the target).
template <class W>
__device__ bool radix_select(const row_view& row, std::uint64_t floor, const W& w, select_mode mode,
                             double target, select_scratch& s, std::uint64_t& found) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  std::uint64_t prefix = 0;
  std::uint64_t mask = 0;
  double above = 0.0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
      s.hist[i] = 0.0;
    __syncthreads();
    for (std::int64_t base = 0; base < row.n; base += blockDim.x) {
      const std::int64_t i = base + threadIdx.x;
      int digit = 256;  // not a candidate
      double v = 0.0;
      if (i < row.n) {
        const float l = row[i];
        const std::uint64_t key = isfinite(l) ? key_of(l, i) : 0;
        if (isfinite(l) && key >= floor && (key & mask) == prefix) {
          digit = static_cast<int>((key >> shift) & 0xffU);
          v = mode == select_mode::count_at_least ? 1.0 : w(l);
        }
      }
      // Lanes with the same digit add up first: one shared atomic per digit.
      const unsigned peers = __match_any_sync(0xffffffffU, digit);
      s.lane_vals[warp][lane] = v;
      __syncwarp();
      if (digit < 256 && static_cast<int>(lane) == __ffs(static_cast<int>(peers)) - 1) {
        double sum = 0.0;
        for (unsigned m = peers; m != 0; m &= m - 1)
          sum += s.lane_vals[warp][__ffs(static_cast<int>(m)) - 1];
        atomicAdd(&s.hist[digit], sum);
      }
      __syncwarp();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1;
      for (int d = 255; d >= 0; --d) {
        const double with = above + s.hist[d];
        const bool crosses = mode == select_mode::mass_above ? with > target : with >= target;
        if (crosses && s.hist[d] > 0.0) {
          chosen = d;
          break;
        }
        above = with;
      }
      s.chosen = chosen;
      s.above = above;
    }
    __syncthreads();
    const int chosen = s.chosen;
    above = s.above;
    __syncthreads();
    if (chosen < 0)
      return false;
    prefix |= static_cast<std::uint64_t>(chosen) << shift;
    mask |= std::uint64_t{0xff} << shift;
  }
  found = prefix;
  return true;
}

}  // namespace mstar::kernels::cuda::detail
