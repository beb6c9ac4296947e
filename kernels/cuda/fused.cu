// Fused launchers (kernels/cuda/math.hpp): the residual add folded into the
// next RMS norm, and an activation, each writing f32 and/or the bf16 input of
// the GEMM that follows. Each computes its f32 values with the same
// expressions, thread layout and reduction as math.cu's unfused kernels, so
// the results are those of the unfused sequence bit for bit.
#include <algorithm>
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "kernels/cuda/internal/activation.cuh"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/host_checks.hpp"
#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::ceil_div;
using detail::matrix;
using detail::to_matrix;

// math.cu's block size for row kernels: the sum of squares depends on it.
constexpr int row_threads = 256;

// math.cu's expressions (internal/activation.cuh), for equal bits.
using detail::relu2_fn;
using detail::silu_fn;

// Row t's add and norm with Per columns a thread held in registers between
// the passes: the thread's columns are first, first + stride, ... (stride
// the 256 threads of the row's layout), every load of a pass issued before
// any is used (the loop form cannot: each store to residual may alias the
// next delta load, which serialises them: ~8 us a call at batch 64).
// `weight_of(i, h)` gives column h's weight (the thread's i-th), `sum` the
// row's sum of the threads' squares in block_sum's order: every form below
// passes the same values through the same expressions, so the same bits.
template <int Per, class Weight, class Sum>
__device__ __forceinline__ void add_norm_row(matrix<float> residual, matrix<const float> delta,
                                             std::int64_t t, int first, int stride,
                                             Weight weight_of, Sum sum, matrix<float> out,
                                             matrix<std::uint16_t> out_bf16, float eps) {
  float sum_sq = 0.0F;
  float v[Per];
#pragma unroll
  for (int i = 0; i < Per; ++i) {
    const std::int64_t h = first + std::int64_t{i} * stride;
    v[i] = h < residual.cols ? residual(t, h) : 0.0F;
  }
  if (delta.data != nullptr) {
    float d[Per];
#pragma unroll
    for (int i = 0; i < Per; ++i) {
      const std::int64_t h = first + std::int64_t{i} * stride;
      d[i] = h < residual.cols ? delta(t, h) : 0.0F;
    }
#pragma unroll
    for (int i = 0; i < Per; ++i) {
      const std::int64_t h = first + std::int64_t{i} * stride;
      v[i] = v[i] + d[i];
      if (h < residual.cols)
        residual(t, h) = v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < Per; ++i) {
    const std::int64_t h = first + std::int64_t{i} * stride;
    if (h < residual.cols)
      sum_sq += v[i] * v[i];
  }
  sum_sq = sum(sum_sq);
  const float scale = rsqrtf(sum_sq / static_cast<float>(residual.cols) + eps);
#pragma unroll
  for (int i = 0; i < Per; ++i) {
    const std::int64_t h = first + std::int64_t{i} * stride;
    if (h >= residual.cols)
      break;
    const float o = v[i] * scale * weight_of(i, h);
    if (out.data != nullptr)
      out(t, h) = o;
    if (out_bf16.data != nullptr)
      out_bf16(t, h) = detail::to_bf16(o);
  }
}

// One block per row (looping past the grid). Thread i owns columns i,
// i + blockDim.x, ... in both passes: it adds, stores and squares them, then
// after the block sum reads back what it stored, so no other thread's write
// is read, and out may alias residual or delta element for element.
// Per > 0: a row fits Per columns a thread (add_norm_row); same columns,
// same order of the sum, so the same bits either way.
template <int Per>
__global__ void add_rms_norm_kernel(matrix<float> residual, matrix<const float> delta,
                                    const float* weight, std::int64_t weight_stride,
                                    matrix<float> out, matrix<std::uint16_t> out_bf16, float eps) {
  detail::chain_start();
  __shared__ float scratch[32];
  for (std::int64_t t = blockIdx.x; t < residual.rows; t += gridDim.x) {
    if constexpr (Per > 0) {
      add_norm_row<Per>(
          residual, delta, t, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
          [&](int, std::int64_t h) { return weight[h * weight_stride]; },
          [&](float v) { return detail::block_sum(v, scratch); }, out, out_bf16, eps);
    } else {
      float sum_sq = 0.0F;
      for (std::int64_t h = threadIdx.x; h < residual.cols; h += blockDim.x) {
        float v = residual(t, h);
        if (delta.data != nullptr) {
          v = v + delta(t, h);
          residual(t, h) = v;
        }
        sum_sq += v * v;
      }
      sum_sq = detail::block_sum(sum_sq, scratch);
      const float scale = rsqrtf(sum_sq / static_cast<float>(residual.cols) + eps);
      for (std::int64_t h = threadIdx.x; h < residual.cols; h += blockDim.x) {
        const float o = residual(t, h) * scale * weight[h * weight_stride];
        if (out.data != nullptr)
          out(t, h) = o;
        if (out_bf16.data != nullptr)
          out_bf16(t, h) = detail::to_bf16(o);
      }
    }
  }
}

// The thread's Per weight columns (first, first + stride, ...; 0 past the
// row), read before the chained wait: the weight is no kernel's output
// (math.hpp, chained_launches), and every row of the launch uses the same.
template <int Per>
__device__ __forceinline__ void load_weight_columns(const float* weight, std::int64_t weight_stride,
                                                    std::int64_t cols, int first, int stride,
                                                    float (&w)[Per]) {
#pragma unroll
  for (int i = 0; i < Per; ++i) {
    const std::int64_t h = first + std::int64_t{i} * stride;
    w[i] = h < cols ? weight[h * weight_stride] : 0.0F;
  }
}

// Form 2: add_rms_norm_kernel<Per> with the weight columns in registers,
// loaded once before the chained wait, overlapping the previous kernel.
template <int Per>
__global__ void add_rms_norm_early_kernel(matrix<float> residual, matrix<const float> delta,
                                          const float* weight, std::int64_t weight_stride,
                                          matrix<float> out, matrix<std::uint16_t> out_bf16,
                                          float eps) {
  const int first = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  float w[Per];
  load_weight_columns<Per>(weight, weight_stride, residual.cols, first, stride, w);
  detail::chain_start();
  __shared__ float scratch[32];
  for (std::int64_t t = blockIdx.x; t < residual.rows; t += gridDim.x) {
    add_norm_row<Per>(
        residual, delta, t, first, stride, [&](int i, std::int64_t) { return w[i]; },
        [&](float v) { return detail::block_sum(v, scratch); }, out, out_bf16, eps);
  }
}

// block_sum over a row's 256 threads split over a cluster of Split blocks
// of 256 / Split threads (thread j of rank r is the layout's thread
// r * 256 / Split + j): each warp sums its lanes, the eight warps' sums meet
// in distributed shared memory, and every warp adds them as block_reduce
// adds its scratch (lane l < 8 the layout's warp l, the rest 0, the same
// butterfly), so the same bits. Ends with a cluster barrier: no block
// leaves, or refills `slots`, while another reads it.
template <int Split>
__device__ __forceinline__ float cluster_row_sum(float v, float* slots) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr unsigned warps = 8U / Split;  // a block's
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const unsigned lane = threadIdx.x % 32U;
  v = detail::group_sum(v);
  if (lane == 0)
    slots[threadIdx.x / 32U] = v;
  cluster.sync();
  float total = 0.0F;
  if (lane < 8U)
    total = cluster.map_shared_rank(slots, lane / warps)[lane % warps];
  total = detail::group_sum(total);
  cluster.sync();
  return total;
#else
  return v;  // never launched: clusters need sm_90
#endif
}

