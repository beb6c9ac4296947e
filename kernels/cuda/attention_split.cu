// Split-KV ("flash-decoding") paged attention for decode steps: each row's
// positions are cut into up to `splits` chunks, one block per (row, kv head,
// group of query heads, chunk) writes an unnormalised partial (max, sum,
// output) into the caller's workspace, and a second kernel merges them (or,
// attention_merge::fused, each item's last block: attend_merge_math.cuh).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/internal/attend_decode_mma.cuh"
#include "kernels/cuda/internal/attend_decode_rows.cuh"
#include "kernels/cuda/internal/attend_decode_rows_mma.cuh"
#include "kernels/cuda/internal/attend_merge.cuh"
#include "kernels/cuda/internal/attend_merge_math.cuh"
#include "kernels/cuda/internal/attend_tiles.cuh"
#include "kernels/cuda/internal/attend_variant.hpp"
#include "kernels/cuda/internal/launch_setup.cuh"

namespace mstar::kernels::cuda {
namespace {

using detail::attn_args;
using detail::layout;
using detail::query_at;
using detail::query_of;

using detail::max_splits;
using detail::min_chunk;
using detail::split_args;

static_assert(detail::max_split_override == max_splits);
static_assert(paged_attention_counter_bytes % 16 == 0,
              "the partials after it stay 16-byte aligned");

// Blocks aimed for, in waves of resident blocks over the whole device.
constexpr int split_waves = 2;

// The fused merge (attention_merge::fused) in passes of 2 elements with 4
// partials in flight a lane: the least the register walk's caps (72 at one
// head a block) hold; its fused instantiations still spill 8-52 bytes
// (ptxas, nvcc 13.0), the others are unchanged.
template <int D>
__device__ __forceinline__ void split_fused_merge(const attn_args& a, const split_args& s,
                                                  int token, int positions, int h0, int heads) {
  detail::fused_merge<D, 2, 4>(a, s, token, positions, h0, heads);
}

// Block per (row, kv head, group of GC query heads, chunk of positions):
// attend_fast's walk (`Stages`: 0 registers, else the tile pipeline's
// stages) over the chunk's positions only, the slots merged into one
// partial per head. A chunk past the row's end does nothing and writes
// nothing. With `Fused` (s.counters set; the register walk only) the
// item's last block merges its heads (fused_merge): an instantiation of
// its own, so the others keep their registers. Registers capped by
// detail::fast_min_blocks.
template <class KV, int D, int GC, int Stages, bool Fused = false>
__global__ void __launch_bounds__(128, detail::fast_min_blocks<true, GC, Stages>)
    attend_split(attn_args a, split_args s) {
  static_assert(!Fused || Stages == 0);
  detail::chain_start();
  using L = layout<KV, D>;
  constexpr int E = L::elems;
  __shared__ detail::block_smem<KV, D, GC, Stages> smem;
  const int lane = static_cast<int>(threadIdx.x) % L::lanes;
  const int slot = static_cast<int>(threadIdx.x) / L::lanes;
  const long long per_row = static_cast<long long>(a.kv_heads) * a.chunks * s.splits;
  const long long total = per_row * a.table.rows;
  for (long long w = blockIdx.x; w < total; w += gridDim.x) {
    const int split = static_cast<int>(w % s.splits);
    const long long item = w / s.splits;
    const int head_chunk = static_cast<int>(item % a.chunks);
    const int kvh = static_cast<int>((item / a.chunks) % a.kv_heads);
    const query_at qa = query_of(a, a.table.rows, w / per_row);
    const int length = detail::chunk_length(qa.positions, s);
    const int begin = split * length;
    const int h0 = kvh * a.group + head_chunk * GC;
    const int valid = a.group - head_chunk * GC;
    if (begin >= qa.positions) {  // the whole block: w is uniform
      if constexpr (Fused) {
        if (split == 0)  // a row without positions
          split_fused_merge<D>(a, s, qa.token, qa.positions, h0, min(GC, valid));
      }
      continue;
    }
    const int end = min(begin + length, qa.positions);
    float q[GC][E];
    float acc[GC][E];
    float m[GC];
    float l[GC];
    detail::load_q<KV, D, GC>(a, qa.token, h0, valid, lane, q);
    detail::walk_block<KV, D, GC, Stages>(a, smem, qa.first_page, kvh, lane, slot, begin, end, q,
                                          acc, m, l);
    const std::size_t part =
        (static_cast<std::size_t>(qa.token) * a.q_heads + h0) * s.splits + split;
    detail::merge_slots<KV, D, GC>(
        smem.merge, lane, slot, valid, acc, m, l, [&](int g, int d, float o, float sum, float top) {
          const std::size_t at = part + static_cast<std::size_t>(g) * s.splits;
          s.acc[at * D + d] = o;
          if (d == 0) {
            s.m[at] = top;
            s.l[at] = sum;
          }
        });
    if constexpr (Fused) {
      // Recomputed rather than kept live over the walk (registers).
      const query_at qb = query_of(a, a.table.rows, w / per_row);
      split_fused_merge<D>(a, s, qb.token, qb.positions, h0, min(GC, valid));
    }
  }
}

using detail::grid_of;

// Resident blocks per SM of one split kernel (the occupancy calculator,
// asked once per instantiation: devices of one kind assumed); 4 if the
// runtime cannot say.
template <class KV, int D, int GC, int Stages>
int resident_blocks() {
  static std::atomic<int> cached{0};
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0)
    return n;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, attend_split<KV, D, GC, Stages>, 128, 0) !=
          cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 4;
  }
  cached.store(n, std::memory_order_relaxed);
  return n;
}

