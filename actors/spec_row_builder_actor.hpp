#pragma once

// The spec-row builder actor: while step N runs, turns the scheduler's
// foreseen step N+1 into the payload the pools and the worker take: the
// forward's rows, the model's typed steps (`declare`) and each decode row's
// loopback source in N (engine::loopback_rows). Host work the conductor
// hands off, so it overlaps N's kernels like the rest; the decisions stay
// in the scheduler (engine/).

#include <memory>

#include "actors/protocol.hpp"
#include "models/causal_lm.hpp"

namespace mstar::actors {

/// The payload of `next` (a step to launch while `running` runs). Also the
/// conductor's own path for a step it schedules (`running` null: no
/// loopback).
[[nodiscard]] step_ptr build_step(const models::causal_lm& model, engine::scheduled_step next,
                                  const engine::scheduled_step* running);

/// Spawns the builder over `model` (read-only: `declare` is const).
[[nodiscard]] spec_row_builder_actor spawn_spec_row_builder_actor(
    caf::actor_system& sys, std::shared_ptr<const models::causal_lm> model);

}  // namespace mstar::actors