// Forms 3 and 4: form 2 with each row over a cluster of Split (2, 4) blocks
// of 256 / Split threads along x (grid (Split, rows), looping over rows past
// the grid), thread for thread the 256-thread layout of forms 1 and 2.
template <int Per, int Split>
__global__ void __launch_bounds__(256 / Split)
    add_rms_norm_split_kernel(matrix<float> residual, matrix<const float> delta,
                              const float* weight, std::int64_t weight_stride, matrix<float> out,
                              matrix<std::uint16_t> out_bf16, float eps) {
  constexpr int threads = 256 / Split;
  static_assert(threads % 32 == 0);
  const int first = static_cast<int>(blockIdx.x * threads + threadIdx.x);
  constexpr int stride = 256;
  float w[Per];
  load_weight_columns<Per>(weight, weight_stride, residual.cols, first, stride, w);
  detail::chain_start();
  __shared__ float slots[threads / 32];
  for (std::int64_t t = blockIdx.y; t < residual.rows; t += gridDim.y) {
    add_norm_row<Per>(
        residual, delta, t, first, stride, [&](int i, std::int64_t) { return w[i]; },
        [&](float v) { return cluster_row_sum<Split>(v, slots); }, out, out_bf16, eps);
  }
}

// Rows along grid y (looping past 65535), columns along grid x, as math.cu's
// unary kernel; `up` (optional) multiplies the activation, as `mul` would.
template <class Fn>
__global__ void activate_kernel(matrix<const float> x, matrix<const float> up, matrix<float> out,
                                matrix<std::uint16_t> out_bf16, Fn fn) {
  detail::chain_start();
  for (std::int64_t t = blockIdx.y; t < x.rows; t += gridDim.y) {
    for (std::int64_t d = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; d < x.cols;
         d += std::int64_t{gridDim.x} * blockDim.x) {
      const float a = fn(x(t, d));
      const float v = up.data != nullptr ? a * up(t, d) : a;
      if (out.data != nullptr)
        out(t, d) = v;
      if (out_bf16.data != nullptr)
        out_bf16(t, d) = detail::to_bf16(v);
    }
  }
}

