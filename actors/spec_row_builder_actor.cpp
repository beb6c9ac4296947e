#include "actors/spec_row_builder_actor.hpp"

namespace mstar::actors {
namespace {

struct spec_row_builder_state {
  std::shared_ptr<const models::causal_lm> model;
  static inline const char* name = "mstar.spec_row_builder";
};

spec_row_builder_actor::behavior_type spec_row_builder_behavior(
    spec_row_builder_actor::stateful_pointer<spec_row_builder_state> self,
    std::shared_ptr<const models::causal_lm> model) {
  self->state.model = std::move(model);
  return {
      [self](build_atom, const scheduled_ptr& next, const step_ptr& running) -> step_ptr {
        return build_step(*self->state.model, *next, &running->step);
      },
  };
}

}  // namespace

step_ptr build_step(const models::causal_lm& model, engine::scheduled_step next,
                    const engine::scheduled_step* running) {
  auto payload = std::make_shared<step_payload>();
  payload->step = std::move(next);
  payload->rows.reserve(payload->step.rows.size());
  for (const auto& r : payload->step.rows)
    payload->rows.push_back({r.rid, r.tokens});
  payload->request = model.declare(payload->rows);
  engine::declare_retention(payload->step, payload->request);
  if (running != nullptr)
    payload->loopback = engine::loopback_rows(payload->step, *running);
  return payload;
}

spec_row_builder_actor spawn_spec_row_builder_actor(
    caf::actor_system& sys, std::shared_ptr<const models::causal_lm> model) {
  return sys.spawn(spec_row_builder_behavior, std::move(model));
}

}  // namespace mstar::actors
