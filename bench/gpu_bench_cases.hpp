#pragma once
// mstar-gpu-bench's cases beyond the delta rule and page copies, each timed
// against the device-to-device copy (bench/gpu_bench_support.hpp). The
// shapes of bench/baselines_h200.py, which runs PyTorch's fused attention and
// mamba-ssm's Triton kernels on them under the same case names; and cuBLAS
// GEMMs on the models' projections (the tensor-core reference, also timed
// beside each step by bench/model_gpu_bench.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "bench/gpu_bench_support.hpp"

namespace mstar::bench::gpu {

/// Paged attention geometry: bf16 K/V pages, f32 q and out.
struct attention_case {
  int rows, context, kv_heads, q_heads, head_dim, page_size;
};

/// Decode (one token per row over `context` cached positions): the one-pass
/// kernel ("decode_attention_b<rows>") and the split-KV path with the
/// workspace it asks for ("decode_attention_split_b<rows>"), each with the
/// walk (and merge) it took as extras (`walk`, `merge`: attention_walk /
/// attention_merge values). With `variants`, then every walk forced
/// ("decode_attention_<walk>_b<rows>", walk regs / cp4 / cp2) and, where the
/// step splits, every walk and merge ("decode_attention_split_<walk>_
/// <merge>_b<rows>", merge mwarp / mblock).
std::vector<comparison> bench_decode_attention(timer& t, copy_baseline& copy,
                                               const attention_case& a, int rounds,
                                               bool variants = false);

/// Causal prefill of `rows` fresh prompts of `context` tokens each, every
/// token attending its row's pages ("prefill_attention_<rows>x<context>").
/// Bytes counted: K/V read once, q read and out written; TFLOP_per_s counts
/// the causal half of QK^T and PV (4 * D * Hq * rows * L (L + 1) / 2).
/// The kernel the launch resolves to first (MSTAR_ATTN_PREFILL or the
/// default), then each prefill kernel forced in turn ("..._mma",
/// "..._wgmma", "..._wgmma_serial", "..._wgmma_lean"; those fall back to mma where they
/// do not take the step: the "wgmma" field, 1 or 0, says which ran, and
/// "prefill_kind" the attention_prefill value that ran).
std::vector<comparison> bench_prefill_attention(timer& t, copy_baseline& copy,
                                                const attention_case& a, int rounds);

/// A Nemotron-H Mamba-2 layer's mixer geometry; the conv runs over
/// [x | B | C], heads * head_dim + 2 * groups * state_size channels.
struct mamba_shape {
  std::string label;  ///< in the case names: "h64", "h128"
  int heads, head_dim, state_size, groups, conv_width;
  [[nodiscard]] int conv_channels() const { return heads * head_dim + 2 * groups * state_size; }
};

/// The SSD decode step at `batch` rows on shuffled slots of a pool of
/// `batch` ("<prefix>_b<batch>"). Bytes counted: the state read and written
/// plus the step's inputs and outputs.
comparison bench_ssd_update(timer& t, copy_baseline& copy, const mamba_shape& m, int batch,
                            const std::string& prefix, int rounds);

/// The same step in each of `variants` (kernels/cuda/ssd_update.cu's launch
/// shapes; -1 the one `ssd_update` takes), one after another on the same
/// inputs and state: "ssd_update_<label>_b<batch>" with "update_variant".
std::vector<comparison> bench_ssd_update_variants(timer& t, copy_baseline& copy,
                                                  const mamba_shape& m, int batch,
                                                  const std::vector<int>& variants, int rounds);

/// The SSD scan over `rows` fresh rows of `tokens` tokens, final states
/// stored: the chunked path through the workspace overload
/// ("ssd_scan_<label>_<rows>x<tokens>", with its speedup_vs_sequential),
/// then the sequential scan ("..._sequential"), and for rows shorter than
/// the default threshold every row chunked ("..._chunked"). Bytes counted: inputs read,
/// y written, the final states written.
std::vector<comparison> bench_ssd_scan(timer& t, copy_baseline& copy, const mamba_shape& m,
                                       int rows, int tokens, int rounds);

/// The causal conv (SiLU, bias) over `rows` fresh rows of `tokens` tokens
/// ("conv_prefill_<label>_<rows>x<tokens>"), and its decode step at `rows`
/// rows ("conv_update_<label>_b<rows>", tokens 1). Bytes counted: input read,
/// output written, the window state read (decode) and written.
comparison bench_conv(timer& t, copy_baseline& copy, const mamba_shape& m, int rows, int tokens,
                      int rounds);

/// The mixer's gated RMSNorm over `rows` x `tokens` tokens: y (f32, heads *
/// head_dim channels) times silu(z) (a column slice of the in-projection's
/// output), normalised per group of channels, out bf16
/// ("gated_norm_<label>_<rows>x<tokens>"). Bytes counted: y and z read, the
/// output written.
comparison bench_gated_norm(timer& t, copy_baseline& copy, const mamba_shape& m, int rows,
                            int tokens, int rounds);

/// A projection's GEMM as the models run it: [m, k] bf16 activations times an
/// [n, k] bf16 weight (nn.Linear's layout) into [m, n] bf16, f32 accumulation.
struct gemm_case {
  std::string label;  ///< in the case names: "h2048_in_proj"
  std::int64_t m, n, k;
};

/// cuBLAS's rate on `g` (bench/gpu_bench_gemm.cpp): cublasGemmEx, bf16 in
/// and out, CUBLAS_COMPUTE_32F, default algorithm, random operands; the
/// median of `rounds` event-timed batches after a warm-up call.
struct gemm_timing {
  double us_per_call = 0;
  double flops_per_s = 0;  ///< 2 m n k per call
};
gemm_timing time_gemm(timer& t, const gemm_case& g, int rounds);

/// `--suite gemm`'s case "gemm_<label>_m<m>": bytes (operands read, output
/// written once) per second against the copy, TFLOP_per_s among the extras.
/// `ours`: "linear_bf16_<label>_m<m>", the same product through
/// cuda::linear_bf16 (its GEMV kernel at one row, else the same cuBLAS call).
comparison bench_gemm(timer& t, copy_baseline& copy, const gemm_case& g, int rounds,
                      bool ours = false);

/// Nemotron-H 0.56B's ("h2048_*") and 8B's ("h4096_*") projections (Mamba-2
/// in_proj and out_proj, MLP up and down, LM head), m left 0.
std::vector<gemm_case> nemotron_h_projections();

/// `--suite gemv` (bench/gpu_bench_gemv.cpp): the one-row GEMV on each of
/// nemotron_h_projections(), plain and in the fold the model runs before it
/// (RMS norm, gated norm, relu2), at each of `variants` (gemv_shape.hpp's
/// entries; -1 the default): cases "gemv_<form>_<label>_v<entry or default>",
/// bytes (weight, input row, output) per second against the copy, the entry
/// taken, its split and grid among the extras. `cold_bytes` > 0: the weight
/// rotates through copies that pass it (cases "..._cold"), so every call
/// reads it from HBM as a model's step does (0: the same weight every call,
/// L2-resident where it fits).
std::vector<comparison> bench_gemv_shapes(timer& t, copy_baseline& copy,
                                          const std::vector<int>& variants, int rounds,
                                          std::size_t cold_bytes);

/// `--suite small`'s operand temperatures (bench/gpu_bench_small.cpp): the
/// same operands every call; a rotating set of copies past the L2; the
/// activations the same and the norm weights rotating (a decode step's).
enum class small_temperature { hot, cold, cold_weights };

/// A model's widths for the small kernels: the residual stream (add_rms_norm)
/// and the Mamba-2 mixer's gated norm (y and z, z the first columns of
/// in_proj's rows).
struct small_shape {
  std::string label;            ///< in the case names: "h2048", "h4096"
  std::int64_t hidden;          ///< add_rms_norm's row
  std::int64_t mamba_channels;  ///< heads * head_dim: the gated norm's row
  std::int64_t groups;          ///< n_groups: the gated norm's groups a row
  std::int64_t in_proj_width;   ///< z's row stride
};

/// Nemotron-H 0.56B's ("h2048") and 8B's ("h4096") widths.
std::vector<small_shape> nemotron_h_small_shapes();

/// What `--suite small` runs: forms of each kernel (math.hpp's
/// gated_rms_norm_variant and add_rms_norm_variant tables), rows, and
/// temperatures; `cold_mib` 0: twice the device's L2.
struct small_options {
  std::vector<int> rows{1, 64, 256};
  std::vector<int> gated_forms{1, 2, 3, 4, 5, 6};
  std::vector<int> add_forms{1, 2, 3, 4};
  std::vector<small_temperature> temperatures{small_temperature::hot, small_temperature::cold,
                                              small_temperature::cold_weights};
  std::size_t cold_mib = 0;
};

/// `--suite small`: the gated RMS norm ("gated_norm_<label>_b<rows>_<temperature>_f<form>")
/// and add_rms_norm ("add_rms_norm_...") on each of nemotron_h_small_shapes()
/// at each row count, temperature and form: bytes (operands read and written
/// once) per second against the copy; rows, form and the copies rotated among
/// the extras.
std::vector<comparison> bench_small(timer& t, copy_baseline& copy, const small_options& o,
                                    int rounds);

}  // namespace mstar::bench::gpu
