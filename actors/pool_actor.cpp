#include "actors/pool_actor.hpp"

#include "actors/pool_regions.hpp"
#include "engine/local_engine.hpp"
#include "engine/preprocess.hpp"

namespace mstar::actors {
namespace {

caf::error failure(const mstar::error& e) {
  return caf::make_error(caf::sec::runtime_error, e.message());
}

// The prompt tokens a publication carries (its main stream's stored length).
std::int64_t stored_tokens(const engine::publication& pub) {
  std::int64_t n = 0;
  for (const auto& [label, ps] : pub.streams) {
    if (ps.kv)
      n = label == "main" || n == 0 ? ps.kv->stored_len : n;
  }
  return n;
}

// The checksums of every page and slot `offer` publishes, read from the
// arenas (device arenas after the pool's queued kernels, through pinned
// staging: pool_regions.hpp).
result<void> checksums_of(engine::pool_set& set, transfer_offer& offer) {
  const auto regions = regions_of(set);
  for (const auto& [label, ps] : offer.pub.streams) {
    if (ps.kv && regions.kv_base != nullptr) {
      std::vector<resources::page_id> pages = ps.kv->pages;
      for (const auto& e : ps.kv->ends)
        pages.push_back(e.page);  // the end-key copies travel too
      auto sums = checksum_pages(regions, pages);
      if (!sums)
        return make_error(errc::internal,
                          "checksums of published pages: " + to_string(sums.error()));
      offer.kv_sums.insert(offer.kv_sums.end(), sums->begin(), sums->end());
    }
    if (ps.recurrent && !regions.blocks.empty()) {
      std::vector<std::int32_t> slots{ps.recurrent->slot};
      for (const auto& c : ps.recurrent->checkpoints)
        slots.push_back(c.slot);  // item-end checkpoints travel too
      auto sums = checksum_slots(regions, slots);
      if (!sums)
        return make_error(errc::internal,
                          "checksums of published slots: " + to_string(sums.error()));
      offer.slot_sums.insert(offer.slot_sums.end(), sums->begin(), sums->end());
    }
  }
  return {};
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
      [self](drop_atom, const std::vector<std::string>& rids) -> bool {
        self->state.pools->rollback_rows(self->state.step, {rids.begin(), rids.end()});
        return true;
      },
      [self](rollback_atom) -> bool {
        self->state.pools->rollback(self->state.step);
        self->state.payload.reset();
        return true;
      },
      [self](register_atom, const std::string& rid, const std::vector<std::uint32_t>& tokens,
             const std::string& salt, const seed_ptr& seed) -> std::int64_t {
        auto& set = *self->state.pools;
        if (auto it = self->state.adopted.find(rid); it != self->state.adopted.end())
          return it->second;  // its prompt is here already, adopted
        const auto keys = engine::sequence_keys(set.key_page_size(), tokens, salt, seed.get());
        return set.ingest(rid, keys ? &*keys : nullptr).value_or(-1);
      },
      [self](agree_atom, const std::string& rid, std::int64_t agreed) -> std::int64_t {
        if (self->state.adopted.contains(rid))
          return agreed;
        return self->state.pools->apply_cached_prefix(rid, agreed);
      },
      [self](extend_atom, const extend_list& ids) {
        for (const auto& [rid, list] : ids)
          self->state.pools->extend(rid, list);
      },
      [self](release_atom, const std::vector<std::string>& rids) {
        for (const auto& rid : rids) {
          self->state.adopted.erase(rid);
          self->state.pools->remove(rid);
        }
      },
      [self](publish_atom, const std::string& rid) -> caf::result<transfer_offer> {
        auto& set = *self->state.pools;
        auto pub = set.publish(rid);
        if (!pub)
          return failure(pub.error());
        transfer_offer offer;
        offer.pub = std::move(*pub);
        if (auto sums = checksums_of(set, offer); !sums) {
          (void)set.release_publication(rid);
          return failure(sums.error());
        }
        return offer;
      },
      [self](unpublish_atom, const std::string& rid) {
        (void)self->state.pools->release_publication(rid);  // not_found: nothing held
      },
      [self](adopt_atom, const std::string& rid,
             const engine::publication& pub) -> caf::result<engine::adoption> {
        auto made = self->state.pools->adopt(rid, pub);
        if (!made)
          return failure(made.error());
        self->state.adopting[rid] = stored_tokens(pub);
        return std::move(*made);
      },
      [self](finish_atom, const std::string& rid) -> caf::result<bool> {
        auto& st = self->state;
        if (auto ok = st.pools->finish_adopt(rid); !ok)
          return failure(ok.error());
        st.adopted[rid] = st.adopting[rid];
        st.adopting.erase(rid);
        return true;
      },
      [self](abort_atom, const std::string& rid) {
        self->state.adopting.erase(rid);
        return self->state.pools->abort_adopt(rid).has_value();
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