// The same values four columns a thread, with 16-byte loads and stores (8 for
// bf16), over rows x cols / 4 quads, grid-stride: every operand has unit
// column stride, row strides and addresses aligned to 4 elements.
template <class Fn>
__global__ void activate_quads_kernel(matrix<const float> x, matrix<const float> up,
                                      matrix<float> out, matrix<std::uint16_t> out_bf16, Fn fn) {
  detail::chain_start();
  const std::int64_t quads = x.cols / 4;
  const std::int64_t n = x.rows * quads;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = i / quads;
    const std::int64_t d = 4 * (i % quads);
    // The activation GEMV (gemv.cu) builds its input with the same two
    // helpers, so its row is this kernel's bf16 output bit for bit.
    const float4 v = detail::activated_quad(
        *reinterpret_cast<const float4*>(x.data + t * x.row_stride + d),
        up.data != nullptr ? reinterpret_cast<const float4*>(up.data + t * up.row_stride + d)
                           : nullptr,
        fn);
    if (out.data != nullptr)
      *reinterpret_cast<float4*>(out.data + t * out.row_stride + d) = v;
    if (out_bf16.data != nullptr)
      *reinterpret_cast<uint2*>(out_bf16.data + t * out_bf16.row_stride + d) =
          detail::pack_bf16_quad(v);
  }
}

// A view the quad kernel can take: absent, or unit column stride with its
// rows and address on 4-element boundaries.
template <class T>
bool quad_ready(const view<T, 2>& v) {
  return !v || (v.strides[1] == 1 && v.strides[0] % 4 == 0 &&
                reinterpret_cast<std::uintptr_t>(v.data) % (4 * sizeof(T)) == 0);
}

// The CPU reference's rule (kernels/cpu/math.cpp): an operand updated in
// place gives every element its own address, or blocks would race on it.
bool no_self_overlap(const view<float, 2>& v) {
  const bool cols_ok = v.shape[1] <= 1 || v.strides[1] >= 1;
  const bool rows_ok = v.shape[0] <= 1 || v.strides[0] >= (v.shape[1] - 1) * v.strides[1] + 1;
  return cols_ok && rows_ok;
}

template <class T>
result<void> check_optional(const view<T, 2>& v, std::string_view name,
                            const std::array<std::int64_t, 2>& shape) {
  return check_view(v, name, v ? shape : v.shape);
}

template <class Fn>
cudaError_t launch_activate(const activation_params& p, Fn fn, cudaStream_t stream) {
  const std::int64_t rows = p.x.shape[0];
  const std::int64_t cols = p.x.shape[1];
  if (cols % 4 == 0 && quad_ready(p.x) && quad_ready(p.up) && quad_ready(p.out) &&
      quad_ready(p.out_bf16)) {
    const auto blocks =
        static_cast<unsigned>(std::min<std::int64_t>(ceil_div(rows * cols / 4, row_threads), 8192));
    detail::launch_chained(activate_quads_kernel<Fn>, blocks, row_threads, 0, stream,
                           to_matrix(p.x), to_matrix(p.up), to_matrix(p.out), to_matrix(p.out_bf16),
                           fn);
    return detail::launch_status();
  }
  const auto x = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(cols, row_threads), 1024));
  const auto y = static_cast<unsigned>(std::min<std::int64_t>(rows, 65535));
  detail::launch_chained(activate_kernel<Fn>, dim3{x, y}, row_threads, 0, stream, to_matrix(p.x),
                         to_matrix(p.up), to_matrix(p.out), to_matrix(p.out_bf16), fn);
  return detail::launch_status();
}