// Calls fn.template operator()<KV, D, GC, Stages>() for the fast kernels'
// instantiation of this shape (the rule of attention.cu's launch_fast_d)
// and walk; false for a head_dim they do not take.
template <class Fn>
[[nodiscard]] bool with_shape(bool bf16, int head_dim, int group, attention_walk walk, Fn&& fn) {
  auto by_walk = [&]<class KV, int D, int GC>() {
    switch (walk) {
      case attention_walk::pipeline4:
        fn.template operator()<KV, D, GC, 4>();
        break;
      case attention_walk::pipeline2:
        fn.template operator()<KV, D, GC, 2>();
        break;
      case attention_walk::automatic:  // resolved by walk_for: unreachable
      case attention_walk::mma:        // the tensor-core kernel's shapes go elsewhere
      case attention_walk::rows:       // and the whole-row kernel's
      case attention_walk::rows_mma:   // and its tensor-core form's
      case attention_walk::registers:
        fn.template operator()<KV, D, GC, 0>();
        break;
    }
  };
  auto by_group = [&]<class KV, int D>() {
    if (group == 1)
      by_walk.template operator()<KV, D, 1>();
    else if (group == 2)
      by_walk.template operator()<KV, D, 2>();
    else
      by_walk.template operator()<KV, D, 4>();
  };
  auto by_dim = [&]<class KV>() {
    switch (head_dim) {
      case 64:
        by_group.template operator()<KV, 64>();
        return true;
      case 128:
        by_group.template operator()<KV, 128>();
        return true;
      case 256:
        by_group.template operator()<KV, 256>();
        return true;
      default:
        return false;
    }
  };
  return bf16 ? by_dim.template operator()<std::uint16_t>() : by_dim.template operator()<float>();
}

// How a decode step splits: `splits` chunks per row (1: it does not), and
// the workspace each chunk index costs over the whole step (after the
// counters every split workspace starts with).
struct split_plan {
  int splits = 1;
  std::size_t per_split_bytes = 0;  // rows * Hq * (D + 2) floats
  [[nodiscard]] std::size_t bytes() const {
    return splits > 1
               ? paged_attention_counter_bytes + static_cast<std::size_t>(splits) * per_split_bytes
               : 0;
  }
  // Chunks a workspace of `workspace_bytes` holds (at most max_splits).
  [[nodiscard]] int fitting(std::size_t workspace_bytes) const {
    if (workspace_bytes <= paged_attention_counter_bytes || per_split_bytes == 0)
      return 0;
    return static_cast<int>(std::min<std::size_t>(
        max_splits, (workspace_bytes - paged_attention_counter_bytes) / per_split_bytes));
  }
};

