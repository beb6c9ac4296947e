#include "models/internal/hybrid_pools.hpp"

#include <fmt/format.h>

namespace mstar::models::internal {

result<hybrid_pool_shape> pool_shape_of(const nemotron_h_config& config, mstar::dtype kv_dtype) {
  hybrid_pool_shape shape{config.count(layer_kind::attention),
                          config.num_key_value_heads,
                          config.head_dim,
                          kv_dtype,
                          config.count(layer_kind::mamba2),
                          {}};
  if (shape.recurrent_layers > 0) {
    auto blocks =
        config.to_mamba2_geometry().to_blocks(mstar::dtype::float32, mstar::dtype::float32);
    if (!blocks)
      return blocks.error();
    shape.blocks = std::move(*blocks);
  }
  return shape;
}

result<hybrid_pool_shape> pool_shape_of(const qwen3_5_config& config, mstar::dtype kv_dtype) {
  hybrid_pool_shape shape{config.count(qwen3_5_mixer::attention),
                          config.num_key_value_heads,
                          config.head_dim,
                          kv_dtype,
                          config.count(qwen3_5_mixer::delta_net),
                          {}};
  if (shape.recurrent_layers > 0) {
    auto blocks = config.delta_net().to_blocks(mstar::dtype::float32, mstar::dtype::float32);
    if (!blocks)
      return blocks.error();
    shape.blocks = std::move(*blocks);
  }
  return shape;
}

result<pool_spec> hybrid_pools(const pool_options& options, hybrid_pool_shape shape,
                               std::string fingerprint, bool& checkpointed) {
  pool_spec spec;
  spec.fingerprint = std::move(fingerprint);
  // A hybrid model reuses a prefix only where a recurrent checkpoint holds
  // the state at its end; the checkpoints are keyed by the KV pool's pages.
  const bool hybrid = shape.recurrent_layers > 0;
  const bool checkpoints =
      hybrid && shape.attention_layers > 0 && options.prefix_cache && options.checkpoint_slots > 0;
  if (checkpoints && options.checkpoint_stride % options.page_size != 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("the checkpoint stride {} is not a whole number of pages of {} "
                                  "tokens",
                                  options.checkpoint_stride, options.page_size));
  }
  checkpointed = checkpoints;
  if (shape.attention_layers > 0) {
    resources::kv_pool_config kc;
    kc.geometry.page_size = static_cast<std::int32_t>(options.page_size);
    kc.max_num_pages = options.max_num_pages;
    kc.geometry.num_layers = static_cast<std::int32_t>(shape.attention_layers);
    kc.geometry.num_kv_heads = static_cast<std::int32_t>(shape.kv_heads);
    kc.geometry.head_dim = static_cast<std::int32_t>(shape.head_dim);
    kc.geometry.dtype = shape.kv_dtype;
    kc.prefix_cache = options.prefix_cache && (hybrid ? checkpoints : true);
    kc.prefix_cache_salt = options.salt;
    spec.kv = std::move(kc);
  }
  if (hybrid) {
    resources::recurrent_state_config rc;
    rc.num_layers = shape.recurrent_layers;
    rc.blocks = std::move(shape.blocks);
    rc.max_slots = options.max_slots;
    if (checkpoints) {
      rc.checkpoint_slots = options.checkpoint_slots;
      rc.checkpoint_page_size = options.page_size;
      rc.checkpoint_stride =
          options.checkpoint_stride > 0 ? options.checkpoint_stride : options.page_size;
    }
    spec.recurrent = std::move(rc);
  }
  return spec;
}

result<void> check_bound_pools(std::string_view family, bool wants_kv, const void* kv,
                               bool wants_recurrent, const void* recurrent) {
  if (wants_kv == (kv != nullptr) && wants_recurrent == (recurrent != nullptr))
    return {};
  return make_error(
      errc::invalid_argument,
      fmt::format("{}: bound to {} KV and {} recurrent pool, the model needs {} and {}", family,
                  kv ? "a" : "no", recurrent ? "a" : "no", wants_kv ? "one" : "none",
                  wants_recurrent ? "one" : "none"));
}

}  // namespace mstar::models::internal
