#pragma once

// The worker actor: owns the model backend (its weights, its device
// stream) and runs a step's kernels against the plans the pools made. A
// forward blocks for the length of the kernels. By default it runs on the
// scheduler's thread like the pools: nothing else can happen during a step
// until overlap scheduling exists, and two thread hand-offs per step cost
// more than they hide. `own_thread` gives it a thread of its own.

#include <memory>

#include "actors/protocol.hpp"
#include "models/causal_lm.hpp"

namespace mstar::actors {

/// What the worker owns.
struct worker_state {
  std::shared_ptr<models::causal_lm> model;
  static inline const char* name = "mstar.worker";
};

/// Spawns the worker owning `model` (bound to its pools already).
[[nodiscard]] worker_actor spawn_worker_actor(caf::actor_system& sys,
                                              std::shared_ptr<models::causal_lm> model,
                                              bool own_thread = false);

/// The preprocess actor: tokenizes text prompts with the model's tokenizer
/// and fits images to their placeholders (`place_images`: const, so the
/// model is shared with the worker read-only).
[[nodiscard]] preprocess_actor spawn_preprocess_actor(
    caf::actor_system& sys, std::shared_ptr<const models::causal_lm> model);

}  // namespace mstar::actors