// The walk of the split kernel for this step (`mma` only where the
// tensor-core kernel takes it).
attention_walk split_walk(const paged_attention_params& p) {
  return detail::walk_of(p, true);
}

// Fewest positions a chunk of `walk`'s split kernel: its own minimum
// (min_chunk; the tensor-core walks' constants), or the A/B override.
int min_length_of(attention_walk walk) {
  if (const int n = detail::split_min_chunk_override(); n > 0)
    return n;
  if (walk == attention_walk::rows_mma)
    return detail::decode_rows_mma_min_chunk;
  return walk == attention_walk::mma ? detail::decode_mma_min_chunk : min_chunk;
}

// The split rule, from host-known sizes only: with B = rows * Hkv * head
// groups one-pass blocks and W = resident split blocks (of `walk`'s kernel)
// per SM * num_sms,
//   splits = min(waves * W / B, pages * page_size / (rows * fewest), max_splits),
// (waves 2, fewest min_chunk; the tensor-core walks' own: min_length_of,
// decode_mma_split_waves, decode_rows_mma_split_waves),
// no split below 2 (rows short on average: pages * page_size / rows bounds
// the mean length from above), and none when the one-pass grid fills more
// than half a wave (B > W / 2): measured on an H200 at 64 rows x 2,048
// positions (B = 512, W = 528), 2 splits ran at 0.60 of copy bandwidth
// against the one pass's 0.66. MSTAR_ATTN_SPLITS=N (A/B runs) replaces
// the grid's part, half-wave test included: min(N, by length, max_splits).
split_plan plan_splits(const paged_attention_params& p, int num_sms, attention_walk walk) {
  split_plan plan;
  attn_args a{};
  if (!p.table.is_decode() || !detail::to_attn_args(p, a) || a.table.rows <= 0)
    return plan;
  // The fast kernels' 16-byte loads need a 16-byte aligned arena.
  if (reinterpret_cast<std::uintptr_t>(p.arena.base) % 16 != 0)
    return plan;
  const int d = p.arena.geometry.head_dim;
  int resident = 0;
  std::int64_t per_row = 0;  // one-pass blocks a row
  detail::decode_rows_shape rows_shape;
  if (walk == attention_walk::mma) {  // split_walk checked that the kernel takes p
    resident = detail::decode_mma_resident(d, a.group);
    per_row =
        std::int64_t{a.kv_heads} * detail::ceil_div(a.group, detail::decode_mma_heads(a.group));
  } else if (walk == attention_walk::rows) {  // likewise
    if (!detail::decode_rows_shape_of(a.kv_heads, a.group, d, rows_shape))
      return plan;  // unreachable: split_walk checked
    resident = detail::decode_rows_resident(d, a.group, rows_shape);
    per_row = rows_shape.blocks_per_row(a.kv_heads);
  } else if (walk == attention_walk::rows_mma) {  // likewise
    if (!detail::decode_rows_mma_shape_of(a.kv_heads, a.group, d, rows_shape))
      return plan;  // unreachable: split_walk checked
    resident = detail::decode_rows_mma_resident(d, a.group, rows_shape);
    per_row = rows_shape.blocks_per_row(a.kv_heads);
  } else if (!with_shape(p.arena.geometry.dtype == mstar::dtype::bfloat16, d, a.group, walk,
                         [&]<class KV, int D, int GC, int Stages>() {
                           resident = resident_blocks<KV, D, GC, Stages>();
                           per_row = std::int64_t{a.kv_heads} * detail::ceil_div(a.group, GC);
                         })) {
    return plan;
  }
  const std::int64_t rows = a.table.rows;
  const std::int64_t blocks = rows * per_row;
  const std::int64_t wave = std::int64_t{resident} * std::max(num_sms, 1);
  const int forced = detail::split_count_override();
  if (forced == 0 && 2 * blocks > wave)
    return plan;
  const int waves = walk == attention_walk::mma        ? detail::decode_mma_split_waves
                    : walk == attention_walk::rows_mma ? detail::decode_rows_mma_split_waves
                                                       : split_waves;
  const std::int64_t by_grid = forced > 0 ? forced : waves * wave / blocks;
  const int fewest = min_length_of(walk);
  const std::int64_t by_length = static_cast<std::int64_t>(p.table.kv_indices.size()) *
                                 p.arena.geometry.page_size / (rows * fewest);
  const std::int64_t splits = std::min({by_grid, by_length, std::int64_t{max_splits}});
  if (splits < 2)
    return plan;
  plan.splits = static_cast<int>(splits);
  plan.per_split_bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(a.q_heads) *
                         (d + 2) * sizeof(float);
  return plan;
}

