#include <algorithm>
#include <cstdlib>
#include <cublas_v2.h>
#include <string_view>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/gemv.hpp"
#include "kernels/cuda/internal/host_checks.hpp"
#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::ceil_div;

// Fills out[t][n] with bias[n] (or zero), the GEMM's beta = 1 starting
// point; `add` (f32, an accumulating product): adds the bias instead.
template <class Out>
__global__ void fill_bias_kernel(Out* out, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                                 const float* bias, std::int64_t bias_stride, bool add) {
  for (std::int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    for (std::int64_t n = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; n < cols;
         n += std::int64_t{gridDim.x} * blockDim.x) {
      const float b = bias != nullptr ? bias[n * bias_stride] : 0.0F;
      if constexpr (sizeof(Out) == 2)
        out[t * ld + n] = detail::to_bf16(b);
      else
        out[t * ld + n] = add ? out[t * ld + n] + b : b;
    }
  }
}

template <class Out>
cudaError_t fill_bias(Out* out, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                      const view<const float, 1>& bias, cudaStream_t stream, bool add = false) {
  constexpr int threads = 256;
  const dim3 grid{static_cast<unsigned>(std::min<std::int64_t>(ceil_div(cols, threads), 1024)),
                  static_cast<unsigned>(std::min<std::int64_t>(rows, 65535))};
  fill_bias_kernel<<<grid, threads, 0, stream>>>(out, rows, cols, ld, bias.data,
                                                 bias ? bias.strides[0] : 0, add);
  return detail::launch_status();
}

// Row stride for BLAS, as the CPU reference takes it: a single row may carry
// any stride.
template <class T>
std::int64_t leading_dim(const view<T, 2>& v) {
  return v.shape[0] > 1 ? v.strides[0] : std::max<std::int64_t>(v.shape[1], 1);
}

template <class T>
bool blas_operand_ok(const view<T, 2>& v) {
  return (v.shape[1] <= 1 || v.strides[1] == 1) && leading_dim(v) >= v.shape[1];
}

// MSTAR_GEMV=0 sends one-row products to cuBLAS too (for A/B measurements).
bool gemv_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("MSTAR_GEMV");
    return e == nullptr || std::string_view{e} != "0";
  }();
  return on;
}

cudaError_t from_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return cudaSuccess;
    case CUBLAS_STATUS_INVALID_VALUE:
      return cudaErrorInvalidValue;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return cudaErrorNotSupported;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return cudaErrorLaunchFailure;
    default:
      return cudaErrorUnknown;
  }
}

// Row-major out[T][N] = x[T][K] * w[N][K]^T is, column-major, out^T (N x T)
// = op_T(w) (N x K) * x^T (K x T): so A = w transposed, B = x as is.
struct gemm_shape {
  int m, n, k, lda, ldb, ldc;
};

template <class X, class W, class O>
gemm_shape shape_of(const view<X, 2>& x, const view<W, 2>& w, const view<O, 2>& out) {
  return {static_cast<int>(w.shape[0]),     static_cast<int>(x.shape[0]),
          static_cast<int>(x.shape[1]),     static_cast<int>(leading_dim(w)),
          static_cast<int>(leading_dim(x)), static_cast<int>(leading_dim(out))};
}

// Readies `out` for the GEMM and the handle for `stream`: a bias (or, with
// k == 0, zeros) is filled in and accumulated onto (beta 1); without a bias
// the GEMM writes `out` itself (beta 0, one launch fewer). `done`: k == 0,
// nothing is left for the GEMM.
// `accumulate` (f32 only): `out` already holds what the product adds to; a
// bias is added to it (K 0: nothing else happens) and the GEMM takes beta 1.
template <class Out>
cudaError_t start_output(const blas_handle& blas, Out* out, std::int64_t rows, std::int64_t cols,
                         const gemm_shape& g, const view<const float, 1>& bias, cudaStream_t stream,
                         float& beta, bool& done, bool accumulate = false) {
  const bool fill = static_cast<bool>(bias) || (g.k == 0 && !accumulate);
  beta = fill || accumulate ? 1.0F : 0.0F;
  done = g.k == 0;
  if (fill) {
    if (const cudaError_t err = fill_bias(out, rows, cols, g.ldc, bias, stream, accumulate);
        err != cudaSuccess || done)
      return err;
  }
  if (done)
    return cudaSuccess;
  return from_status(cublasSetStream(blas.get(), stream));
}

}  // namespace

