#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "resources/recurrent/config.hpp"

namespace mstar::resources {

/// Head geometry of the delta-net family: gated delta rule (Qwen3.5,
/// Qwen3-Next) and Kimi delta attention (Kimi Linear).
///
/// `to_blocks` and `from_blocks` are inverses, so a backend reads its geometry
/// off the pool instead of the model declaring it twice; `from_blocks` is also
/// the check that pool and backend were built for the same model family.
struct delta_net_geometry {
  std::int64_t num_k_heads = 0;       ///< HK: query/key heads
  std::int64_t num_v_heads = 0;       ///< HV: value heads, one state matrix each
  std::int64_t head_k_dim = 0;        ///< K
  std::int64_t head_v_dim = 0;        ///< V
  std::int64_t conv_kernel_size = 0;  ///< W: taps of the depthwise conv, >= 2

  /// Channels of the depthwise conv, which runs over [q | k | v] side by side:
  /// 2·HK·K + HV·V. Plain arithmetic; `to_blocks` is where overflow is checked.
  [[nodiscard]] std::int64_t conv_dim() const noexcept {
    return 2 * num_k_heads * head_k_dim + num_v_heads * head_v_dim;
  }

  /// The pool's blocks for this (pre-sharding) geometry: "state" [HV, V, K]
  /// (K last, the layout FlashInfer's pool kernels need) and "conv"
  /// [conv_dim, W − 1] (every tap but the current token's), both sharded on
  /// axis 0. Fails on a non-positive field or W < 2, naming the field.
  [[nodiscard]] result<recurrent_blocks> to_blocks(dtype state_dtype = dtype::float32,
                                                   dtype conv_dtype = dtype::bfloat16) const;

  /// The geometry whose `to_blocks` gives `blocks`' shapes. Works on sharded
  /// blocks too (every axis involved shards by the same factor) and then
  /// yields the per-rank head counts. Fails, naming the mismatch, when the
  /// shapes are not a delta-net's.
  [[nodiscard]] static result<delta_net_geometry> from_blocks(const recurrent_blocks& blocks);

  /// Field-wise equality.
  friend bool operator==(const delta_net_geometry&, const delta_net_geometry&) = default;
};

/// Head geometry of a Mamba-2 (SSD) layer: Nemotron-H, Nemotron Nano,
/// Mamba-Codestral.
///
/// `n_groups` (B/C groups shared by the heads) is a shape fact, since
/// conv_dim = H·P + 2·G·N, so it is recoverable and `from_blocks` inverts
/// `to_blocks` exactly.
struct mamba2_geometry {
  std::int64_t num_heads = 0;         ///< H
  std::int64_t head_dim = 0;          ///< P
  std::int64_t state_size = 0;        ///< N
  std::int64_t n_groups = 0;          ///< G
  std::int64_t conv_kernel_size = 0;  ///< W: taps of the depthwise conv, >= 2

  /// Width of the x projection: H·P.
  [[nodiscard]] std::int64_t d_inner() const noexcept { return num_heads * head_dim; }

  /// Channels of the depthwise conv, which runs over [x | B | C]: H·P + 2·G·N.
  [[nodiscard]] std::int64_t conv_dim() const noexcept {
    return d_inner() + 2 * n_groups * state_size;
  }

  /// The pool's blocks for this (pre-sharding) geometry: "ssm" [H, P, N] and
  /// "conv" [conv_dim, W − 1], both sharded on axis 0. The ssm state defaults
  /// to fp32 because it accumulates, with decay, for the life of a session.
  /// Fails on a non-positive field or W < 2, naming the field.
  [[nodiscard]] result<recurrent_blocks> to_blocks(dtype state_dtype = dtype::float32,
                                                   dtype conv_dtype = dtype::bfloat16) const;

  /// The geometry whose `to_blocks` gives `blocks`' shapes, sharded ones
  /// included. Fails, naming the mismatch, when the shapes are not a
  /// Mamba-2's: the check that a pool and the backend planning against it
  /// were built for the same model.
  [[nodiscard]] static result<mamba2_geometry> from_blocks(const recurrent_blocks& blocks);

  /// Field-wise equality.
  friend bool operator==(const mamba2_geometry&, const mamba2_geometry&) = default;
};

}  // namespace mstar::resources