// The form add_rms_norm takes: MSTAR_ADD_NORM_VARIANT "v1" 1, unset or
// "v2" 2, "v3" 3, "v4" 4; read once. Form 2 since 2026-12-04 (H200,
// bench/h200_small.sh: 1.2-3.5x form 1's time as graphs at 1 / 64 / 256
// rows, ahead of the cluster forms 3 and 4; the 0.56B at 64 rows 0.6305 of
// the roofline against form 1's 0.6171).
int add_norm_default() {
  static const int v = [] {
    const char* e = std::getenv("MSTAR_ADD_NORM_VARIANT");
    const std::string_view s = e != nullptr ? e : "";
    if (s == "v1" || s == "1")
      return 1;
    if (s == "v3" || s == "3")
      return 3;
    if (s == "v4" || s == "4")
      return 4;
    return 2;
  }();
  return v;
}

}  // namespace

cudaError_t add_rms_norm(const add_rms_norm_params& p, cudaStream_t stream) {
  return add_rms_norm_variant(p, -1, stream);
}

cudaError_t add_rms_norm_variant(const add_rms_norm_params& p, int variant, cudaStream_t stream) {
  if (variant == -1)
    variant = add_norm_default();
  if (variant < 1 || variant >= add_rms_norm_variants)
    return cudaErrorInvalidValue;
  const auto& shape = p.residual.shape;
  if (!detail::all_ok(
          {check_view(p.residual, "residual", {any_extent, any_extent}),
           check_optional(p.delta, "delta", shape), check_view(p.weight, "weight", {shape[1]}),
           check_optional(p.out, "out", shape), check_optional(p.out_bf16, "out_bf16", shape)}) ||
      !no_self_overlap(p.residual)) {
    return cudaErrorInvalidValue;
  }
  if (p.residual.numel() == 0)
    return cudaSuccess;
  if (!p.out && !p.out_bf16)
    return cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(shape[0], 1 << 20));
  const auto launch = [&](auto kernel) {
    detail::launch_chained(kernel, blocks, row_threads, 0, stream, to_matrix(p.residual),
                           to_matrix(p.delta), p.weight.data, p.weight.strides[0], to_matrix(p.out),
                           to_matrix(p.out_bf16), p.eps);
    return detail::launch_status();
  };
  const auto launch_split = [&](auto kernel, unsigned split) {
    const dim3 grid{split, static_cast<unsigned>(std::min<std::int64_t>(shape[0], 65535))};
    detail::launch_chained_clusters(kernel, grid, row_threads / split, split, 0, stream,
                                    to_matrix(p.residual), to_matrix(p.delta), p.weight.data,
                                    p.weight.strides[0], to_matrix(p.out), to_matrix(p.out_bf16),
                                    p.eps);
    return detail::launch_status();
  };
  // Forms 2-4 take every row of up to 16 columns a thread; 3 and 4 only
  // where clusters are built (else form 2).
  const auto pick = [&](auto per) {
    constexpr int Per = decltype(per)::value;
    if (variant == 3 && detail::clusters_built())
      return launch_split(add_rms_norm_split_kernel<Per, 2>, 2);
    if (variant == 4 && detail::clusters_built())
      return launch_split(add_rms_norm_split_kernel<Per, 4>, 4);
    if (variant >= 2)
      return launch(add_rms_norm_early_kernel<Per>);
    return launch(add_rms_norm_kernel<Per>);
  };
  const std::int64_t cols = shape[1];
  if (cols <= 4 * row_threads)
    return pick(std::integral_constant<int, 4>{});
  if (cols <= 8 * row_threads)
    return pick(std::integral_constant<int, 8>{});
  if (cols <= 16 * row_threads)
    return pick(std::integral_constant<int, 16>{});
  return launch(add_rms_norm_kernel<0>);
}

cudaError_t activate(const activation_params& p, cudaStream_t stream) {
  if (!detail::all_ok({check_view(p.x, "x", {any_extent, any_extent}),
                       check_optional(p.out, "out", p.x.shape),
                       check_optional(p.out_bf16, "out_bf16", p.x.shape),
                       check_optional(p.up, "up", p.x.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  if (!p.out && !p.out_bf16)
    return cudaErrorInvalidValue;
  switch (p.fn) {
    case activation::silu:
      return launch_activate(p, silu_fn{}, stream);
    case activation::relu2:
      return launch_activate(p, relu2_fn{}, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace mstar::kernels::cuda
