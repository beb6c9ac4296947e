#pragma once

// Device versions of kernels/attention.hpp: the same params structs, with the
// arena, q, k, v, out and every span of the page table in device memory (the
// launchers read only the spans' sizes on the host). Each launcher enqueues on
// `stream`, allocates nothing and returns the launch error; an arena dtype
// other than float32 / bfloat16, or a head_dim the kernels cannot take, is
// cudaErrorInvalidValue.

#include <cuda_runtime_api.h>

#include "kernels/attention.hpp"

namespace mstar::kernels::cuda {

/// Writes every new token's K and V of `p.layer` into its page slot, rounding
/// to bf16 exactly as the CPU does (the arenas compare byte for byte). With
/// the decode arrays present one block per row; otherwise a grid sized from
/// the host-known bound `kv_indices.size() * page_size` strides over the
/// step's tokens, each finding its row by binary search in `qo_indptr`.
[[nodiscard]] cudaError_t append_kv(const append_kv_params& p, cudaStream_t stream);

/// Causal grouped-query attention over pages, as the CPU reference. One block
/// of 128 threads per (query token, kv head, group of up to four query heads
/// of that kv head), each K/V vector read once for the group, online softmax
/// in f32 (exp2 with the scale folded into q). head_dim 64, 128 or 256 take
/// 16-byte vector loads; any other head_dim up to 256 runs a plain one-warp-
/// per-query-head kernel. Precondition: as append_kv's; rows with no page do
/// no work.
[[nodiscard]] cudaError_t paged_attention(const paged_attention_params& p, cudaStream_t stream);

}  // namespace mstar::kernels::cuda
