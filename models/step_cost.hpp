#pragma once

// What one forward step of a model must move and compute at the least: the
// roofline figures of issue 17 (bench/model_gpu_bench.cpp prints a step's
// time against them and against the copy bandwidth and cuBLAS GEMM rate
// measured in the same run). Read from config.json alone: the weights are
// counted as the CUDA backends hold them (memory_facts.hpp's
// device_weight_bytes: GEMM matrices in the compute dtype, every other
// tensor in float32).

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "models/nemotron_h_config.hpp"
#include "models/qwen3_5_config.hpp"

namespace mstar::models {

/// A model's sizes as the step cost counts them; `cost_model_of` fills it.
struct cost_model {
  std::string family;               ///< "nemotron_h" or "qwen3_5"
  std::int64_t hidden = 0;          ///< embedding row width (float32 on the device)
  std::int64_t vocab = 0;           ///< embedding rows, LM head rows
  std::int64_t gemm_params = 0;     ///< matrix elements every token runs through (LM head apart)
  std::int64_t vector_params = 0;   ///< norms, conv filters, biases, per-head vectors (float32)
  std::int64_t matrix_element = 2;  ///< bytes of a matrix element: 2 (bf16) or 4 (float32)
  std::int64_t attention_layers = 0;
  std::int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t kv_element = 2;        ///< bytes of a KV page element (the compute dtype)
  std::int64_t recurrent_layers = 0;  ///< Mamba-2 or gated delta-net layers
  std::int64_t state_bytes = 0;       ///< one row's recurrent state in one layer (f32 blocks)
  std::int64_t scan_flops = 0;        ///< one token's recurrence and conv in one layer
  /// Output width of the widest projection a token runs through (Mamba-2
  /// in_proj, the MLP's up (and gate) rows, q), the GEMM the bench times
  /// as the model's own shape: [tokens, hidden] x [hidden, widest_projection].
  std::int64_t widest_projection = 0;

  /// LM head elements (vocab x hidden): run once per row, on its last token.
  [[nodiscard]] std::int64_t head_params() const noexcept { return vocab * hidden; }
};

/// Nemotron-H in `dtype`. Per-token Mamba-2 scan FLOPs, the recurrent form
/// (the least any algorithm does): the state update h = exp(dt A) h + dt x B^T
/// (3 per state element: decay, product, add) and y = C h (2 per element),
/// 5 H P N, plus the depthwise conv 2 W conv_dim.
[[nodiscard]] cost_model cost_model_of(const nemotron_h_config& config, mstar::dtype dtype);

/// Qwen3.5's text model in `dtype`. Per-token gated delta rule FLOPs per
/// value head: decay (V K), S k (2 V K), the rank-1 update (2 V K), S q
/// (2 V K): 7 HV V K, plus the conv 2 W conv_dim.
[[nodiscard]] cost_model cost_model_of(const qwen3_5_config& config, mstar::dtype dtype);

/// The model of the checkpoint in `folder` (config.json's model_type picks
/// the family, as memory_facts_of does); errors name the file.
[[nodiscard]] result<cost_model> cost_model_of(const std::filesystem::path& folder,
                                               mstar::dtype dtype);

/// One step: `rows` rows of `tokens_per_row` new tokens each, every row
/// after `context_per_row` tokens already cached (0: a fresh prompt).
struct step_shape {
  std::int64_t rows = 1;
  std::int64_t tokens_per_row = 1;
  std::int64_t context_per_row = 0;

  [[nodiscard]] std::int64_t tokens() const noexcept { return rows * tokens_per_row; }
};

/// What a step must read and write (bytes) and compute (FLOPs). Activations
/// between kernels and the logits are not counted: a fused step keeps the
/// former on chip and need not write the latter.
struct step_cost {
  /// Every weight once: matrices in the compute dtype, vectors in float32,
  /// the LM head whole, of the embedding table only one row per token.
  double weight_bytes = 0;
  /// Attention layers' K and V: read for the context and the step's own
  /// tokens (attention reads the pages it attends), written for its tokens.
  double kv_bytes = 0;
  /// Recurrent state per row and layer: written, and read when the row
  /// resumes (context > 0).
  double state_bytes = 0;
  /// 2 x gemm_params x tokens, and 2 x head_params x rows.
  double gemm_flops = 0;
  /// QK^T and PV, causal: 4 Hq D per query and key it attends,
  /// 4 Hq D (t c + t (t + 1) / 2) per row and layer.
  double attention_flops = 0;
  /// The recurrences and convs (cost_model::scan_flops per token and layer).
  double scan_flops = 0;

  [[nodiscard]] double bytes() const noexcept { return weight_bytes + kv_bytes + state_bytes; }
  [[nodiscard]] double flops() const noexcept { return gemm_flops + attention_flops + scan_flops; }
};

/// The cost of one step of `shape`.
[[nodiscard]] step_cost cost_of(const cost_model& model, const step_shape& shape);

/// The mean cost of the decode steps of generating `new_tokens` tokens
/// after `prompt_len`-token prompts at `rows` rows (the steps after the
/// prefill: contexts prompt_len .. prompt_len + new_tokens - 2, one token
/// per row); zeros when new_tokens < 2.
[[nodiscard]] step_cost mean_decode_cost(const cost_model& model, std::int64_t rows,
                                         std::int64_t prompt_len, std::int64_t new_tokens);

/// A step's time against the ceilings measured beside it.
struct roofline_point {
  double bytes_per_s = 0;         ///< cost.bytes() / seconds
  double flops_per_s = 0;         ///< cost.flops() / seconds
  double bandwidth_fraction = 0;  ///< bytes_per_s / the copy's bytes per second
  double compute_fraction = 0;    ///< flops_per_s / the GEMM's FLOP/s
  /// "bandwidth" or "compute": the ceiling whose ideal time is longer (the
  /// larger fraction), which bounds the step.
  std::string bound;
};

/// Places a step of `cost` that took `seconds` under a copy bandwidth of
/// `copy_bytes_per_s` and a GEMM rate of `peak_flops_per_s` (all positive;
/// a non-positive one gives zero rates and fractions).
[[nodiscard]] roofline_point place(const step_cost& cost, double seconds, double copy_bytes_per_s,
                                   double peak_flops_per_s);

}  // namespace mstar::models
