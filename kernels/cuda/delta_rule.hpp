#pragma once

// Device versions of kernels/delta_rule.hpp and `kernels::mrope`: Qwen3.5's
// gated delta rule over the recurrent pool's state blocks, its head-gated
// RMS norm, gated attention's output gate and the partial interleaved
// M-RoPE. Same params structs, every pointer and span a device address (the
// launchers read only span sizes and scalar fields on the host). Each
// launcher enqueues on `stream`, allocates nothing and returns the launch
// error; a shape it does not take returns cudaErrorInvalidValue first.

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/delta_rule.hpp"
#include "kernels/math.hpp"

namespace mstar::kernels::cuda {

/// The gated delta rule over a packed batch, sequential in time: one block
/// per (row, value head, slice of value rows); each thread keeps 16 key
/// columns of one value row of the head's [V][K] state in registers, so a
/// decode row (one token) reads and writes its slot's state once, and a
/// prefill row scans its tokens with the next token's inputs prefetched.
/// The q / k L2 norms and the decay and beta are computed in the kernel:
/// per token one shuffle reduction of five partial sums (S k, S q, k q,
/// k k, q q) over the lanes of a value row. K a multiple of 4 up to 256;
/// V, HV up to 65535, R up to 65535; state 16-byte aligned, qkv_stride a
/// multiple of 4. Rows sharing a slot race (the pool's sink).
[[nodiscard]] cudaError_t gated_delta_rule_varlen(const gated_delta_rule_params& p,
                                                  cudaStream_t stream);

/// Launch shapes of the decode kernel (kernels/cuda/delta_rule.cu's table).
inline constexpr int gated_delta_decode_variants = 33;

/// `gated_delta_rule_varlen` with decode steps (`p.decode`) launched in shape
/// `variant` (0 .. gated_delta_decode_variants - 1; -1: the choice by row
/// count, as `gated_delta_rule_varlen`) whatever K: for the tests, which
/// run every shape, and mstar-gpu-bench's sweep. Same results in every
/// shape; an index outside the table returns cudaErrorInvalidValue.
[[nodiscard]] cudaError_t gated_delta_rule_decode_variant(const gated_delta_rule_params& p,
                                                          int variant, cudaStream_t stream);

/// Scratch of the chunked prefill path and its row-length threshold.
struct gated_delta_workspace {
  void* data = nullptr;           ///< device memory, 256-byte aligned
  std::size_t bytes = 0;          ///< `gated_delta_rule_workspace_bytes` or more
  std::int64_t tokens = 0;        ///< T of the batch (cu_seqlens' last entry), known on the host
  std::int32_t chunked_from = 0;  ///< rows at least this long run chunked; 0: the default
};

/// Rows this long or longer run chunked when the workspace does not say
/// (measured on the H200: bench/results/h200-delta-rule.md).
inline constexpr std::int32_t gated_delta_default_chunked_from = 256;

/// Workspace the chunked path needs for a batch of `tokens` tokens in
/// `rows` rows (0 when the shape has no chunked path: then the overload
/// below is the sequential scan).
[[nodiscard]] std::size_t gated_delta_rule_workspace_bytes(const gated_delta_weights& w,
                                                           std::int64_t tokens, std::int64_t rows,
                                                           std::int32_t chunked_from = 0);

/// The gated delta rule with long rows in chunks of 64 tokens on tensor
/// cores (TF32 products, f32 accumulation; the chunked form of
/// flash-linear-attention's `chunk_gated_delta_rule`): per chunk the WY form
/// (I + strictly-lower(diag(beta) K K^T * decay ratios))^-1 gives W and U,
/// then one kernel carries the state from chunk to chunk (storing each
/// chunk's starting state in the workspace) and another makes every chunk's
/// outputs from those states at once. Rows shorter than `ws.chunked_from`,
/// decode steps (`p.decode`), shapes without a chunked path (K other than
/// 64 / 128, V not a multiple of 32 or above K), a workspace too small and an
/// `out` not 8-byte aligned run the sequential scan above. The chunked rows'
/// error is TF32's, not f32's: a few 1e-4 of the largest value on the H200, flat in row length
/// (kernels/cuda/README.md).
[[nodiscard]] cudaError_t gated_delta_rule_varlen(const gated_delta_rule_params& p,
                                                  const gated_delta_workspace& ws,
                                                  cudaStream_t stream);

/// The head-gated RMS norm, one warp per (token, head); D up to 1024.
[[nodiscard]] cudaError_t head_gated_rms_norm(const head_gated_rms_norm_params& p,
                                              cudaStream_t stream);

/// x * sigmoid(gate), elementwise, into f32 and / or bf16.
[[nodiscard]] cudaError_t output_gate(const output_gate_params& p, cudaStream_t stream);

/// M-RoPE in place, one thread per (token, pair) over every head; angles
/// and their cos / sin in f64 as on the CPU. Positions are not checked.
[[nodiscard]] cudaError_t mrope(const mrope_params& p, cudaStream_t stream);

}  // namespace mstar::kernels::cuda
