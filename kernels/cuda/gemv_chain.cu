// A chain of one-row bf16 products in one persistent launch
// (kernels/cuda/gemv_chain.hpp says why).
//
// One block of 16 warps on every SM. A warp takes a link's rows one at a
// time (gemv_chain_rows: fixed, warp g of the grid's W rows g, g + W, ...;
// grabbed, the next row of the link's counter), each row in chunks of 256 16-byte pieces (lane
// l pieces l, l + 32, ... of the chunk), summed in the order of GEMV entry 5
// (gemv.cu: a lane's pieces ascending, then group_sum's butterfly), so its
// outputs are entry 5's bits. Two chunk buffers a warp: while a chunk is
// summed the next one's pieces are in flight, whichever link it belongs to,
// so a warp done with link i already streams its first chunks of link i + 1
// while the grid meets. The meeting: the block's warps done with link i, its
// thread 0 adds one to link i's counter and waits (acquire) until every
// block has; then the block rounds link i + 1's input row into shared
// memory and its warps sum. The last block to leave zeroes the counters.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/gemv_chain.hpp"
#include "kernels/cuda/internal/activation.cuh"
#include "kernels/cuda/internal/bf16_dot.cuh"
#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda {
namespace detail {
namespace {

constexpr int chain_warps = 16;
constexpr int chain_threads = chain_warps * 32;
constexpr int chain_unroll = 8;                   // pieces a lane a chunk
constexpr int chain_chunk = 32 * chain_unroll;    // pieces a chunk (4 KiB of weights)
constexpr int chain_done = gemv_chain_max_links;  // the counter of blocks that left
constexpr int chain_grabs = chain_done + 1;       // each link's rows handed out (grab)

struct chain_params {
  gemv_chain_link links[gemv_chain_max_links];
  int count;
  std::uint32_t* counters;
};

__device__ __forceinline__ std::uint32_t load_acquire(const std::uint32_t* p) {
  std::uint32_t v = 0;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Where a warp's weight stream stands: link, row, chunk of the row.
struct cursor {
  int link, row, chunk;
};

template <bool Grab>
__global__ void __launch_bounds__(chain_threads, 1) gemv_chain_kernel(chain_params a) {
  __shared__ gemv_chain_link links[gemv_chain_max_links];
  __shared__ __align__(16) uint2 row[gemv_chain_max_k / 4];  // the link's input, bf16
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(blockIdx.x) * chain_warps + static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(gridDim.x) * chain_warps;
  if (threadIdx.x < static_cast<unsigned>(a.count))
    links[threadIdx.x] = a.links[threadIdx.x];
  __syncthreads();
  const int count = a.count;
  std::uint32_t* const grabs = a.counters + chain_grabs;
  // Grab: the row after the current one, taken (lane 0, from its link's
  // counter) one row ahead, so the atomic's round trip is under a row's sums.
  int spare_link = 0;
  std::uint32_t spare = 0;
  if (Grab && lane == 0)
    spare = atomicAdd(grabs, 1U);
  // Moves `c` to the warp's next row: in c's link or a later one (static:
  // rows warp, warp + W, ...; grabbed: the spare, then a new spare); false
  // past the last link.
  const auto next_row = [&](cursor& c, bool first) {
    if constexpr (Grab) {
      for (;;) {
        const auto r = static_cast<int>(__shfl_sync(0xffffffffU, spare, 0));
        if (r < links[spare_link].n) {
          c = cursor{spare_link, r, 0};
          if (lane == 0)
            spare = atomicAdd(grabs + spare_link, 1U);
          return true;
        }
        if (++spare_link >= count)
          return false;
        if (lane == 0)
          spare = atomicAdd(grabs + spare_link, 1U);
      }
    } else {
      if (first)
        c = cursor{0, warp, 0};
      else
        c.row += warps;
      c.chunk = 0;
      while (c.link < count && c.row >= links[c.link].n) {
        ++c.link;
        c.row = warp;
      }
      return c.link < count;
    }
  };
  // The chunk after `c`; false past the last link.
  const auto advance = [&](cursor& c) {
    if ((c.chunk + 1) * chain_chunk < links[c.link].k / 8) {
      ++c.chunk;
      return true;
    }
    return next_row(c, false);
  };
  const auto load = [&](const cursor& c, uint4(&w)[chain_unroll]) {
    const gemv_chain_link& l = links[c.link];
    const auto* wrow =
        reinterpret_cast<const uint4*>(l.weight + static_cast<std::int64_t>(c.row) * l.k);
    const int pieces = l.k / 8;
#pragma unroll
    for (int u = 0; u < chain_unroll; ++u) {
      const int p = c.chunk * chain_chunk + lane + 32 * u;
      w[u] = p < pieces ? __ldcs(wrow + p) : make_uint4(0U, 0U, 0U, 0U);
    }
  };
  uint4 w0[chain_unroll];
  uint4 w1[chain_unroll];
  cursor cur{0, warp, 0};
  bool have_cur = next_row(cur, true);
  cursor next = cur;
  bool have_next = have_cur && advance(next);
  // Weights are no kernel's output: the first two chunks load before the wait.
  if (have_cur)
    load(cur, w0);
  if (have_next)
    load(next, w1);
  chain_wait();
  float acc = 0.0F;
  // Sums the current chunk from `w`, then refills `w` with the chunk after next.
  const auto step = [&](uint4(&w)[chain_unroll]) {
    const gemv_chain_link& l = links[cur.link];
    const int pieces = l.k / 8;
    const auto* x = reinterpret_cast<const uint4*>(row);
#pragma unroll
    for (int u = 0; u < chain_unroll; ++u) {
      const int p = cur.chunk * chain_chunk + lane + 32 * u;
      if (p < pieces)
        acc = dot8(w[u], x[p], acc);
    }
    if ((cur.chunk + 1) * chain_chunk >= pieces) {
      acc = group_sum<32>(acc);
      if (lane == 0)
        l.out[cur.row] = acc + 0.0F;  // entry 5 adds its (absent) bias: -0 becomes +0
      acc = 0.0F;
    }
    cursor after = next;
    const bool have_after = have_next && advance(after);
    if (have_after)
      load(after, w);
    cur = next;
    have_cur = have_next;
    next = after;
    have_next = have_after;
  };
  bool in_w0 = true;  // which buffer holds `cur`
  for (int i = 0; i < count; ++i) {
    if (i > 0) {
      // Every block's link i - 1 (and so every link before) is written.
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(a.counters + (i - 1), 1U);
        while (load_acquire(a.counters + (i - 1)) < gridDim.x) {
        }
        __threadfence();
      }
      __syncthreads();
    }
    // Fixed rows: every block is resident once it passed a meeting (or
    // where there is none): the kernel after may take SM slots then, not
    // before, or it could hold the ones blocks of this grid still wait for.
    // Grab: never early, since the kernel after may be a chain whose first
    // grabs (before its wait) must find these counters zeroed.
    if (!Grab && i == count - 1)
      chain_release();
    const gemv_chain_link& l = links[i];
    const auto* in = reinterpret_cast<const float4*>(l.in);
    for (int q = static_cast<int>(threadIdx.x); q < l.k / 4; q += chain_threads)
      row[q] = pack_bf16_quad(__ldcg(in + q));
    __syncthreads();
    while (have_cur && cur.link == i) {
      if (in_w0)
        step(w0);
      else
        step(w1);
      in_w0 = !in_w0;
    }
  }
  // The last block to leave zeroes the counters for the next launch: every
  // other block has passed every meeting by then.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(a.counters + chain_done, 1U) == gridDim.x - 1) {
      for (int i = 0; i < count; ++i) {
        a.counters[i] = 0U;
        if (Grab)
          grabs[i] = 0U;
      }
      a.counters[chain_done] = 0U;
      __threadfence();
    }
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace
}  // namespace detail

bool gemv_chain_fits(std::span<const gemv_chain_link> links) {
  if (links.empty() || links.size() > static_cast<std::size_t>(gemv_chain_max_links))
    return false;
  return std::all_of(links.begin(), links.end(), [](const gemv_chain_link& l) {
    return l.weight != nullptr && l.in != nullptr && l.out != nullptr && l.n > 0 && l.k > 0 &&
           l.k % 8 == 0 && l.k <= gemv_chain_max_k && detail::aligned16(l.weight) &&
           detail::aligned16(l.in);
  });
}

cudaError_t gemv_chain(std::span<const gemv_chain_link> links, std::uint32_t* counters,
                       cudaStream_t stream, gemv_chain_rows rows) {
  if (!gemv_chain_fits(links) || counters == nullptr)
    return cudaErrorInvalidValue;
  detail::chain_params p{};
  std::copy(links.begin(), links.end(), p.links);
  p.count = static_cast<int>(links.size());
  p.counters = counters;
  const dim3 grid(detail::sm_count());
  if (rows == gemv_chain_rows::grabbed)
    detail::launch_chained(detail::gemv_chain_kernel<true>, grid, dim3(detail::chain_threads), 0,
                           stream, p);
  else
    detail::launch_chained(detail::gemv_chain_kernel<false>, grid, dim3(detail::chain_threads), 0,
                           stream, p);
  return detail::launch_status();
}

}  // namespace mstar::kernels::cuda
