#include "actors/pool_actor.hpp"

#include "engine/local_engine.hpp"
#include "engine/preprocess.hpp"

namespace mstar::actors {
namespace {

caf::error failure(const mstar::error& e) {
  return caf::make_error(caf::sec::runtime_error, e.message());
}

pool_actor::behavior_type pool_behavior(pool_actor::stateful_pointer<pool_state> self,
                                        std::shared_ptr<engine::pool_set> pools,
                                        std::shared_ptr<const void> keep_alive) {
  self->state.keep_alive = std::move(keep_alive);
  self->state.pools = std::move(pools);
  return {
      [self](admit_atom, const step_ptr& p) -> caf::result<admit_reply, plans_ptr> {
        auto& st = self->state;
        st.payload = p;
        st.step = {};
        st.step.request = std::shared_ptr<const models::step_request>(p, &p->request);
        for (const auto& r : p->rows)
          st.step.ctx.request_ids.push_back(r.rid);
        const auto out = st.pools->admit(st.step);
        if (!out.ok()) {
          st.payload.reset();
          return {admit_reply{false, out.failed_resource,
                              resources::refusal_message(*out.outcome.reason)},
                  plans_ptr{}};
        }
        auto plans = st.pools->plan(st.step);  // rolls the admit back on error
        if (!plans)
          return failure(plans.error());
        return {admit_reply{},
                plans_ptr{std::make_shared<const models::step_plans>(std::move(*plans))}};
      },
      [self](commit_atom) -> caf::result<bool> {
        auto& st = self->state;
        auto done = st.pools->commit(st.step);
        st.payload.reset();
        if (!done)
          return failure(done.error());
        return true;
      },
      [self](rollback_atom) -> bool {
        self->state.pools->rollback(self->state.step);
        self->state.payload.reset();
        return true;
      },
      [self](register_atom, const std::string& rid, const std::vector<std::uint32_t>& tokens,
             const std::string& salt) {
        auto& set = *self->state.pools;
        std::optional<resources::kv_prefix_seed> keys;
        if (set.kv() != nullptr && set.kv()->prefix_cache_open()) {
          if (auto k = engine::page_keys(tokens, set.page_size(), salt))
            keys = std::move(*k);
        }
        return set.ingest(rid, keys ? &*keys : nullptr).value_or(-1);
      },
      [self](agree_atom, const std::string& rid, std::int64_t agreed) {
        self->state.pools->apply_cached_prefix(rid, agreed);
      },
      [self](extend_atom, const extend_list& ids) {
        for (const auto& [rid, list] : ids)
          self->state.pools->extend(rid, list);
      },
      [self](release_atom, const std::vector<std::string>& rids) {
        for (const auto& rid : rids)
          self->state.pools->remove(rid);
      },
      [self](stats_atom) { return pool_stats_reply{self->state.pools->stats()}; },
      [self](check_atom) -> std::string {
        auto ok = self->state.pools->check_invariants();
        return ok ? std::string{} : ok.error().message();
      },
  };
}

}  // namespace

pool_actor spawn_pool_actor(caf::actor_system& sys, std::shared_ptr<engine::pool_set> pools,
                            std::shared_ptr<const void> keep_alive) {
  return sys.spawn(pool_behavior, std::move(pools), std::move(keep_alive));
}

}  // namespace mstar::actors
