// Fused launchers (kernels/cuda/math.hpp): the residual add folded into the
// next RMS norm, and an activation, each writing f32 and/or the bf16 input of
// the GEMM that follows. Each computes its f32 values with the same
// expressions, thread layout and reduction as math.cu's unfused kernels, so
// the results are those of the unfused sequence bit for bit.
#include <algorithm>
#include <cstdint>

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

// One block per row (looping past the grid). Thread i owns columns i,
// i + blockDim.x, ... in both passes: it adds, stores and squares them, then
// after the block sum reads back what it stored, so no other thread's write
// is read, and out may alias residual or delta element for element.
// Per > 0: a row fits Per columns a thread, held in registers between the
// passes, every load of a pass issued before any is used (the loop form
// cannot: each store to residual may alias the next delta load, which
// serialises them: ~8 us a call at batch 64). Same columns, same order of
// the sum, so the same bits either way.
template <int Per>
__global__ void add_rms_norm_kernel(matrix<float> residual, matrix<const float> delta,
                                    const float* weight, std::int64_t weight_stride,
                                    matrix<float> out, matrix<std::uint16_t> out_bf16, float eps) {
  detail::chain_start();
  __shared__ float scratch[32];
  for (std::int64_t t = blockIdx.x; t < residual.rows; t += gridDim.x) {
    float sum_sq = 0.0F;
    if constexpr (Per > 0) {
      float v[Per];
#pragma unroll
      for (int i = 0; i < Per; ++i) {
        const std::int64_t h = threadIdx.x + std::int64_t{i} * blockDim.x;
        v[i] = h < residual.cols ? residual(t, h) : 0.0F;
      }
      if (delta.data != nullptr) {
        float d[Per];
#pragma unroll
        for (int i = 0; i < Per; ++i) {
          const std::int64_t h = threadIdx.x + std::int64_t{i} * blockDim.x;
          d[i] = h < residual.cols ? delta(t, h) : 0.0F;
        }
#pragma unroll
        for (int i = 0; i < Per; ++i) {
          const std::int64_t h = threadIdx.x + std::int64_t{i} * blockDim.x;
          v[i] = v[i] + d[i];
          if (h < residual.cols)
            residual(t, h) = v[i];
        }
      }
#pragma unroll
      for (int i = 0; i < Per; ++i) {
        const std::int64_t h = threadIdx.x + std::int64_t{i} * blockDim.x;
        if (h < residual.cols)
          sum_sq += v[i] * v[i];
      }
      sum_sq = detail::block_sum(sum_sq, scratch);
      const float scale = rsqrtf(sum_sq / static_cast<float>(residual.cols) + eps);
#pragma unroll
      for (int i = 0; i < Per; ++i) {
        const std::int64_t h = threadIdx.x + std::int64_t{i} * blockDim.x;
        if (h >= residual.cols)
          break;
        const float o = v[i] * scale * weight[h * weight_stride];
        if (out.data != nullptr)
          out(t, h) = o;
        if (out_bf16.data != nullptr)
          out_bf16(t, h) = detail::to_bf16(o);
      }
    } else {
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

}  // namespace

cudaError_t add_rms_norm(const add_rms_norm_params& p, cudaStream_t stream) {
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
  const std::int64_t cols = shape[1];
  if (cols <= 4 * row_threads)
    return launch(add_rms_norm_kernel<4>);
  if (cols <= 8 * row_threads)
    return launch(add_rms_norm_kernel<8>);
  if (cols <= 16 * row_threads)
    return launch(add_rms_norm_kernel<16>);
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
