#include <algorithm>
#include <cooperative_groups.h>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/select.cuh"
#include "kernels/cuda/sampling.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::block_stats;
using detail::row_view;

// kernels/sampling.hpp's generator, bit for bit.
__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t& x) {
  x += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = x;
  z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31U);
}

__device__ __forceinline__ std::uint64_t rotl(std::uint64_t x, unsigned k) {
  return (x << k) | (x >> (64U - k));
}

__device__ double uniform_draw(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t mix = stream;
  std::uint64_t x = seed ^ splitmix64(mix);
  std::uint64_t s[4];
  for (auto& word : s)
    word = splitmix64(x);
  const std::uint64_t out = rotl(s[1] * 5U, 7U) * 9U;
  return static_cast<double>(out >> 11U) * 0x1.0p-53;
}

// The CPU's domain checks on the settings.
__device__ bool settings_ok(float temperature, std::int32_t top_k, float top_p) {
  return temperature >= 0.0F && !isinf(temperature) && top_k >= 0 && top_p > 0.0F && top_p <= 1.0F;
}

// Argmax splits a row over `argmax_cluster` blocks (the portable cluster
// size) where there are too few rows for a block each to keep the memory
// busy: one 512-thread block scanning a 131,072-entry row alone took 17.6 us
// on the H200, the cluster's 8 blocks each scan an eighth and merge through
// distributed shared memory (5.2 us at 1 row, 6.3 at 8, 13.8 at 63; a
// block a row 20.5 us at 64 rows and 24.0 at 128: `mstar-gpu-bench --suite
// argmax`, bench/results/h200-argmax-20261203i.jsonl). Below
// `argmax_cluster_rows` rows the clusters' waves (two blocks of 512 an SM)
// are estimated to stay under a block a row's time, which levels off near
// the copy rate (0.66 of it at 128 rows); the crossover between 64 and 128
// rows is not measured.
constexpr unsigned argmax_cluster = 8;
constexpr std::int64_t argmax_cluster_rows = 96;

// Rank 0's merge of every block's stats of the cluster, in rank 0's thread
// 0 (the others keep theirs). `part`: this block's slot, read by rank 0.
__device__ block_stats cluster_merge(block_stats st, block_stats& part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  if (threadIdx.x == 0)
    part = st;
  cluster.sync();
  if (cluster.block_rank() == 0 && threadIdx.x < 32) {
    st = threadIdx.x < cluster.num_blocks() ? *cluster.map_shared_rank(&part, threadIdx.x)
                                            : detail::no_stats();
    for (int off = 16; off > 0; off /= 2)
      st = merge(st, detail::shfl(st, off));
  }
  // No block leaves (its shared memory with it) while rank 0 reads.
  cluster.sync();
#endif
  return st;
}

// Grid (blocks a row, rows): the blocks of a row, one or a cluster of
// gridDim.x, each scan a contiguous piece of it (a multiple of 4 entries,
// so every piece of an aligned row starts aligned).
__global__ void __launch_bounds__(detail::select_threads)
    argmax_kernel(detail::matrix<const float> logits, std::int32_t* out) {
  __shared__ block_stats slots[32];
  __shared__ block_stats part;
  detail::chain_start();
  const unsigned parts = gridDim.x;
  for (std::int64_t r = blockIdx.y; r < logits.rows; r += gridDim.y) {
    const row_view row{logits.data + r * logits.row_stride, logits.col_stride, logits.cols};
    const std::int64_t piece = detail::ceil_div(detail::ceil_div(row.n, parts), 4) * 4;
    const std::int64_t begin = std::min<std::int64_t>(row.n, blockIdx.x * piece);
    const std::int64_t end = std::min<std::int64_t>(row.n, begin + piece);
    block_stats st = detail::range_stats(row, begin, end, slots);
    if (parts > 1)
      st = cluster_merge(st, part);
    if (blockIdx.x == 0 && threadIdx.x == 0)
      out[r] = st.bad || st.finite == 0 ? -1 : st.argmax;
    __syncthreads();  // warp 0 has read `slots` before the next row fills them
  }
}

