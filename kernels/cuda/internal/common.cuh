#pragma once

// Helpers shared by the CUDA kernels: bf16 bits, warp reductions, a strided
// float matrix for device code, launch bookkeeping. Only .cu files include it.

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <utility>

#include "kernels/tensor_view.hpp"

namespace mstar::kernels::cuda::detail {

/// float -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN. The
/// same bits as the CPU reference's store, so arenas compare byte for byte.
__device__ __forceinline__ std::uint16_t to_bf16(float f) {
  std::uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffU) > 0x7f800000U)
    return static_cast<std::uint16_t>((bits >> 16) | 0x40U);
  bits += 0x7fffU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>(bits >> 16);
}

/// bfloat16 bits -> float (exact).
__device__ __forceinline__ float from_bf16(std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}

/// acc + x . y over a float4, in fused multiply-adds (x first).
__device__ __forceinline__ float dot4(float4 x, float4 y, float acc) {
  acc = fmaf(x.x, y.x, acc);
  acc = fmaf(x.y, y.y, acc);
  acc = fmaf(x.z, y.z, acc);
  return fmaf(x.w, y.w, acc);
}

/// Sum over groups of `Width` consecutive lanes (a power of two <= 32); every
/// lane of the group gets the result.
template <int Width = 32>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int off = Width / 2; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffU, v, off, Width);
  return v;
}

/// The halving butterfly over groups of `Lanes` lanes (powers of two): `x`
/// holds N values a lane; at each step a lane keeps half of its values (the
/// upper half where its lane bit is set), adds its partner's copy of that
/// half and hands over the other. Afterwards lane l of a group holds in
/// x[i], i < max(1, N / Lanes), the group's sum of value l * N / Lanes + i
/// (rounded down where N < Lanes: then Lanes / N lanes hold each value).
template <int Lanes, int N>
__device__ __forceinline__ void halving_sums(float (&x)[N], int lane) {
  int n = N;
#pragma unroll
  for (int off = Lanes / 2; off > 0; off /= 2) {
    if (n > 1) {
      const bool upper = (lane & off) != 0;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        if (i < n / 2) {
          const float keep = upper ? x[i + n / 2] : x[i];
          const float send = upper ? x[i] : x[i + n / 2];
          x[i] = keep + __shfl_xor_sync(0xffffffffU, send, off, Lanes);
        }
      }
      n /= 2;
    } else {
      x[0] += __shfl_xor_sync(0xffffffffU, x[0], off, Lanes);
    }
  }
}

/// Maximum over groups of `Width` consecutive lanes, as `group_sum`.
template <int Width = 32>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int off = Width / 2; off > 0; off /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffU, v, off, Width));
  return v;
}

/// Sum (or, with `Max`, maximum) over the whole block (blockDim.x a multiple
/// of 32, <= 1024); every thread gets the result. `scratch` holds 32 floats;
/// the function ends with a barrier, so it can be called again with the
/// same scratch.
template <bool Max>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const auto warp_reduce = [](float x) { return Max ? group_max(x) : group_sum(x); };
  const unsigned lane = threadIdx.x % 32U;
  const unsigned warp = threadIdx.x / 32U;
  v = warp_reduce(v);
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  const unsigned warps = blockDim.x / 32U;
  float total = lane < warps ? scratch[lane] : (Max ? -INFINITY : 0.0F);
  total = warp_reduce(total);
  __syncthreads();
  return total;
}

/// Sum over the whole block, as `block_reduce`.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce<false>(v, scratch);
}

/// Maximum over the whole block, as `block_reduce`.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce<true>(v, scratch);
}

/// A strided 2-D float matrix as device code indexes it: the host fills it
/// from a `view` (std::array is not usable in device code).
template <class T>
struct matrix {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 0;

  __device__ __forceinline__ T& operator()(std::int64_t r, std::int64_t c) const {
    return data[r * row_stride + c * col_stride];
  }
};

/// The device form of a 2-D view.
template <class T>
matrix<T> to_matrix(const view<T, 2>& v) {
  return matrix<T>{v.data, v.shape[0], v.shape[1], v.strides[0], v.strides[1]};
}

/// Ceiling of a / b for positive b.
template <class A, class B>
__host__ __device__ constexpr A ceil_div(A a, B b) {
  return static_cast<A>((a + static_cast<A>(b) - 1) / static_cast<A>(b));
}

/// kernels::cuda::chained_launches() without the header it lives in.
bool chained_launches_on();

