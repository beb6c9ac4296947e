#pragma once

// The Mamba-2 selective state-space (SSD) recurrence over the recurrent
// pool's "ssm" block; CPU reference (sequential in time), CUDA versions take
// the same params structs.
//
// Per token t, head h (group g = h / (H/G), heads of a group contiguous):
//   dt  = softplus(dt_raw[t][h] + dt_bias[h])      (torch's: x > 20 -> x)
//   dt  = clamp(dt, dt_min, dt_max)                (after softplus)
//   dA  = exp(dt * A[h]),  A[h] = -exp(A_log[h])
//   S[h][p][n] = dA * S[h][p][n] + dt * B[t][g][n] * x[t][h][p]
//   y[t][h][p] = sum_n S[h][p][n] * C[t][g][n] + D[h] * x[t][h][p]
// State layout, per slot: [H][P][N] f32 (N fastest), transformers' ssm cache
// layout. Gating by z and the grouped RMS norm are not part of this kernel.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace mstar::kernels {

/// Per-layer constants and geometry shared by prefill and decode.
struct ssd_weights {
  const float* dt_bias = nullptr;  ///< [H] f32
  const float* A_log = nullptr;    ///< [H] f32; A = -exp(A_log)
  const float* D = nullptr;        ///< [H] f32 skip weight, or null for none
  std::int32_t num_heads = 0;      ///< H
  std::int32_t head_dim = 0;       ///< P
  std::int32_t state_size = 0;     ///< N
  std::int32_t n_groups = 0;       ///< G, divides H
  float dt_min = 0.0f;             ///< lower clamp of dt after softplus
  /// Upper clamp of dt after softplus; infinity means none.
  float dt_max = std::numeric_limits<float>::infinity();
};

/// Token-major inputs with row strides, so the model can pass column slices
/// of the conv output ([x | B | C]) and of the in-projection (dt) without a
/// copy. A stride of 0 means dense.
struct ssd_inputs {
  const float* x = nullptr;    ///< [T, x_stride] f32: x[t][h][p] at t*x_stride + h*P + p
  const float* dt = nullptr;   ///< [T, dt_stride] f32: raw dt[t][h] (before bias and softplus)
  const float* B = nullptr;    ///< [T, bc_stride] f32: B[t][g][n] at t*bc_stride + g*N + n
  const float* C = nullptr;    ///< [T, bc_stride] f32: C[t][g][n], same stride as B
  std::int64_t x_stride = 0;   ///< 0 means H*P
  std::int64_t dt_stride = 0;  ///< 0 means H
  std::int64_t bc_stride = 0;  ///< 0 means G*N
};

/// Inputs of `ssd_scan_varlen`: a packed batch of rows (prefill, chunked prefill).
struct ssd_scan_varlen_params {
  ssd_weights w;
  ssd_inputs in;
  float* y = nullptr;                          ///< [T, H, P] f32, dense
  std::span<const std::int32_t> cu_seqlens;    ///< [R+1] int32: row r owns tokens [cu[r], cu[r+1])
  float* state = nullptr;                      ///< [max_slots][H][P][N] f32: this layer's ssm block
  std::span<const std::int32_t> slot_indices;  ///< [>= R] int32: row r's slot, or -1 to skip
  std::span<const std::uint8_t> has_state;     ///< [>= R] uint8: 0 starts the row from zeros
};

/// Scans each row from its slot's state (or zeros when has_state[r] is 0,
/// whatever the slot holds) and stores the row's final state in the slot.
/// Rows with slot -1 output zeros and write no state; rows of zero tokens
/// change nothing. Rows run in order.
void ssd_scan_varlen(const ssd_scan_varlen_params& p);

/// Inputs of `ssd_update`: one token per row (decode).
struct ssd_update_params {
  ssd_weights w;
  ssd_inputs in;                               ///< one token per row: T = B
  float* y = nullptr;                          ///< [B, H, P] f32, dense
  std::int32_t batch = 0;                      ///< B
  float* state = nullptr;                      ///< [max_slots][H][P][N] f32, updated in place
  std::span<const std::int32_t> slot_indices;  ///< [>= B] int32: row b's slot, or -1 to skip
  /// [>= B] uint8, or empty: when empty the slots are trusted (the pool
  /// zeroes a slot on release, so a fresh slot already reads as zeros).
  std::span<const std::uint8_t> has_state;
  /// CUDA, chained launches: no launch still in flight when this one starts
  /// writes the slots, has_state or the rows' states (a decode step's chain,
  /// where only this layer's update writes its state), so the kernel may
  /// read them before its chained wait, under the tail of the launch before.
  bool state_settled = false;
};

/// One decode step per row, in place in the slot; equals `ssd_scan_varlen`
/// with every row one token long.
void ssd_update(const ssd_update_params& p);

/// softplus as torch computes it (beta 1, threshold 20), then the clamp.
[[nodiscard]] float ssd_dt(float raw_plus_bias, float dt_min, float dt_max) noexcept;

}  // namespace mstar::kernels
