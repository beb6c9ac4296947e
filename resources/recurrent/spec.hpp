#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "core/result.hpp"
#include "resources/recurrent/config.hpp"

namespace mstar::resources {

/// A model's declaration of one recurrent state pool: the key its resource is
/// registered under, the graph nodes that use it, and the pool's config.
/// Built as `recurrent_state_spec{"gdn_state", {"llm"}, config}`.
struct recurrent_state_spec {
  /// The resource key backends look the pool's addressing up by.
  std::string resource_key;
  /// The graph nodes that run against this pool.
  std::set<std::string> nodes;
  /// The pool's layers, blocks and slots.
  recurrent_state_config config;

  /// Applies a deployment's yaml overrides: how many slots it gets, and the
  /// "state" block's dtype (which trades accumulated precision against
  /// bandwidth and decides which kernels a backend can reach). Block shapes
  /// are the model's and deliberately not overridable.
  ///
  /// `state_dtype` is a dtype name ("bfloat16", "torch.float32"); it needs a
  /// "state" block, so Mamba-2 pools (whose block is "ssm") refuse it. The
  /// "conv" block is never touched. All or nothing: on error, naming the
  /// resource key and the field, the spec is unchanged.
  [[nodiscard]] result<void> apply_yaml_overrides(
      std::optional<std::int64_t> max_slots = std::nullopt,
      std::optional<std::string> state_dtype = std::nullopt);

  /// Field-wise equality.
  friend bool operator==(const recurrent_state_spec&, const recurrent_state_spec&) = default;
};

}  // namespace mstar::resources
