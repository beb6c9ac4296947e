#pragma once

// Causal depthwise conv1d over the recurrent pool's conv state (Mamba-2's
// conv over [x | B | C], the delta nets' over [q | k | v]); CPU reference,
// CUDA versions take the same params structs.
//
// Conv state layout, per slot: [C][W-1] f32, column 0 the oldest input and
// column W-2 the newest, i.e. transformers' conv cache ([C][W], newest last)
// without its oldest column, which the next token's window never reads.
// Tap order is window position: weight[c][W-1] multiplies the current token.
//   y[t][c] = bias[c] + sum_{j<W} weight[c][j] * window_t[j],
//   window_t = (the W-1 inputs before t, oldest first) ++ x[t][c]
// then SiLU (y * sigmoid(y)) when asked.

#include <cstdint>
#include <span>

namespace mstar::kernels {

/// The conv weights and channel geometry shared by prefill and decode.
struct conv_weights {
  const float* weight = nullptr;  ///< [C, W] f32 (a Conv1d's [C, 1, W] squeezed)
  const float* bias = nullptr;    ///< [C] f32, or null for none
  std::int32_t channels = 0;      ///< C
  std::int32_t width = 0;         ///< W, the kernel size, >= 2
  bool silu = false;              ///< apply SiLU to the output
};

/// Inputs of `causal_conv_varlen`: a packed batch of rows (prefill, chunked
/// prefill, or any mix of lengths).
struct causal_conv_varlen_params {
  conv_weights w;
  const float* x = nullptr;   ///< [T, x_stride] f32: channel c of token t at x[t*x_stride + c]
  std::int64_t x_stride = 0;  ///< elements between tokens of x; 0 means C
  float* out = nullptr;       ///< [T, C] f32, dense; must not alias x
  std::span<const std::int32_t> cu_seqlens;  ///< [R+1] int32: row r owns tokens [cu[r], cu[r+1])
  float* state = nullptr;  ///< [max_slots][C][W-1] f32: this layer's conv block, read and written
  std::span<const std::int32_t>
      slot_indices;                         ///< [>= R] int32: row r's slot, or -1 to skip the row
  std::span<const std::uint8_t> has_state;  ///< [>= R] uint8: 0 starts the row from zeros
};

/// Runs each row through the conv, starting from its slot's window when
/// has_state[r] is set (else zeros, whatever the slot holds), and leaves the
/// slot holding the row's last W-1 inputs (older window columns shift in when
/// the row is shorter than W-1). Rows with slot -1 output zeros and write no
/// state; rows of zero tokens change nothing. Rows run in order, so two rows
/// on one slot (the sink) see each other's writes.
void causal_conv_varlen(const causal_conv_varlen_params& p);

/// Inputs of `causal_conv_update`: one token per row (decode).
struct causal_conv_update_params {
  conv_weights w;
  const float* x = nullptr;                    ///< [B, x_stride] f32, one token per row
  std::int64_t x_stride = 0;                   ///< elements between rows of x; 0 means C
  float* out = nullptr;                        ///< [B, C] f32, dense; must not alias x
  std::int32_t batch = 0;                      ///< B
  float* state = nullptr;                      ///< [max_slots][C][W-1] f32, updated in place
  std::span<const std::int32_t> slot_indices;  ///< [>= B] int32: row b's slot, or -1 to skip
  /// [>= B] uint8, or empty: when empty the slots are trusted (the pool
  /// zeroes a slot on release, so a fresh slot already reads as zeros).
  std::span<const std::uint8_t> has_state;
};

/// One decode step: out = conv(window ++ x), then the window shifts by one.
/// Equals `causal_conv_varlen` with every row one token long.
void causal_conv_update(const causal_conv_update_params& p);

}  // namespace mstar::kernels