/// Whether `launch_chained` chains `kernel`: `chained_launches_on()`, unless
/// MSTAR_PDL_PLAIN names a piece of its mangled name (kernels/cuda/README.md).
bool chained_launch_of(const void* kernel);

/// Multiprocessors of the current device (cached per device after the first
/// call); 132 if the runtime cannot say.
int sm_count();

/// The error of the launch just made (or an earlier sticky one).
inline cudaError_t launch_status() {
  return cudaGetLastError();
}

// Chained launches (programmatic dependent launch, sm_90 and later): a
// kernel launched through `launch_chained` may start while the kernel
// before it on the stream is still finishing, once every block of that one
// has called `chain_release` (or left). Until `chain_wait` returns it must
// neither read what earlier kernels wrote nor write what they read; what
// no kernel of the stream writes (weights, parameters) it may read before,
// which is the point: a GEMV streams its first weight pieces while the
// kernel before it drains. Every chained kernel calls `chain_wait` in
// every thread that goes on past it, and at least one thread of the grid
// always does, so the grid never completes before the one it chained on
// (a later plain launch orders after both). On older devices, and for a
// plain launch, both are no-ops.

/// A load of what a kernel before this one on the stream wrote (its input
/// activations, the step's plan): a plain, coherent load, never `__ldg`. A
/// chained kernel is resident before the kernel it waits on completes, and
/// the read-only path (`ld.global.nc`) assumes the data cannot change while
/// the kernel runs, which then does not hold: session 45's runs drew
/// different tokens run to run until the SSD update's `__ldg` inputs became
/// plain loads (kernels/cuda/README.md, "Chained launches"). `__ldg` stays
/// for what no kernel writes: weights and parameters.
template <class T>
__device__ __forceinline__ T load_coherent(const T* p) {
  return *p;
}

/// A load through the read-only path (`__ldg`) of what no kernel writes:
/// weights and parameters, which a chained kernel may also read before its
/// wait. The kernels' only `__ldg` (scripts/check-kernel-loads.sh holds
/// them to it); anything a kernel wrote goes through `load_coherent`.
template <class T>
__device__ __forceinline__ T load_weight(const T* p) {
  return __ldg(p);
}

/// Let the next chained kernel on the stream start launching its blocks.
__device__ __forceinline__ void chain_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Wait until the kernels before this one on the stream have completed and
/// their writes are visible.
__device__ __forceinline__ void chain_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Both at a kernel's start: for one that reads nothing before its wait.
__device__ __forceinline__ void chain_start() {
  chain_release();
  chain_wait();
}

/// Ask the L2 cache for the 128-byte line at `p` (no register written):
/// a chained GEMV's weights past the pieces it loads before `chain_wait`.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/// `kernel<<<grid, block, smem, stream>>>(args...)`, chained on the kernel
/// before it when `chained_launches()` (kernels/cuda/math.hpp) says so; like
/// `<<<...>>>` it leaves a failure for `launch_status`. The kernel must call
/// `chain_wait` as above; `chain_release` early lets the kernel after it
/// chain on it. With `cluster` > 1 (sm_90 and later) the blocks run in
/// thread-block clusters of `cluster` along x (grid.x a multiple of it).
template <class... Params, class... Args>
void launch_chained_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster,
                             std::size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[2];
  unsigned n = 0;
  if (chained_launch_of(reinterpret_cast<const void*>(kernel))) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = n;
  static_cast<void>(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

/// `launch_chained_clusters` without clusters.
template <class... Params, class... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                    cudaStream_t stream, Args&&... args) {
  launch_chained_clusters(kernel, grid, block, 1, smem, stream, std::forward<Args>(args)...);
}

/// The row r of a packed batch holding token t: the last r with
/// indptr[r] <= t, for a non-decreasing `indptr` of `rows + 1` entries.
__device__ __forceinline__ int row_of_token(const std::int32_t* indptr, int rows, int t) {
  int lo = 0;
  int hi = rows;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (indptr[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/// Whether every architecture the including file is built for has thread
/// block clusters (sm_90 and later; the default build is sm_90 only): a
/// launcher with a cluster form takes another where this is false.
constexpr bool clusters_built() {
  constexpr int archs[] = {__CUDA_ARCH_LIST__};
  for (const int a : archs) {
    if (a < 900)
      return false;
  }
  return true;
}

}  // namespace mstar::kernels::cuda::detail
