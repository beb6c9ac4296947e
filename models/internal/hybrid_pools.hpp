#pragma once

// The pools of a hybrid model (attention layers on the paged KV pool,
// recurrent layers on the slot pool), as every family sizes them: the
// recurrent pool gets checkpoint slots for prefix reuse when the model has
// both kinds of layer and the prefix cache is on, and the KV pool's prefix
// cache opens only then.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "models/nemotron_h_config.hpp"
#include "models/qwen3_5_config.hpp"

namespace mstar::models::internal {

/// What a hybrid model's layers need of its pools.
struct hybrid_pool_shape {
  std::int64_t attention_layers = 0;  ///< KV pool layers (0: no KV pool)
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  mstar::dtype kv_dtype = mstar::dtype::float32;
  std::int64_t recurrent_layers = 0;   ///< recurrent pool layers (0: no recurrent pool)
  resources::recurrent_blocks blocks;  ///< one recurrent layer's blocks
};

/// Nemotron-H's pools: its attention layers' KV (in `kv_dtype`, the
/// backend's), its Mamba-2 layers' conv and SSM state (float32: the kernels
/// keep both blocks in f32).
[[nodiscard]] result<hybrid_pool_shape> pool_shape_of(const nemotron_h_config& config,
                                                      mstar::dtype kv_dtype);

/// Qwen3.5's pools: its full-attention layers' KV (in `kv_dtype`), its
/// delta-net layers' conv and delta state (float32, as the kernels keep them).
[[nodiscard]] result<hybrid_pool_shape> pool_shape_of(const qwen3_5_config& config,
                                                      mstar::dtype kv_dtype);

/// The pool spec for `shape` under `options`, rooted at `fingerprint`;
/// `checkpointed` says whether the recurrent pool got checkpoint slots (the
/// model is then prefix-skip-safe). A checkpoint stride that is not a whole
/// number of pages is the error.
[[nodiscard]] result<pool_spec> hybrid_pools(const pool_options& options, hybrid_pool_shape shape,
                                             std::string fingerprint, bool& checkpointed);

/// Checks that `bind` got exactly the pools a model of `family` asked for
/// (`wants_kv`, `wants_recurrent`); the error says what it got and needs.
[[nodiscard]] result<void> check_bound_pools(std::string_view family, bool wants_kv, const void* kv,
                                             bool wants_recurrent, const void* recurrent);

}  // namespace mstar::models::internal
