#pragma once

// Loading any supported model family from a Hugging Face style folder: the
// front ends (mstar-run, mstar-serve, mstar-node, the embedding API) call
// this and drive the result through `causal_lm`.

#include <filesystem>
#include <memory>

#include "core/result.hpp"
#include "models/causal_lm.hpp"

namespace mstar::models {

/// Loads the folder as the family its config.json's `model_type` names:
/// `nemotron_h` (also when absent) or `qwen3_5` / `qwen3_5_text`. Any other
/// type is refused, naming it and the supported ones.
[[nodiscard]] result<std::unique_ptr<causal_lm>> load_causal_lm(const std::filesystem::path& folder,
                                                                const run_options& run = {});

}  // namespace mstar::models
