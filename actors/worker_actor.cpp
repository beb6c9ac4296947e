#include "actors/worker_actor.hpp"

#include "engine/preprocess.hpp"

namespace mstar::actors {
namespace {

worker_actor::behavior_type worker_behavior(worker_actor::stateful_pointer<worker_state> self,
                                            std::shared_ptr<models::causal_lm> model) {
  self->state.model = std::move(model);
  return {
      [self](forward_atom, const step_ptr& p, const plans_ptr& plans) -> caf::result<output_ptr> {
        const auto& step = p->step;
        auto out = self->state.model->forward(
            p->rows, *plans,
            step.want_logits ? std::span<const models::row_sampling>{}
                             : std::span<const models::row_sampling>{step.draws});
        if (!out)
          return caf::make_error(caf::sec::runtime_error, out.error().message());
        return std::make_shared<const models::forward_output>(std::move(*out));
      },
      [self](launch_atom, const step_ptr& p, const plans_ptr& plans) -> caf::result<std::uint64_t> {
        const auto& step = p->step;
        auto ticket = self->state.model->launch(
            p->rows, *plans,
            step.want_logits ? std::span<const models::row_sampling>{}
                             : std::span<const models::row_sampling>{step.draws},
            p->loopback);
        if (!ticket)
          return caf::make_error(caf::sec::runtime_error, ticket.error().message());
        return *ticket;
      },
      [self](finish_atom, std::uint64_t ticket) -> caf::result<output_ptr> {
        auto out = self->state.model->finish(ticket);
        if (!out)
          return caf::make_error(caf::sec::runtime_error, out.error().message());
        return std::make_shared<const models::forward_output>(std::move(*out));
      },
      [self](register_atom, const std::string& rid, const sequence_ptr& seq) {
        self->state.model->begin_sequence(rid, seq->prompt, seq->images);
      },
      [self](release_atom, const std::vector<std::string>& rids) {
        for (const auto& rid : rids)
          self->state.model->end_sequence(rid);
      },
  };
}

struct preprocess_state {
  std::shared_ptr<const models::causal_lm> model;
  static inline const char* name = "mstar.preprocess";
};

preprocess_actor::behavior_type preprocess_behavior(
    preprocess_actor::stateful_pointer<preprocess_state> self,
    std::shared_ptr<const models::causal_lm> model) {
  self->state.model = std::move(model);
  return {
      [self](tokenize_atom, engine::request_spec spec) -> caf::result<engine::request_spec> {
        if (auto ok = engine::tokenize(spec, self->state.model->tok()); !ok) {
          return caf::make_error(caf::sec::runtime_error, ok.error().message());
        }
        if (auto ok = self->state.model->place_images(spec.prompt, spec.images); !ok)
          return caf::make_error(caf::sec::runtime_error, ok.error().message());
        return spec;
      },
  };
}

}  // namespace

worker_actor spawn_worker_actor(caf::actor_system& sys, std::shared_ptr<models::causal_lm> model,
                                bool own_thread) {
  if (own_thread)
    return sys.spawn<caf::detached>(worker_behavior, std::move(model));
  return sys.spawn(worker_behavior, std::move(model));
}

preprocess_actor spawn_preprocess_actor(caf::actor_system& sys,
                                        std::shared_ptr<const models::causal_lm> model) {
  return sys.spawn(preprocess_behavior, std::move(model));
}

}  // namespace mstar::actors
