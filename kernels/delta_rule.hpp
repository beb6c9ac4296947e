#pragma once

// The gated delta rule (Qwen3.5 / Qwen3-Next linear attention) over the
// recurrent pool's state blocks, and the per-head gated RMS norm after it;
// CPU reference, CUDA versions take the same params structs.
//
// State layout, per slot: [HV][V][K] f32, K last (the pool's delta-net
// "state" block). Value head h reads query/key head h / (HV / HK). Per token,
// with q and k of its key head L2-normalised (x / sqrt(sum x^2 + 1e-6)) and q
// scaled by `scale`:
//   g    = -exp(A_log[h]) * softplus(a[h] + dt_bias[h]),  beta = sigmoid(b[h])
//   S    = exp(g) * S
//   u    = beta * (v - S k)          (S k: [V], sum over K)
//   S    = S + u k^T
//   o    = S q                       ([V])

#include <cstdint>
#include <span>

namespace mstar::kernels {

/// A delta-net layer's head geometry and per-head decay parameters.
struct gated_delta_weights {
  const float* a_log = nullptr;    ///< [HV] f32
  const float* dt_bias = nullptr;  ///< [HV] f32
  std::int32_t num_k_heads = 0;    ///< HK
  std::int32_t num_v_heads = 0;    ///< HV, a multiple of HK
  std::int32_t head_k_dim = 0;     ///< K
  std::int32_t head_v_dim = 0;     ///< V
  float scale = 0.0F;              ///< query scale; 0 picks 1/sqrt(K)
};

/// A step's inputs, token-major: the conv output and the raw a / b projections.
struct gated_delta_inputs {
  /// [T, qkv_stride] f32: token t's q at columns [0, HK*K), k at [HK*K, 2*HK*K),
  /// v at [2*HK*K, 2*HK*K + HV*V)
  const float* qkv = nullptr;
  std::int64_t qkv_stride = 0;  ///< elements between tokens; 0 means 2*HK*K + HV*V
  const float* a = nullptr;     ///< [T, ab_stride] f32: the first HV columns are a
  const float* b = nullptr;     ///< [T, ab_stride] f32: the first HV columns are b
  std::int64_t ab_stride = 0;   ///< elements between tokens of a and b; 0 means HV
};

/// Operands of `gated_delta_rule_varlen`: a packed batch of rows.
struct gated_delta_rule_params {
  gated_delta_weights w;
  gated_delta_inputs in;
  float* out = nullptr;                        ///< [T, HV, V] f32; written
  std::span<const std::int32_t> cu_seqlens;    ///< [R+1] int32: row r owns tokens [cu[r], cu[r+1])
  float* state = nullptr;                      ///< [max_slots][HV][V][K] f32, read and written
  std::span<const std::int32_t> slot_indices;  ///< [>= R] int32: row r's slot; -1 skips the row
  std::span<const std::uint8_t> has_state;     ///< [>= R] uint8: 0 starts the row from zeros
  /// Rows feed one token each (a decode step): the CUDA kernel then keeps no
  /// prefetch buffer and more blocks resident. A hint: any lengths stay right.
  bool decode = false;
};

/// Runs each row's tokens through the rule in order (decode rows are one
/// token long), starting from its slot's state when has_state[r] is set (else
/// zeros, whatever the slot holds), and leaves the final state in the slot.
/// Rows with slot -1 output zeros and write no state.
void gated_delta_rule_varlen(const gated_delta_rule_params& p);

/// Operands of `head_gated_rms_norm`.
struct head_gated_rms_norm_params {
  const float* x = nullptr;           ///< [T, H, D] f32 (the rule's output)
  const float* gate = nullptr;        ///< [T, gate_stride] f32: the first H*D columns are z
  std::int64_t gate_stride = 0;       ///< elements between tokens of gate; 0 means H*D
  const float* weight = nullptr;      ///< [D] f32, shared by every head
  float* out = nullptr;               ///< [T, H, D] f32 (may be x), or null with out_bf16
  std::uint16_t* out_bf16 = nullptr;  ///< [T, H, D] bf16 bits (the next GEMM's input), or null
  std::int64_t tokens = 0;            ///< T
  std::int32_t heads = 0;             ///< H
  std::int32_t head_dim = 0;          ///< D
  float eps = 1e-6F;
};

/// Qwen3.5's gated norm, norm before gate: each head's D values divided by
/// their root mean square, times `weight`, times silu(z). Writes `out` and / or
/// `out_bf16` (the f32 value rounded as core/dtype.hpp rounds).
void head_gated_rms_norm(const head_gated_rms_norm_params& p);

/// Operands of `output_gate`.
struct output_gate_params {
  const float* x = nullptr;  ///< [T, H, D] f32 (the attention output)
  /// [T, *] f32: head h's D gate values of token t start at
  /// gate[t * gate_token_stride + h * gate_head_stride]
  const float* gate = nullptr;
  std::int64_t gate_token_stride = 0;
  std::int64_t gate_head_stride = 0;
  float* out = nullptr;               ///< [T, H, D] f32 (may be x), or null with out_bf16
  std::uint16_t* out_bf16 = nullptr;  ///< [T, H, D] bf16 bits, or null
  std::int64_t tokens = 0;            ///< T
  std::int32_t heads = 0;             ///< H
  std::int32_t head_dim = 0;          ///< D
};

/// Gated attention's output gate: x * sigmoid(gate), elementwise.
void output_gate(const output_gate_params& p);

}  // namespace mstar::kernels