__global__ void sample_kernel(sample_batch_params p) {
  detail::chain_start();
  __shared__ detail::select_scratch scratch;
  const detail::matrix<const float> logits{p.logits.data, p.logits.shape[0], p.logits.shape[1],
                                           p.logits.strides[0], p.logits.strides[1]};
  for (std::int64_t r = blockIdx.x; r < logits.rows; r += gridDim.x) {
    const float temperature = p.temperature != nullptr ? p.temperature[r] : 0.0F;
    const std::int32_t top_k = p.top_k != nullptr ? p.top_k[r] : 0;
    const float top_p = p.top_p != nullptr ? p.top_p[r] : 1.0F;
    const row_view row{logits.data + r * logits.row_stride, logits.col_stride, logits.cols};
    const block_stats st = detail::row_stats(row, scratch);
    if (st.bad || st.finite == 0 || !settings_ok(temperature, top_k, top_p)) {
      if (threadIdx.x == 0)
        p.out[r] = -1;
      continue;
    }
    if (temperature == 0.0F || top_k == 1) {
      if (threadIdx.x == 0)
        p.out[r] = st.argmax;
      continue;
    }
    const detail::weight_fn w{static_cast<double>(st.max), static_cast<double>(temperature)};
    // Top-k: the k-th largest key is the floor of the kept set.
    std::uint64_t floor = 0;
    if (top_k != 0 && top_k < st.finite) {
      detail::radix_select(row, 0, w, detail::select_mode::count_at_least,
                           static_cast<double>(top_k), scratch, floor);
    }
    // Top-p: the shortest prefix whose mass reaches top_p of the kept mass.
    if (top_p < 1.0F) {
      const double total = detail::kept_mass(row, floor, w, scratch);
      std::uint64_t cut = 0;
      if (detail::radix_select(row, floor, w, detail::select_mode::mass_at_least,
                               static_cast<double>(top_p) * total, scratch, cut)) {
        floor = cut;
      }
    }
    // The draw: the first candidate whose cumulative mass exceeds u * kept.
    const double kept = detail::kept_mass(row, floor, w, scratch);
    const double target =
        uniform_draw(p.seed != nullptr ? p.seed[r] : 0, p.counter != nullptr ? p.counter[r] : 0) *
        kept;
    std::uint64_t drawn = 0;
    if (!detail::radix_select(row, floor, w, detail::select_mode::mass_above, target, scratch,
                              drawn)) {
      drawn = detail::min_kept_key(row, floor, scratch);  // rounding left the total short
    }
    if (threadIdx.x == 0)
      p.out[r] = detail::id_of(drawn);
  }
}

__global__ void loopback_kernel(loopback_params p) {
  detail::chain_start();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < p.n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    p.ids[p.pairs[2 * i]] = p.drawn[p.pairs[2 * i + 1]];
  }
}

// One int of the plan: a loopback sentinel in the ids becomes the draw.
__device__ __forceinline__ std::int32_t plan_value(const plan_upload_params& p, std::int64_t i,
                                                   std::int32_t v) {
  if (v <= -2 && i >= p.ids_begin && i < p.ids_end && -2LL - v < p.drawn_rows)
    return p.drawn[-2 - v];
  return v;
}

// Grid-stride over 16-byte pieces where both ends are aligned (the device
// reads host memory a bus transaction a load, so wide loads), else over ints.
// An inlined plan is read from the parameters in place (__grid_constant__:
// no copy of them per thread).
__global__ void upload_plan_kernel(const __grid_constant__ plan_upload_params p) {
  detail::chain_start();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int32_t* const src = p.inlined ? p.inline_plan : p.src;
  const bool wide = reinterpret_cast<std::uintptr_t>(p.dst) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(src) % 16 == 0;
  std::int64_t done = 0;
  if (wide) {
    const std::int64_t quads = p.n / 4;
    const auto* s4 = reinterpret_cast<const int4*>(src);
    auto* d4 = reinterpret_cast<int4*>(p.dst);
    for (std::int64_t q = first; q < quads; q += stride) {
      int4 v = s4[q];
      const std::int64_t i = 4 * q;
      v.x = plan_value(p, i, v.x);
      v.y = plan_value(p, i + 1, v.y);
      v.z = plan_value(p, i + 2, v.z);
      v.w = plan_value(p, i + 3, v.w);
      d4[q] = v;
    }
    done = 4 * quads;
  }
  for (std::int64_t i = done + first; i < p.n; i += stride)
    p.dst[i] = plan_value(p, i, src[i]);
}

