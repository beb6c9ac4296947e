#pragma once

// `--gpu-memory-fraction` for every front end (mstar-run, mstar-serve,
// mstar-node): on a GPU the pools are sized from the device's memory
// (engine/memory_plan.hpp) before the engine makes them.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/result.hpp"
#include "engine/local_engine.hpp"
#include "models/causal_lm.hpp"

namespace mstar::launcher {

/// What a front end was told about pool sizes.
struct memory_fit {
  double fraction = 0.9;        ///< of the device's memory, in (0, 1]
  bool fraction_given = false;  ///< the user set it (a CPU run then says it is ignored)
  std::int64_t context = 0;     ///< tokens per request to plan for; 0: the model's, else 8192
  bool pages_given = false;     ///< --max-pages / kv_pages set: kept
  bool slots_given = false;     ///< --max-slots / max_slots set: kept
};

/// The context a plan is made for: `fit.context`, else the model's
/// max_position_embeddings, else 8192.
[[nodiscard]] std::int64_t planned_context(const memory_fit& fit, const models::causal_lm& model);

/// On a GPU, sizes `config.pools` (the pages and slots not given) from the
/// device's memory for the checkpoint in `model_dir`, loaded as `model`
/// (weights not yet uploaded: models upload them at `bind`), and returns the
/// line to log. On the CPU it changes nothing and returns a line only when
/// the fraction was given (it is ignored there). Errors: the device cannot
/// be queried, or the budget holds no request (the message names the numbers).
[[nodiscard]] result<std::string> fit_pools_to_device(const std::filesystem::path& model_dir,
                                                      const models::causal_lm& model,
                                                      const std::string& device,
                                                      const memory_fit& fit,
                                                      engine::engine_config& config);

}  // namespace mstar::launcher
