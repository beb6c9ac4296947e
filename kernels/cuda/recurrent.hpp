#pragma once

// Device versions of kernels/conv.hpp and kernels/ssd.hpp: the same params
// structs, every pointer and span a device address (the launchers read only
// span sizes and the scalar fields on the host). Each launcher enqueues on
// `stream`, allocates nothing and returns the launch error.
//
// One difference from the CPU: rows run in parallel, so rows that share a slot
// (the pool's sink, which padding rows address) race; their outputs and the
// slot's contents are unspecified. Rows on distinct slots match the CPU.

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/conv.hpp"
#include "kernels/ssd.hpp"

namespace mstar::kernels::cuda {

/// The causal conv over a packed batch. Outputs need no recurrence (each is
/// a window of inputs). Widths 2..4 run one persistent kernel whose lanes
/// each take 16 tokens of one row x 4 channels (16-byte accesses when C and
/// x_stride are multiples of 4 and every array is 16-byte aligned, else 1
/// channel), inputs loaded once, the row's first chunk also writing its
/// final state (internal/conv_fast.cuh). Widths 5..64 run a thread per
/// (token, channel) and a second launch for the state. Otherwise
/// cudaErrorInvalidValue.
[[nodiscard]] cudaError_t causal_conv_varlen(const causal_conv_varlen_params& p,
                                             cudaStream_t stream);

/// One decode step: widths 2..4 a thread per (row, 4 channels) (1 channel
/// when unaligned, as above), grid (channel groups, rows), every load issued
/// before the slot's window is needed; wider ones a thread per (row,
/// channel). The window is shifted in place.
[[nodiscard]] cudaError_t causal_conv_update(const causal_conv_update_params& p,
                                             cudaStream_t stream);

/// The SSD scan, sequential in time, one block per (row, head) holding the
/// head's [P][N] state in registers (next token's inputs prefetched).
/// Requires state_size a multiple of 4, a 16-byte aligned state block, and
/// P * N / 16 <= 1024 (cudaErrorInvalidValue otherwise).
[[nodiscard]] cudaError_t ssd_scan_varlen(const ssd_scan_varlen_params& p, cudaStream_t stream);

/// Scratch of the chunked SSD prefill path and its row-length threshold.
struct ssd_workspace {
  void* data = nullptr;           ///< device memory, 256-byte aligned
  std::size_t bytes = 0;          ///< `ssd_scan_workspace_bytes` or more
  std::int64_t tokens = 0;        ///< T of the batch (cu_seqlens' last entry), known on the host
  std::int32_t chunked_from = 0;  ///< rows at least this long run chunked; 0: the default
};

/// Rows this long or longer run chunked when the workspace does not say.
/// H200, 64 heads of 64, N 128, us (session 35, third call; `mstar-gpu-bench
/// --suite ssd --prefill-rows 1 8 64 256 --prefill-context L`, sequential /
/// every row chunked): 1 x 16 16.6 / 31.0, 1 x 32 31.4 / 31.5, 1 x 64 60.8 /
/// 32.8, 8 x 32 122.6 / 67.1, 64 x 32 1017.8 / 472.4 (a batch of 32-token
/// prompts), 64 x 16 536.9 / 455.8; 128 heads alike. From 32 tokens a row
/// the chunks are never slower; at 16 a lone row is twice as fast scanned.
inline constexpr std::int32_t ssd_default_chunked_from = 32;

/// Workspace the chunked path needs for a batch of `tokens` tokens in `rows`
/// rows (0 when the shape has no chunked path: then the overload below is
/// the sequential scan).
[[nodiscard]] std::size_t ssd_scan_workspace_bytes(const ssd_weights& w, std::int64_t tokens,
                                                   std::int64_t rows,
                                                   std::int32_t chunked_from = 0);

/// The SSD scan with long rows in chunks of 128 tokens on TF32 tensor cores
/// (f32 accumulation; the chunked form of mamba-ssm's
/// `mamba_chunk_scan_combined`, same steps). A parallel kernel per (chunk,
/// group) writes C B^T (B and C are per group); one per (chunk, head) the
/// chunk's own end state from zero, sum_t exp(G_C - G_t) dt_t x_t B_t^T,
/// and its decay exp(G_C); a walk per (row, head), elementwise on the
/// [P][N] state, passes the state through the row's chunks
/// (h = exp(G_C) h + own), leaving each chunk's start state in the
/// workspace and the last in the slot; a parallel kernel per (chunk, head)
/// then writes every output, exp(G_t) C_t h_start + (the group's C B^T
/// masked and scaled by the decay ratios and dt) x + D x. Rows shorter than
/// `ws.chunked_from`, shapes without a chunked path (N other than 64 / 128,
/// P not a multiple of 32), a workspace too small and a y not 8-byte
/// aligned run the sequential scan above. The chunked rows' error is
/// TF32's, not f32's. The workspace holds a [P][N] f32 state per (chunk,
/// head) and a [128][128] f32 C B^T per (chunk, group): about
/// T / 128 * (H * P * N + G * 128 * 128) * 4 bytes.
[[nodiscard]] cudaError_t ssd_scan_varlen(const ssd_scan_varlen_params& p, const ssd_workspace& ws,
                                          cudaStream_t stream);

/// One SSD decode step per row: reads and writes each slot's state once
/// with 16-byte accesses, in one of a table of launch shapes
/// (kernels/cuda/ssd_update.cu): entry 0 a block per (row, head), the
/// others a warp (or half a warp) per state row [n] of a (head, p), several
/// rows a thread, for N 64 / 128 and P a multiple of their rows a block
/// (entry 0 otherwise). Entry 8 (half a warp a row, 4 rows a thread)
/// unless `MSTAR_SSD_UPDATE_VARIANT` names another (read once a process). Same requirements as
/// `ssd_scan_varlen`.
[[nodiscard]] cudaError_t ssd_update(const ssd_update_params& p, cudaStream_t stream);

/// Mamba-2's gated RMS norm of a decode step's output, folded into the SSD
/// update (`ssd_update_gated_norm`): out_bf16[b][c] = bf16(y * silu(gate)
/// normed over groups of `group` channels c = h * P + p, times weight), the
/// bits of gated_rms_norm's warp form (kernels/cuda/math.hpp) and of
/// gated_rms_norm_linear_bf16's input, so out_proj then reads it as a plain
/// bf16 row. y is still written (f32) as `ssd_update` writes it.
struct ssd_gated_norm_fold {
  const float* gate = nullptr;    ///< [B][gate_stride] f32: gate[b][c], rows 16-byte aligned
  std::int64_t gate_stride = 0;   ///< a multiple of 4, at least H * P
  const float* weight = nullptr;  ///< [H * P] f32, 16-byte aligned
  float eps = 0.0F;
  std::int64_t group = 0;             ///< channels a group: 128, 256, 512 or 1024, whole heads
  std::uint16_t* out_bf16 = nullptr;  ///< [B][H * P] bf16, dense, 8-byte aligned
};

/// Whether `ssd_update_gated_norm` takes `p` and `f`: sm_90 clusters built,
/// ssd_update's default shape (entry 8, MSTAR_SSD_UPDATE_VARIANT unset or
/// 8; N 64 or 128) with P a multiple of 4 up to 128 and 1, 2, 4 or 8 of
/// its blocks' rows, a group of 1 to 8 whole heads dividing H * P, y
/// 16-byte aligned, and `f` as documented there.
[[nodiscard]] bool ssd_update_gated_norm_fits(const ssd_update_params& p,
                                              const ssd_gated_norm_fold& f);

/// `ssd_update`, then the gated norm of its output (ssd_gated_norm_fold) in
/// the same launch: a block a (head, row) doing what entry 8's blocks of
/// that head do (the same y and state bits), the heads of a norm group one
/// thread-block cluster, whose blocks meet in distributed shared memory
/// for the group's sum of squares. One kernel where the unfolded step takes
/// the update and a gated_rms_norm launch (or a gated GEMV prologue that
/// norms the row again in every block). cudaErrorInvalidValue where not
/// ssd_update_gated_norm_fits.
[[nodiscard]] cudaError_t ssd_update_gated_norm(const ssd_update_params& p,
                                                const ssd_gated_norm_fold& f, cudaStream_t stream);

/// Launch shapes of `ssd_update` (kernels/cuda/ssd_update.cu's table).
inline constexpr int ssd_update_variants = 13;

/// `ssd_update` launched in shape `variant` (0 .. ssd_update_variants - 1;
/// -1: the one `ssd_update` takes): for the tests, which run every shape,
/// and mstar-gpu-bench's sweep. Same results in every shape; an index
/// outside the table returns cudaErrorInvalidValue.
[[nodiscard]] cudaError_t ssd_update_variant(const ssd_update_params& p, int variant,
                                             cudaStream_t stream);

}  // namespace mstar::kernels::cuda