cudaError_t linear(const blas_handle& blas, const linear_params& p, cudaStream_t stream) {
  if (!detail::all_ok(
          {check_view(p.x, "x", {any_extent, any_extent}),
           check_view(p.weight, "weight", {any_extent, p.x.shape[1]}),
           check_view(p.bias, "bias", p.bias ? std::array{p.weight.shape[0]} : p.bias.shape),
           check_view(p.out, "out", {p.x.shape[0], p.weight.shape[0]})}) ||
      !blas_operand_ok(p.x) || !blas_operand_ok(p.weight) || !blas_operand_ok(p.out)) {
    return cudaErrorInvalidValue;
  }
  if (p.out.numel() == 0)
    return cudaSuccess;
  const gemm_shape g = shape_of(p.x, p.weight, p.out);
  float beta = 0.0F;
  bool done = false;
  if (const cudaError_t err = start_output(blas, p.out.data, p.x.shape[0], p.weight.shape[0], g,
                                           p.bias, stream, beta, done);
      err != cudaSuccess || done)
    return err;
  const float one = 1.0F;
  return from_status(cublasSgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, g.m, g.n, g.k, &one,
                                 p.weight.data, g.lda, p.x.data, g.ldb, &beta, p.out.data, g.ldc));
}

cudaError_t linear_bf16(const blas_handle& blas, const linear_bf16_params& p, cudaStream_t stream) {
  const bool f32_out = static_cast<bool>(p.out_f32);
  if (f32_out == static_cast<bool>(p.out_bf16) || (p.accumulate && !f32_out))
    return cudaErrorInvalidValue;
  const std::array<std::int64_t, 2> out_shape{p.x.shape[0], p.weight.shape[0]};
  if (!detail::all_ok(
          {check_view(p.x, "x", {any_extent, any_extent}),
           check_view(p.weight, "weight", {any_extent, p.x.shape[1]}),
           check_view(p.bias, "bias", p.bias ? std::array{p.weight.shape[0]} : p.bias.shape),
           f32_out ? check_view(p.out_f32, "out", out_shape)
                   : check_view(p.out_bf16, "out", out_shape)}) ||
      !blas_operand_ok(p.x) || !blas_operand_ok(p.weight) ||
      !(f32_out ? blas_operand_ok(p.out_f32) : blas_operand_ok(p.out_bf16))) {
    return cudaErrorInvalidValue;
  }
  if (out_shape[0] * out_shape[1] == 0)
    return cudaSuccess;
  if (gemv_enabled() && detail::gemv_bf16_fits(p))
    return detail::launch_gemv_bf16(p, stream);
  const gemm_shape g =
      f32_out ? shape_of(p.x, p.weight, p.out_f32) : shape_of(p.x, p.weight, p.out_bf16);
  void* out = f32_out ? static_cast<void*>(p.out_f32.data) : static_cast<void*>(p.out_bf16.data);
  float beta = 0.0F;
  bool done = false;
  const cudaError_t started = f32_out
                                  ? start_output(blas, p.out_f32.data, out_shape[0], out_shape[1],
                                                 g, p.bias, stream, beta, done, p.accumulate)
                                  : start_output(blas, p.out_bf16.data, out_shape[0], out_shape[1],
                                                 g, p.bias, stream, beta, done);
  if (started != cudaSuccess || done)
    return started;
  const float one = 1.0F;
  return from_status(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, g.m, g.n, g.k, &one,
                                  p.weight.data, CUDA_R_16BF, g.lda, p.x.data, CUDA_R_16BF, g.ldb,
                                  &beta, out, f32_out ? CUDA_R_32F : CUDA_R_16BF, g.ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {

// The conv fold's rules (conv_step_fold): a conv of width 2..4 on a run of
// the product's f32 outputs, not accumulated, with somewhere to write.
bool conv_fold_fits(const rms_norm_linear_bf16_params& p) {
  if (!p.conv)
    return true;
  const conv_step_fold& c = *p.conv;
  return p.out_f32 && !p.accumulate && c.w.weight != nullptr && c.w.channels > 0 &&
         c.w.width >= 2 && c.w.width <= conv_step_fold_max_width && c.first >= 0 &&
         c.first + c.w.channels <= p.weight.shape[0] && c.out != nullptr && c.state != nullptr &&
         !c.slot_indices.empty();
}

// The embedding fold's rules (embedding_fold): a token, a table of K-wide
// contiguous rows, and a row to write.
bool embed_fold_fits(const rms_norm_linear_bf16_params& p) {
  if (!p.embed)
    return true;
  const embedding_fold& e = *p.embed;
  const std::int64_t k = p.weight.shape[1];
  return e.ids.data != nullptr && e.ids.shape[0] >= 1 && e.table.data != nullptr &&
         e.table.shape[0] >= 1 && e.table.shape[1] == k && e.table.strides[1] == 1 &&
         (e.table.shape[0] == 1 || e.table.strides[0] == k) && e.out != nullptr;
}

// The activation epilogue's rules (out_activation): a bf16 output, no other
// fold beside it.
bool activation_epilogue_fits(const rms_norm_linear_bf16_params& p) {
  return !p.out_activation || (p.out_bf16 && !p.conv && !p.embed);
}

// The KV append fold's rules (kv_append_fold): an f32 output taken as it
// is, no other fold beside it, an arena append_kv takes, a one-row decode
// table, and K and V inside the output.
bool append_fold_fits(const rms_norm_linear_bf16_params& p) {
  if (!p.append)
    return true;
  const kv_append_fold& f = *p.append;
  const kv_geometry& g = f.arena.geometry;
  const std::int64_t e = std::int64_t{g.num_kv_heads} * g.head_dim;
  return p.out_f32 && !p.accumulate && !p.conv && !p.embed && !p.out_activation && !p.argmax &&
         f.arena.base != nullptr &&
         (g.dtype == mstar::dtype::float32 || g.dtype == mstar::dtype::bfloat16) &&
         g.page_size > 0 && g.num_kv_heads > 0 && g.head_dim > 0 && f.layer >= 0 &&
         f.layer < g.num_layers && f.table.num_rows() == 1 && f.table.is_decode() &&
         f.table.decode_offset.size() >= 1 && f.first >= 0 && f.first + 2 * e <= p.weight.shape[0];
}

// The argmax fold's rules (argmax_fold): an f32 output taken as it is, no
// other fold beside it, a draw to write and a meeting place for its blocks.
bool argmax_fold_fits(const rms_norm_linear_bf16_params& p) {
  if (!p.argmax)
    return true;
  const argmax_fold& f = *p.argmax;
  return p.out_f32 && !p.accumulate && !p.conv && !p.embed && !p.out_activation &&
         f.out != nullptr && f.state != nullptr &&
         reinterpret_cast<std::uintptr_t>(f.state) % alignof(argmax_fold_state) == 0;
}

}  // namespace

bool rms_norm_linear_bf16_fits(const rms_norm_linear_bf16_params& p) {
  const bool f32_out = static_cast<bool>(p.out_f32);
  if (f32_out == static_cast<bool>(p.out_bf16) || (p.accumulate && !f32_out) ||
      !conv_fold_fits(p) || !embed_fold_fits(p) || !activation_epilogue_fits(p) ||
      !argmax_fold_fits(p) || !append_fold_fits(p))
    return false;
  const std::int64_t k = p.weight.shape[1];
  const std::array<std::int64_t, 2> out_shape{1, p.weight.shape[0]};
  return detail::all_ok(
             {check_view(p.x, "x", {1, k}), check_view(p.norm_weight, "norm_weight", {k}),
              check_view(p.weight, "weight", {any_extent, any_extent}),
              check_view(p.bias, "bias", p.bias ? std::array{p.weight.shape[0]} : p.bias.shape),
              f32_out ? check_view(p.out_f32, "out", out_shape)
                      : check_view(p.out_bf16, "out", out_shape)}) &&
         (f32_out ? blas_operand_ok(p.out_f32) : blas_operand_ok(p.out_bf16)) &&
         detail::gemv_rms_norm_fits(p);
}

cudaError_t rms_norm_linear_bf16(const rms_norm_linear_bf16_params& p, cudaStream_t stream) {
  if (!rms_norm_linear_bf16_fits(p))
    return cudaErrorInvalidValue;
  if (p.weight.shape[0] == 0)
    return cudaSuccess;
  return detail::launch_gemv_rms_norm_bf16(p, stream);
}

bool gated_rms_norm_linear_bf16_fits(const gated_rms_norm_linear_bf16_params& p) {
  const bool f32_out = static_cast<bool>(p.out_f32);
  if (f32_out == static_cast<bool>(p.out_bf16) || (p.accumulate && !f32_out))
    return false;
  const std::int64_t k = p.weight.shape[1];
  const std::array<std::int64_t, 2> out_shape{1, p.weight.shape[0]};
  return detail::all_ok(
             {check_view(p.x, "x", {1, k}),
              check_view(p.gate, "gate", p.gate ? std::array<std::int64_t, 2>{1, k} : p.gate.shape),
              check_view(p.norm_weight, "norm_weight", {k}),
              check_view(p.weight, "weight", {any_extent, any_extent}),
              check_view(p.bias, "bias", p.bias ? std::array{p.weight.shape[0]} : p.bias.shape),
              f32_out ? check_view(p.out_f32, "out", out_shape)
                      : check_view(p.out_bf16, "out", out_shape)}) &&
         (f32_out ? blas_operand_ok(p.out_f32) : blas_operand_ok(p.out_bf16)) &&
         detail::gemv_gated_rms_norm_fits(p);
}

cudaError_t gated_rms_norm_linear_bf16(const gated_rms_norm_linear_bf16_params& p,
                                       cudaStream_t stream) {
  if (!gated_rms_norm_linear_bf16_fits(p))
    return cudaErrorInvalidValue;
  if (p.weight.shape[0] == 0)
    return cudaSuccess;
  return detail::launch_gemv_gated_rms_norm_bf16(p, stream);
}

bool activation_linear_bf16_fits(const activation_linear_bf16_params& p) {
  const bool f32_out = static_cast<bool>(p.out_f32);
  if (f32_out == static_cast<bool>(p.out_bf16) || (p.accumulate && !f32_out))
    return false;
  const std::int64_t k = p.weight.shape[1];
  const std::array<std::int64_t, 2> out_shape{1, p.weight.shape[0]};
  return detail::all_ok(
             {check_view(p.x, "x", {1, k}),
              check_view(p.up, "up", p.up ? std::array<std::int64_t, 2>{1, k} : p.up.shape),
              check_view(p.weight, "weight", {any_extent, any_extent}),
              check_view(p.bias, "bias", p.bias ? std::array{p.weight.shape[0]} : p.bias.shape),
              f32_out ? check_view(p.out_f32, "out", out_shape)
                      : check_view(p.out_bf16, "out", out_shape)}) &&
         (f32_out ? blas_operand_ok(p.out_f32) : blas_operand_ok(p.out_bf16)) &&
         detail::gemv_activation_fits(p);
}

cudaError_t activation_linear_bf16(const activation_linear_bf16_params& p, cudaStream_t stream) {
  if (!activation_linear_bf16_fits(p))
    return cudaErrorInvalidValue;
  if (p.weight.shape[0] == 0)
    return cudaSuccess;
  return detail::launch_gemv_activation_bf16(p, stream);
}

}  // namespace mstar::kernels::cuda
