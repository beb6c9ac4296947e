#pragma once

// The few-row bf16 product behind linear_bf16, rms_norm_linear_bf16,
// gated_rms_norm_linear_bf16 and activation_linear_bf16 (kernels/cuda/gemv.cu).

#include <cuda_runtime_api.h>

#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda::detail {

/// Rows of input up to which linear_bf16 takes the GEMV kernel.
inline constexpr int gemv_max_rows = 1;

/// Whether the GEMV kernel takes `p` (already checked by linear_bf16): at most
/// `gemv_max_rows` rows, K a multiple of 8, unit column strides, row strides
/// and the x / weight addresses on 16-byte boundaries.
[[nodiscard]] bool gemv_bf16_fits(const linear_bf16_params& p);

/// Enqueues the GEMV for `p` (gemv_bf16_fits(p) holds), bias added in the
/// kernel; returns the launch error.
[[nodiscard]] cudaError_t launch_gemv_bf16(const linear_bf16_params& p, cudaStream_t stream);

/// The widest row the norm forms norm into shared memory (2 bytes a
/// column; the default 48 KiB a block holds 24,576).
inline constexpr int gemv_norm_max_k = static_cast<int>(rms_norm_linear_max_k);

/// Whether the RMS-norm form takes `p`'s weight (shapes otherwise checked
/// by rms_norm_linear_bf16): K a multiple of 8 up to gemv_norm_max_k, unit
/// column stride, row stride and address on 16-byte boundaries.
[[nodiscard]] bool gemv_rms_norm_fits(const rms_norm_linear_bf16_params& p);

/// Enqueues the RMS-norm form for `p` (gemv_rms_norm_fits(p) holds).
[[nodiscard]] cudaError_t launch_gemv_rms_norm_bf16(const rms_norm_linear_bf16_params& p,
                                                    cudaStream_t stream);

/// Whether the gated form takes `p` (shapes otherwise checked by
/// gated_rms_norm_linear_bf16): the weight as gemv_rms_norm_fits wants it,
/// and what gated_rms_norm's warp form wants (math.cu), so the product's
/// input is that form's output: a group of 128, 256, 512 or 1024 channels
/// dividing K, x / gate rows of unit column stride, row strides a multiple
/// of 4 and addresses on 16-byte boundaries, norm weight likewise.
[[nodiscard]] bool gemv_gated_rms_norm_fits(const gated_rms_norm_linear_bf16_params& p);

/// Enqueues the gated form for `p` (gemv_gated_rms_norm_fits(p) holds).
[[nodiscard]] cudaError_t launch_gemv_gated_rms_norm_bf16(
    const gated_rms_norm_linear_bf16_params& p, cudaStream_t stream);

/// Whether the activation form takes `p` (shapes otherwise checked by
/// activation_linear_bf16): the weight as gemv_rms_norm_fits wants it, and
/// what activate's quad form wants (fused.cu), so the product's input is
/// that form's output: x / up rows of unit column stride on 16-byte
/// boundaries; `up` only with a function.
[[nodiscard]] bool gemv_activation_fits(const activation_linear_bf16_params& p);

/// Enqueues the activation form for `p` (gemv_activation_fits(p) holds).
[[nodiscard]] cudaError_t launch_gemv_activation_bf16(const activation_linear_bf16_params& p,
                                                      cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail
