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
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"
#include "kernels/cuda/internal/prefill_wgmma.cuh"
#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

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
    prefill_item it;
    if (!prefill_item_of<tile_m>(a, tiles, item, it))
      continue;  // the row's spare tile, or a row without pages for its tokens
    const int kvh = it.kvh;
    const row_info& ri = it.ri;
    const int m_rows = it.m_rows;
    const int f0 = it.f0;
    const int fg = f0 + wg * S::group_m;  // the warpgroup's first M row
    const row_place place{ri.length - ri.new_tokens, m_rows, a.group, fg + warp * 16};
    const int n_kt = place.pos_of(f0 + tile_m - 1) / bn + 1;

    // The previous item ended at a barrier after its last wgmma wait: every
    // buffer is free.
    load_kv_tile_wg<D, wg_threads>(a, ri, kvh, 0, k0, v0, static_cast<int>(threadIdx.x));
    cp_async_commit();
    stage_q_wg<D, tile_m, wg_threads>(a, ri, kvh, f0, m_rows, sq, 0, static_cast<int>(threadIdx.x));

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
        load_kv_tile_wg<D, wg_threads>(a, ri, kvh, (kt + 1) * bn, k0 + next, v0 + next,
                                       static_cast<int>(threadIdx.x));
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
  if (const cudaError_t err = raise_smem_limit<attend_prefill_wgmma<D, Defer>>(S::smem_bytes);
      err != cudaSuccess)
    return err;
  // Items bound as the mma.sync kernel's; blocks past the device-side count
  // exit at once, the rest stride.
  const std::int64_t items = (token_bound * a.group / S::tile_m + a.table.rows + 1) * a.kv_heads;
  const unsigned grid = grid_of(items, std::int64_t{sm_count()} * 32);
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
  return with_wg_shape(head_dim, defer, [&]<int D, bool Defer>() {
    return launch_prefill_wgmma_d<D, Defer>(a, token_bound, stream);
  });
}

}  // namespace mstar::kernels::cuda::detail