// The merge of the partials `s` of step `a` into a.out.
// Nothing where the split kernel merged them itself (s.counters set).
template <int D>
cudaError_t launch_merge(const attn_args& a, const split_args& s, attention_merge merge,
                         cudaStream_t stream) {
  if (s.counters != nullptr)
    return cudaSuccess;
  const std::int64_t items = std::int64_t{a.table.rows} * a.q_heads;
  if (merge == attention_merge::warp) {
    constexpr int warps = detail::merge_warps;
    detail::launch_chained(detail::merge_splits_warp, grid_of(detail::ceil_div(items, warps)),
                           warps * 32, 0, stream, a, s, D);
  } else {
    detail::launch_chained(detail::merge_splits_block<D>, grid_of(items), detail::merge_threads, 0,
                           stream, a, s);
  }
  return detail::launch_status();
}

// launch_merge at `head_dim` (64, 128 or 256), for the split kernels that
// took it first: they refuse any other, so the default is unreachable.
cudaError_t launch_merge_for(const attn_args& a, int head_dim, const split_args& s,
                             attention_merge merge, cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return launch_merge<64>(a, s, merge, stream);
    case 128:
      return launch_merge<128>(a, s, merge, stream);
    case 256:
      return launch_merge<256>(a, s, merge, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <class KV, int D, int GC, int Stages>
cudaError_t launch_split(attn_args a, const split_args& s, attention_merge merge,
                         cudaStream_t stream) {
  a.chunks = detail::ceil_div(a.group, GC);
  const std::int64_t blocks = std::int64_t{a.table.rows} * a.kv_heads * a.chunks * s.splits;
  if constexpr (Stages == 0) {
    if (s.counters != nullptr) {
      detail::launch_chained(attend_split<KV, D, GC, 0, true>, grid_of(blocks), 128, 0, stream, a,
                             s);
      return detail::launch_status();  // merged
    }
  }
  detail::launch_chained(attend_split<KV, D, GC, Stages>, grid_of(blocks), 128, 0, stream, a, s);
  if (const cudaError_t err = detail::launch_status(); err != cudaSuccess)
    return err;
  return launch_merge<D>(a, s, merge, stream);
}

// The tensor-core split kernel, then the merge.
cudaError_t launch_split_mma(const attn_args& a, int head_dim, split_args s, attention_merge merge,
                             cudaStream_t stream) {
  s.step = detail::decode_mma_step;
  s.min_length = min_length_of(attention_walk::mma);
  s.single_direct = detail::single_direct_enabled();  // under either merge
  if (const cudaError_t err = detail::launch_decode_mma(a, head_dim, &s, stream);
      err != cudaSuccess) {
    return err;
  }
  return launch_merge_for(a, head_dim, s, merge, stream);
}

// The whole-row split kernel (chunks in whole stages), then the merge.
cudaError_t launch_split_rows(const attn_args& a, int head_dim, split_args s, attention_merge merge,
                              cudaStream_t stream) {
  detail::decode_rows_shape shape;
  if (!detail::decode_rows_shape_of(a.kv_heads, a.group, head_dim, shape))
    return cudaErrorInvalidValue;  // unreachable: split_walk checked
  s.step = shape.tile;
  if (const cudaError_t err = detail::launch_decode_rows(a, head_dim, &s, stream);
      err != cudaSuccess) {
    return err;
  }
  return launch_merge_for(a, head_dim, s, merge, stream);
}

// The tensor-core whole-row split kernel (chunks in whole stages), then
// the merge.
cudaError_t launch_split_rows_mma(const attn_args& a, int head_dim, split_args s,
                                  attention_merge merge, cudaStream_t stream) {
  detail::decode_rows_shape shape;
  if (!detail::decode_rows_mma_shape_of(a.kv_heads, a.group, head_dim, shape))
    return cudaErrorInvalidValue;  // unreachable: split_walk checked
  s.step = shape.tile;
  s.min_length = min_length_of(attention_walk::rows_mma);
  if (const cudaError_t err = detail::launch_decode_rows_mma(a, head_dim, &s, stream);
      err != cudaSuccess) {
    return err;
  }
  if (head_dim == 64)
    return launch_merge<64>(a, s, merge, stream);
  return launch_merge<128>(a, s, merge, stream);  // the shape took 64 or 128 only
}

int sms_or_current(int num_sms) {
  return num_sms > 0 ? num_sms : detail::sm_count();
}

}  // namespace

namespace detail {

bool fused_merge_takes(const paged_attention_params& p, attention_walk walk) {
  const std::int64_t heads = std::int64_t{p.table.num_rows()} * p.num_qo_heads;
  const bool walk_takes = walk == attention_walk::mma || walk == attention_walk::rows_mma ||
                          walk == attention_walk::registers;
  return walk_takes && heads <= split_counters;
}

}  // namespace detail

int paged_attention_splits(const paged_attention_params& p, int num_sms) {
  return plan_splits(p, sms_or_current(num_sms), split_walk(p)).splits;
}

std::size_t paged_attention_workspace_bytes(const paged_attention_params& p, int num_sms) {
  return plan_splits(p, sms_or_current(num_sms), split_walk(p)).bytes();
}

cudaError_t clear_paged_attention_workspace(void* workspace, std::size_t bytes,
                                            cudaStream_t stream) {
  if (workspace == nullptr || bytes == 0)
    return cudaSuccess;
  return cudaMemsetAsync(workspace, 0, std::min(bytes, paged_attention_counter_bytes), stream);
}

cudaError_t paged_attention(const paged_attention_params& p, void* workspace,
                            std::size_t workspace_bytes, cudaStream_t stream) {
  const attention_walk walk = split_walk(p);
  split_plan plan = plan_splits(p, detail::sm_count(), walk);
  if (plan.splits > 1 && workspace_bytes < plan.bytes())
    plan.splits = plan.fitting(workspace_bytes);
  if (plan.splits < 2 || workspace == nullptr)
    return paged_attention(p, stream);
  if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
    return cudaErrorInvalidValue;
  attn_args a{};
  if (!detail::to_attn_args(p, a))
    return cudaErrorInvalidValue;  // unreachable: the plan checked
  const int d = p.arena.geometry.head_dim;
  const std::size_t parts =
      static_cast<std::size_t>(a.table.rows) * static_cast<std::size_t>(a.q_heads) * plan.splits;
  split_args s{};
  s.acc =
      reinterpret_cast<float*>(static_cast<std::byte*>(workspace) + paged_attention_counter_bytes);
  s.m = s.acc + parts * static_cast<std::size_t>(d);
  s.l = s.m + parts;
  s.splits = plan.splits;
  s.min_length = detail::split_min_chunk_override();  // 0: min_chunk (rows_mma: its own, below)
  attention_merge merge = detail::merge_for(walk);
  if (merge == attention_merge::fused) {
    if (detail::fused_merge_takes(p, walk))
      s.counters = static_cast<unsigned*>(workspace);
    else
      merge = attention_merge::block;
  }
  if (walk == attention_walk::mma)
    return launch_split_mma(a, d, s, merge, stream);
  if (walk == attention_walk::rows)
    return launch_split_rows(a, d, s, merge, stream);
  if (walk == attention_walk::rows_mma)
    return launch_split_rows_mma(a, d, s, merge, stream);
  cudaError_t err = cudaSuccess;
  const bool fast = with_shape(p.arena.geometry.dtype == mstar::dtype::bfloat16, d, a.group, walk,
                               [&]<class KV, int D, int GC, int Stages>() {
                                 s.step = layout<KV, D>::step;
                                 err = launch_split<KV, D, GC, Stages>(a, s, merge, stream);
                               });
  return fast ? err : cudaErrorInvalidValue;  // not fast: unreachable, the plan checked
}

}  // namespace mstar::kernels::cuda
