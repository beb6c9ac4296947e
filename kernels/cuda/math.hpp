#pragma once

// Device versions of kernels/math.hpp: the same params structs, every view a
// device address. Each launcher checks the shapes on the host (the CPU
// reference's rules; a violation returns cudaErrorInvalidValue and launches
// nothing), enqueues on `stream`, allocates nothing and returns the launch
// error. Checks that need the data (ids, positions) are not made: see each.

#include <cstdint>
#include <cuda_runtime_api.h>
#include <optional>

#include "kernels/attention.hpp"
#include "kernels/conv.hpp"
#include "kernels/cuda/gemv_shape.hpp"
#include "kernels/cuda/runtime.hpp"
#include "kernels/math.hpp"

namespace mstar::kernels::cuda {

/// `out[t] = table[ids[t]]`. An id outside `[0, V)` is not reported (that
/// would need a device-to-host read): its row comes out all NaN instead.
[[nodiscard]] cudaError_t embedding(const embedding_params& p, cudaStream_t stream);

/// Row-wise RMS norm, one block per row; the sum of squares is taken in f32.
[[nodiscard]] cudaError_t rms_norm(const rms_norm_params& p, cudaStream_t stream);

/// `residual += delta`, then its RMS norm into an f32 and/or bf16 output, in
/// one kernel (fused.cu): one block per row, the sum of squares taken as
/// `rms_norm` takes it, so the f32 output equals `add` then `rms_norm` bit
/// for bit and the bf16 output is that value rounded as `to_bf16` rounds.
/// The form is `MSTAR_ADD_NORM_VARIANT`'s (`add_rms_norm_variant`).
[[nodiscard]] cudaError_t add_rms_norm(const add_rms_norm_params& p, cudaStream_t stream);

/// Forms of `add_rms_norm` (fused.cu), all the same bits: 1 the block-a-row
/// kernel; 2 (the default) it with the thread's weight columns loaded once,
/// before the chained wait (rows of up to 16 columns a thread, the rest run
/// 1); 3 and 4 that with each row split over a cluster of two 128-thread
/// (four 64-thread) blocks, thread for thread the 256 threads of form 1, the
/// eight warps' sums exchanged through distributed shared memory and added
/// in form 1's order (rows of up to 16 columns a thread, the rest run 1).
/// Entry 0 is unused.
inline constexpr int add_rms_norm_variants = 5;

/// `add_rms_norm` in form `variant` (1 .. add_rms_norm_variants - 1; -1:
/// the one `add_rms_norm` takes, `MSTAR_ADD_NORM_VARIANT`: `v1` form 1,
/// unset or `v2` form 2, `v3` / `v4` that form; read once): for the tests and
/// mstar-gpu-bench's `--suite small`. Another index returns
/// cudaErrorInvalidValue. Forms 2-4 read `weight` before the chained wait,
/// so it must be no kernel's output on the stream (`chained_launches`).
[[nodiscard]] cudaError_t add_rms_norm_variant(const add_rms_norm_params& p, int variant,
                                               cudaStream_t stream);

/// Mamba-2's gated RMS norm, one block per (row, group), or a warp per
/// (row, group) where the group is 128, 256, 512 or 1024 channels and the
/// rows are whole float4s (the warp form; only the order of the squares' sum
/// differs); the bf16 output is the f32 value rounded as `to_bf16` rounds.
/// The form is `MSTAR_GATED_NORM_WARP`'s (`gated_rms_norm_variant`).
[[nodiscard]] cudaError_t gated_rms_norm(const gated_rms_norm_params& p, cudaStream_t stream);

/// Forms of `gated_rms_norm` (math.cu): 0 the block kernel; 1 the warp
/// kernel in blocks of 8 warps; 2 (the default) the loaded-warp kernel (all
/// of a warp's x and gate loads in flight before the first product, its
/// weight loaded before the chained wait), in blocks of as many warps (up to
/// 8) as leave a block for every SM; 3, 4, 5, 6 that kernel in blocks of 1,
/// 2, 4, 8 warps. Entries 1-6 give the same bits; shapes the warp forms do
/// not take run entry 0.
inline constexpr int gated_rms_norm_variants = 7;

/// `gated_rms_norm` in form `variant` (0 .. gated_rms_norm_variants - 1;
/// -1: the one `gated_rms_norm` takes, `MSTAR_GATED_NORM_WARP`: `v1`
/// entry 1, unset or `v2` entry 2, a single digit that entry; read once): for
/// the tests and mstar-gpu-bench's `--suite small`. An index outside the
/// table returns cudaErrorInvalidValue. Forms 2-6 read `weight` before the
/// chained wait, so it must be no kernel's output on the stream
/// (`chained_launches`), as a model's norm weights are not.
[[nodiscard]] cudaError_t gated_rms_norm_variant(const gated_rms_norm_params& p, int variant,
                                                 cudaStream_t stream);

/// Whether `gated_rms_norm` takes a warp form where the shapes allow it
/// (`MSTAR_GATED_NORM_WARP=0`: never, for A/B runs; read once). The gated
/// GEMV (`gated_rms_norm_linear_bf16`) equals `gated_rms_norm` then
/// `linear_bf16` only where it does.
[[nodiscard]] bool gated_rms_norm_warp_form();

/// Whether the decode step's kernels launch chained (programmatic
/// dependent launch on sm_90 and later: the next kernel's blocks start, and
/// a GEMV streams its first weights, while the one before drains;
/// internal/common.cuh says what a chained kernel owes). Bit for bit the
/// same results either way. Before the wait a chained kernel reads only
/// what its params call weights (the causal conv's taps and bias, the SSD
/// update's dt_bias / A_log / D, a GEMV's weight where `weight_static`, the
/// norms' weights in `gated_rms_norm_variant` / `add_rms_norm_variant`'s
/// later forms):
/// those must be no kernel's output on the stream, as a model's weights are
/// not. `MSTAR_PDL=0` turns it off (A/B runs; read at
/// the first launch); `set_chained_launches` overrides it for the launches
/// after (tests). A CUDA graph keeps what its capture saw.
[[nodiscard]] bool chained_launches();
void set_chained_launches(bool on);

/// Whether an accumulating one-row GEMV (the batch-1 products that add onto
/// the residual stream) loads the residual right after its chained wait,
/// under its prologue and dots, rather than after its sums: one L2 round
/// trip fewer at the kernel's end, the same bits. `MSTAR_GEMV_RESIDUAL_EARLY=1`
/// turns it on (off by default until measured; read at the first launch);
/// `gemv_residual_early` overrides it for the launches after (tests). A CUDA
/// graph keeps what its capture saw.
[[nodiscard]] bool gemv_residual_early();
void set_gemv_residual_early(bool on);

/// Whether every chained one-row GEMV releases the kernel after it only
/// once past its own wait: `MSTAR_GEMV_CHAIN` `late` or `last`, or
/// `set_gemv_chain_late`. The default, `wave`, releases a GEMV whose grid
/// is one wave at its start. An early read that counts on the kernels two
/// back being done (the SSD update's, Nemotron-H's `MSTAR_SSD_EARLY`) is
/// settled only where this holds.
[[nodiscard]] bool gemv_releases_after_wait();
/// Forces `late` for the launches after (tests); false: back to
/// `MSTAR_GEMV_CHAIN`'s mode. A CUDA graph keeps what its capture saw.
void set_gemv_chain_late(bool on);

/// `out = x * sigmoid(x)`.
[[nodiscard]] cudaError_t silu(const unary_params& p, cudaStream_t stream);

/// `out = max(x, 0)^2`.
[[nodiscard]] cudaError_t relu2(const unary_params& p, cudaStream_t stream);

/// `silu` or `relu2` into an f32 and/or bf16 output (fused.cu): the f32
/// values equal `silu` / `relu2`'s bit for bit, the bf16 ones are them
/// rounded as `to_bf16` rounds.
[[nodiscard]] cudaError_t activate(const activation_params& p, cudaStream_t stream);

/// `out = a + b` (b may broadcast through zero strides).
[[nodiscard]] cudaError_t add(const binary_params& p, cudaStream_t stream);

/// `out = a * b`.
[[nodiscard]] cudaError_t mul(const binary_params& p, cudaStream_t stream);

/// Row-wise softmax, one block per row; a row with no finite entry comes out
/// all zeros.
[[nodiscard]] cudaError_t softmax(const softmax_params& p, cudaStream_t stream);

/// Rotary embedding in place; angles and their cos/sin in f64 as on the CPU.
/// Negative positions are not reported (they rotate backwards).
[[nodiscard]] cudaError_t rope(const rope_params& p, cudaStream_t stream);

/// `out = x * weight^T (+ bias)` in f32 through `cublasSgemm` (no TF32: the
/// handle keeps cuBLAS's default math mode). As on the CPU, a bias fills
/// `out` first and the GEMM accumulates onto it; without one the GEMM writes
/// `out` directly (beta 0, one launch). `blas` is used by one host thread at
/// a time; its stream is set to `stream`. Capturable in a CUDA graph.
[[nodiscard]] cudaError_t linear(const blas_handle& blas, const linear_params& p,
                                 cudaStream_t stream);

/// Operands of `linear_bf16`: bfloat16 activations and weights (raw bits),
/// f32 accumulation, f32 or bf16 output.
struct linear_bf16_params {
  view<const std::uint16_t, 2> x;       ///< [T, K] bf16, unit stride along K
  view<const std::uint16_t, 2> weight;  ///< [N, K] bf16 (nn.Linear's layout), unit stride along K
  view<const float, 1> bias{};          ///< [N] f32; absent: no bias
  /// [T, N] f32, unit stride along N; exactly one of out_f32 / out_bf16.
  view<float, 2> out_f32{};
  view<std::uint16_t, 2> out_bf16{};  ///< [T, N] bf16, unit stride along N
  /// `out_f32 += x * weight^T (+ bias)` (a residual stream taking a
  /// projection): each element is `out + (product + bias)`, what `add` of
  /// the plain product's output would give. f32 output only.
  bool accumulate = false;
  /// The GEMV's launch shape where one row takes it (0 .. gemv_variants - 1;
  /// -1: the default, gemv_variant_for): tests and sweeps.
  int gemv_variant = -1;
  /// `weight` is no kernel's output on this stream (a model's weights,
  /// uploaded at load): a chained GEMV (`chained_launches`) may then read
  /// its first pieces before the kernel before it has finished. False: it
  /// waits for that kernel first, as a plain launch would.
  bool weight_static = false;
};

/// The launch shape (gemv_shape.hpp's table) a one-row bf16 product of N
/// `n` and K `k` takes at `requested` (linear_bf16_params::gemv_variant):
/// `requested` when in the table, else `MSTAR_GEMV_VARIANT` when it names
/// an entry, else a split entry where the product is narrow for the current
/// device (gemv_narrow; `MSTAR_GEMV_SPLIT=0` turns that off, a split
/// entry's number picks it), else entry 5. Every GEMV form asks it with its
/// weight's shape, so a fold and the plain GEMV after its separate launch
/// take the same entry.
[[nodiscard]] int gemv_variant_for(int requested, std::int64_t n, std::int64_t k);

/// `out = x * weight^T (+ bias)` through `cublasGemmEx` (bf16 inputs, f32
/// compute). A bias fills `out` first (rounded to bf16 for a bf16 output)
/// and the GEMM accumulates onto it; without one the GEMM writes `out`. One
/// row takes a GEMV kernel instead (gemv.cu; `MSTAR_GEMV=0`: cuBLAS), which
/// with chained launches reads its first weight pieces early only where
/// `weight_static` says it may.
[[nodiscard]] cudaError_t linear_bf16(const blas_handle& blas, const linear_bf16_params& p,
                                      cudaStream_t stream);

/// What the GEMV's norm forms multiply their normed row by and where the
/// product goes: linear_bf16_params' fields of the same names.
struct gemv_product_params {
  view<const std::uint16_t, 2> weight;  ///< [N, K] bf16, unit stride along K, K a multiple of 8
  view<const float, 1> bias{};          ///< [N] f32; absent: no bias
  view<float, 2> out_f32{};             ///< [1, N] f32; exactly one of out_f32 / out_bf16
  view<std::uint16_t, 2> out_bf16{};    ///< [1, N] bf16
  bool accumulate = false;              ///< as linear_bf16_params::accumulate
  int gemv_variant = -1;                ///< as linear_bf16_params::gemv_variant
  bool weight_static = false;           ///< as linear_bf16_params::weight_static
};

/// A causal conv's decode step folded into `rms_norm_linear_bf16`'s output
/// (Mamba-2's in_proj then its conv at one decode row): output features
/// [first, first + w.channels) are also the conv's inputs, so the product
/// is followed by what `causal_conv_update` with those features as its x
/// (batch 1) computes, bit for bit: `out` gets the conv's outputs and the
/// slot's window shifts in place. Widths 2..4, f32 product output, not
/// accumulating.
inline constexpr int conv_step_fold_max_width = 4;
struct conv_step_fold {
  conv_weights w;                              ///< as causal_conv_update_params::w
  std::int64_t first = 0;                      ///< the output feature of channel 0
  float* out = nullptr;                        ///< [1, C] f32; must not alias the product's output
  float* state = nullptr;                      ///< [max_slots][C][W-1] f32, updated in place
  std::span<const std::int32_t> slot_indices;  ///< [>= 1]: the row's slot, or -1 to skip it
  std::span<const std::uint8_t> has_state;     ///< [>= 1] or empty, as causal_conv_update's
};

/// An embedding lookup folded into `rms_norm_linear_bf16`'s input (a batch-1
/// decode step's first layer): the row normed is `table[ids[0]]`, not `x`
/// (x keeps only its shape), and the kernel also writes it to `out` (the
/// residual stream), as `embedding` would: an id outside [0, V) gives a row
/// of NaN. `out` must not overlap the product's output.
struct embedding_fold {
  view<const std::int32_t, 1> ids;  ///< [>= 1] int32: the row's token
  view<const float, 2> table;       ///< [V, K] f32, rows contiguous
  float* out = nullptr;             ///< [1, K] f32: the looked-up row
};

/// A paged KV append folded into `rms_norm_linear_bf16`'s output (a batch-1
/// decode step's fused [q | k | v] product): output features [first, first
/// + E) are the token's K and [first + E, first + 2 E) its V (E = the
/// arena's kv heads x head_dim, head after head), and the kernel also stores
/// them where `append_kv` would, rounded as it rounds: at the decode table's
/// page and offset of its one row. f32 output, not accumulating, a decode
/// table (`is_decode`) of one row, the features inside the output.
struct kv_append_fold {
  kv_arena_view arena;     ///< written at the token's slot
  std::int32_t layer = 0;  ///< which layer of each page
  kv_page_table table;     ///< the step's addressing: one row, decode arrays present
  std::int64_t first = 0;  ///< the output feature of K's first element
};

/// Where the argmax fold's blocks meet (`argmax_fold`): 16 bytes of device
/// memory, all zero before the first launch that uses them; every launch
/// leaves them zero again (its last block resets them), so a captured graph
/// replays with no memset. Launches that share one must not overlap (one
/// stream).
struct argmax_fold_state {
  unsigned long long key;  ///< the largest candidate key so far
  unsigned int done;       ///< blocks finished
  unsigned int unused;
};

/// The greedy draw of the product's f32 output row folded into
/// `rms_norm_linear_bf16` (a batch-1 greedy step's LM head): `out[0]` gets
/// what `argmax` of that row writes, the largest entry's lowest id, or -1
/// where an entry is NaN or +inf or none is finite. No argmax launch after
/// it.
struct argmax_fold {
  std::int32_t* out = nullptr;         ///< [1] int32: the draw
  argmax_fold_state* state = nullptr;  ///< the blocks' meeting place (above)
};

/// Operands of `rms_norm_linear_bf16`: one f32 row, its RMS norm rounded to
/// bf16 as the product's input.
struct rms_norm_linear_bf16_params : gemv_product_params {
  view<const float, 2> x;               ///< [1, K] f32 (a residual stream row)
  view<const float, 1> norm_weight;     ///< [K] f32
  float eps = 1e-6F;                    ///< added to the mean square before the root
  std::optional<conv_step_fold> conv;   ///< a conv step on part of the output (above)
  std::optional<embedding_fold> embed;  ///< the row looked up, not read from x (above)
  /// The output activated (an MLP's up projection feeding its down one): each
  /// bf16 output is `fn(product + bias)` in f32, rounded as `activate`'s bf16
  /// output is, so it equals the f32 product then `activate` bit for bit.
  /// bf16 output only, not accumulating, neither `conv` nor `embed`.
  std::optional<activation> out_activation;
  /// The output row's argmax too (above): f32 output, not accumulating, no
  /// other fold beside it.
  std::optional<argmax_fold> argmax;
  /// The K and V part of the output appended to the paged KV arena too
  /// (above); no other fold beside it.
  std::optional<kv_append_fold> append;
};

/// `add_rms_norm` (no delta) into a bf16 row, then `linear_bf16` of it, in one
/// kernel (gemv.cu: every block norms the row into shared memory while its
/// first weight pieces load): the output equals the two launches' bit for
/// bit (the sum of squares is taken over the same 256-thread layout). A
/// batch-1 decode step's norm and the projection after it. One row only, K
/// a multiple of 8 up to `rms_norm_linear_max_k`; other shapes return
/// cudaErrorInvalidValue. With `conv`, the same kernel also runs the conv
/// step on its outputs (`conv_step_fold`), with `embed` it looks its row up
/// itself (`embedding_fold`): no conv launch after it, no embedding launch
/// before it; with `argmax` it draws the row's greedy token (`argmax_fold`),
/// with `append` it stores the token's K and V in their page
/// (`kv_append_fold`): no argmax or append_kv launch after it.
/// A fold that does not fit returns cudaErrorInvalidValue too.
inline constexpr std::int64_t rms_norm_linear_max_k = 16384;
[[nodiscard]] cudaError_t rms_norm_linear_bf16(const rms_norm_linear_bf16_params& p,
                                               cudaStream_t stream);

/// Whether `rms_norm_linear_bf16` takes `p`: every check it makes before a
/// launch (shapes, strides, alignment, each fold's rules), on the host
/// alone, with no device needed (pointers are compared, never read).
[[nodiscard]] bool rms_norm_linear_bf16_fits(const rms_norm_linear_bf16_params& p);

/// Operands of `gated_rms_norm_linear_bf16`: Mamba-2's gated RMS norm of one
/// f32 row (`gated_rms_norm`'s), rounded to bf16, as the product's input
/// (the weight's rows on 16-byte boundaries).
struct gated_rms_norm_linear_bf16_params : gemv_product_params {
  view<const float, 2> x;  ///< [1, K] f32 (the scan's y), unit stride along K
  /// [1, K] f32 (z: may be a strided view into the in_proj output), unit
  /// stride along K; absent: no gate.
  view<const float, 2> gate{};
  view<const float, 1> norm_weight;  ///< [K] f32, unit stride
  std::int64_t group_size = 0;       ///< channels a norm group spans; 0: all K
  float eps = 1e-6F;                 ///< added to each group's mean square
};

/// `gated_rms_norm` into a bf16 row, then `linear_bf16` of it, in one kernel
/// (gemv.cu: each block's warps norm the row's groups into shared memory
/// with the warp form's own code while the first weight pieces load): the
/// output equals the two launches' bit for bit where `gated_rms_norm` takes
/// its warp form. A batch-1 decode step's Mamba-2 out_proj. Only shapes
/// that form takes (a group of 128, 256, 512 or 1024 channels dividing K,
/// x / gate / norm weight / weight rows on 16-byte boundaries, K up to
/// `rms_norm_linear_max_k`); others return cudaErrorInvalidValue.
[[nodiscard]] cudaError_t gated_rms_norm_linear_bf16(const gated_rms_norm_linear_bf16_params& p,
                                                     cudaStream_t stream);

/// Whether `gated_rms_norm_linear_bf16` takes `p` (checks only, launches
/// nothing): callers choosing between it and the two launches.
[[nodiscard]] bool gated_rms_norm_linear_bf16_fits(const gated_rms_norm_linear_bf16_params& p);

/// Operands of `activation_linear_bf16`: one f32 row, activated as
/// `activate` activates it (or as it is), rounded to bf16 as the product's
/// input.
struct activation_linear_bf16_params : gemv_product_params {
  view<const float, 2> x;  ///< [1, K] f32, unit stride along K, on a 16-byte boundary
  /// The function `activate` applies; absent: none (the input is `to_bf16`
  /// of x, what `linear` of an f32 row with bf16 weights reads).
  std::optional<activation> fn{};
  /// [1, K] f32 like x; present (with `fn` only): the input is `fn(x) * up`,
  /// as `activate` with `up` gives it.
  view<const float, 2> up{};
};

/// `activate` (or `to_bf16`, `fn` absent) into a bf16 row, then
/// `linear_bf16` of it, in one kernel (gemv.cu: every block builds the row
/// in shared memory with activate's own quad code once its first weight
/// pieces are in flight): the output equals the two launches' bit for bit
/// where `linear_bf16` takes its GEMV. A batch-1 decode step's MLP down
/// projection, or a projection of an f32 row (attention's output). One row,
/// K a multiple of 8 up to `rms_norm_linear_max_k`, x / up / weight rows on
/// 16-byte boundaries; other shapes return cudaErrorInvalidValue.
[[nodiscard]] cudaError_t activation_linear_bf16(const activation_linear_bf16_params& p,
                                                 cudaStream_t stream);

/// Whether `activation_linear_bf16` takes `p` (checks only, launches
/// nothing): callers choosing between it and the two launches.
[[nodiscard]] bool activation_linear_bf16_fits(const activation_linear_bf16_params& p);

/// `n` floats to bfloat16 bits, round to nearest even (the CPU arena's rule).
[[nodiscard]] cudaError_t to_bf16(const float* in, std::uint16_t* out, std::int64_t n,
                                  cudaStream_t stream);

/// `n` bfloat16 values to floats (exact).
[[nodiscard]] cudaError_t from_bf16(const std::uint16_t* in, float* out, std::int64_t n,
                                    cudaStream_t stream);

}  // namespace mstar::kernels::cuda
