#pragma once

#include <vector>

#include "core/result.hpp"
#include "models/internal/json_fields.hpp"
#include "models/nemotron_h_config.hpp"

namespace mstar::models::internal {

/// Reads every field of `config` but the layer list from `fields`, keeping
/// the transformers default of each absent one; the first bad field is the error.
[[nodiscard]] result<void> read_nemotron_h_fields(const json_fields& fields,
                                                  nemotron_h_config& config);

/// The layer list of a Nemotron-H config from `hybrid_override_pattern`,
/// `layers_block_type` or its alias `layer_types`, whichever are present (they
/// must agree), checked against `num_hidden_layers` when that is given. MoE
/// layers are returned; refusing them is validate()'s job.
[[nodiscard]] result<std::vector<layer_kind>> read_layer_pattern(const json_fields& fields);

}  // namespace mstar::models::internal