unsigned row_grid(std::int64_t rows) {
  return static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 16));
}

}  // namespace

cudaError_t sample(const sample_batch_params& p, cudaStream_t stream) {
  if (!check_view(p.logits, "logits", {any_extent, any_extent}) || p.out == nullptr ||
      p.logits.shape[1] > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  if (p.logits.shape[0] == 0)
    return cudaSuccess;
  detail::launch_chained(sample_kernel, row_grid(p.logits.shape[0]), detail::select_threads, 0,
                         stream, p);
  return detail::launch_status();
}

cudaError_t argmax(view<const float, 2> logits, std::int32_t* out, cudaStream_t stream) {
  if (!check_view(logits, "logits", {any_extent, any_extent}) || out == nullptr ||
      logits.shape[1] > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  if (logits.shape[0] == 0)
    return cudaSuccess;
  const std::int64_t rows = logits.shape[0];
  const auto grid_rows = static_cast<unsigned>(std::min<std::int64_t>(rows, 65535));
  if (detail::clusters_built() && rows < argmax_cluster_rows) {
    detail::launch_chained_clusters(argmax_kernel, dim3(argmax_cluster, grid_rows),
                                    detail::select_threads, argmax_cluster, 0, stream,
                                    detail::to_matrix(logits), out);
  } else {
    detail::launch_chained(argmax_kernel, dim3(1, grid_rows), detail::select_threads, 0, stream,
                           detail::to_matrix(logits), out);
  }
  return detail::launch_status();
}

cudaError_t loopback_ids(const loopback_params& p, cudaStream_t stream) {
  if (p.n < 0 || (p.n > 0 && (p.ids == nullptr || p.pairs == nullptr || p.drawn == nullptr)))
    return cudaErrorInvalidValue;
  if (p.n == 0)
    return cudaSuccess;
  // A step has at most a few hundred rows: one small block is plenty.
  constexpr unsigned threads = 128;
  const auto blocks =
      static_cast<unsigned>(std::min<std::int64_t>((p.n + threads - 1) / threads, 64));
  detail::launch_chained(loopback_kernel, blocks, threads, 0, stream, p);
  return detail::launch_status();
}

namespace {

bool plan_upload_fits(const plan_upload_params& p) {
  return p.n >= 0 && (!p.inlined || p.n <= plan_inline_capacity) &&
         (p.n == 0 || (p.dst != nullptr && (p.inlined || p.src != nullptr))) && p.ids_begin >= 0 &&
         p.ids_end >= p.ids_begin && p.ids_end <= p.n && p.drawn_rows >= 0 &&
         (p.drawn_rows == 0 || p.drawn != nullptr);
}

// A decode step's plan is a few hundred ints plus its pages' ids: a block
// takes 1,024 ints a pass, up to 64 blocks.
constexpr unsigned plan_threads = 256;
unsigned plan_blocks(std::int64_t n) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((n + 4 * plan_threads - 1) / (4 * plan_threads), 1, 64));
}

}  // namespace

cudaError_t upload_plan(const plan_upload_params& p, cudaStream_t stream) {
  if (!plan_upload_fits(p))
    return cudaErrorInvalidValue;
  if (p.n == 0)
    return cudaSuccess;
  detail::launch_chained(upload_plan_kernel, plan_blocks(p.n), plan_threads, 0, stream, p);
  return detail::launch_status();
}

cudaError_t set_upload_plan_node(cudaGraphExec_t exec, cudaGraphNode_t node,
                                 const plan_upload_params& p) {
  if (!plan_upload_fits(p) || p.n == 0 || exec == nullptr || node == nullptr)
    return cudaErrorInvalidValue;
  cudaKernelNodeParams kp{};
  if (const cudaError_t e = cudaGraphKernelNodeGetParams(node, &kp); e != cudaSuccess)
    return e;
  plan_upload_params copy = p;
  void* args[] = {&copy};
  kp.gridDim = dim3(plan_blocks(p.n));
  kp.blockDim = dim3(plan_threads);
  kp.kernelParams = args;
  kp.extra = nullptr;
  return cudaGraphExecKernelNodeSetParams(exec, node, &kp);
}

}  // namespace mstar::kernels::cuda
