#pragma once

// The tensor-core prefill paths of paged attention (attention_prefill.cu on
// mma.sync, attention_prefill_wgmma.cu on Hopper's warpgroup MMA), called by
// the one-pass launcher in attention.cu for steps without the decode arrays.

#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/cuda/internal/attend.cuh"

namespace mstar::kernels::cuda::detail {

/// Whether the tensor-core prefill kernel takes step `p`: no decode arrays,
/// a bfloat16 arena, head_dim 64, 128 or 256, and the arena, q and out
/// 16-byte aligned.
bool prefill_takes(const paged_attention_params& p);

/// Launches the tensor-core prefill kernel for `a` (from `p`, which
/// `prefill_takes`); `token_bound` is the host-known bound on the step's
/// tokens (`token_bound(p.table, page_size)`).
cudaError_t launch_prefill(const attn_args& a, int head_dim, std::int64_t token_bound,
                           cudaStream_t stream);

/// Launches the warpgroup-MMA prefill kernel for `a` (from `p`, which
/// `prefill_wgmma_takes`), as launch_prefill; `defer`: three K / V stages
/// with each tile's P V left in flight under the next tile's S
/// (attention_prefill::wgmma), else two stages, every wgmma waited at once
/// (wgmma_serial).
cudaError_t launch_prefill_wgmma(const attn_args& a, int head_dim, bool defer,
                                 std::int64_t token_bound, cudaStream_t stream);

/// Launches the lean-consumer warpgroup-MMA prefill kernel
/// (attention_prefill::wgmma_lean, attention_prefill_wgmma_lean.cu) for `a`
/// (from `p`, which `prefill_wgmma_lean_takes`), as launch_prefill_wgmma.
cudaError_t launch_prefill_wgmma_lean(const attn_args& a, int head_dim, std::int64_t token_bound,
                                      cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail
