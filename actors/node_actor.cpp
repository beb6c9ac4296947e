#include "actors/node_actor.hpp"

#include <map>

#include "actors/conductor_actor.hpp"
#include "actors/runtime.hpp"

namespace mstar::actors {
namespace {

/// A request's deltas, handed from the conductor's thread to the node actor.
class relay_sink final : public delta_sink {
 public:
  explicit relay_sink(node_actor node) : node_(std::move(node)) {}
  void push(engine::delta d) override { caf::anon_send(node_, relay_atom_v, std::move(d)); }

 private:
  node_actor node_;
};

struct prefill_entry {
  caf::typed_response_promise<handoff> reply;
  handoff out;
};

struct node_state {
  node_parts parts;
  sink_ptr sink;
  std::map<engine::request_id, prefill_entry> prefills;
  /// Where each one's deltas go, with the router's ticket for them.
  struct decode_entry {
    caf::actor router;
    std::uint64_t ticket = 0;
    std::int32_t unfinished = 1;  ///< samples still open
  };
  std::map<engine::request_id, decode_entry> decodes;
  std::map<caf::actor_addr, std::int64_t> routers;  ///< monitored, with their live requests
  static inline const char* name = "mstar.node";
};

using self_ptr = node_actor::stateful_pointer<node_state>;

void watch(self_ptr self, const caf::actor& router) {
  if (self->state.routers[router.address()]++ == 0)
    self->monitor(router);
}

void unwatch(self_ptr self, const caf::actor& router) {
  auto it = self->state.routers.find(router.address());
  if (it != self->state.routers.end() && --it->second == 0) {
    self->demonitor(router);
    self->state.routers.erase(it);
  }
}

void relay(self_ptr self, engine::delta d) {
  auto& st = self->state;
  if (auto it = st.prefills.find(d.id); it != st.prefills.end()) {
    const bool last = d.finished.has_value();
    it->second.out.deltas.push_back(std::move(d));
    if (last) {
      it->second.reply.deliver(std::move(it->second.out));
      st.prefills.erase(it);
    }
    return;
  }
  if (auto it = st.decodes.find(d.id); it != st.decodes.end()) {
    const bool last = d.finished && --it->second.unfinished == 0;
    auto router = it->second.router;
    caf::anon_send(router, delta_atom_v, it->second.ticket, std::move(d));
    if (last) {
      st.decodes.erase(it);
      unwatch(self, router);
    }
  }
}

node_actor::behavior_type node_behavior(self_ptr self, node_parts parts) {
  self->state.parts = std::move(parts);
  self->state.sink = std::make_shared<relay_sink>(node_actor{self});
  self->monitor(self->state.parts.conductor);
  self->set_down_handler([self](const caf::down_msg& m) {
    auto& st = self->state;
    if (m.source == st.parts.conductor.address()) {
      self->quit(m.reason);  // the engine is gone: so is the node
      return;
    }
    // A router went away: its requests run for nobody.
    for (auto it = st.decodes.begin(); it != st.decodes.end();) {
      if (it->second.router.address() == m.source) {
        caf::anon_send(st.parts.conductor, cancel_atom_v, it->first);
        it = st.decodes.erase(it);
      } else {
        ++it;
      }
    }
    st.routers.erase(m.source);
  });
  return {
      [self](prefill_atom, engine::request_spec spec) -> caf::result<handoff> {
        auto& st = self->state;
        if (spec.sampling.n != 1)
          return caf::make_error(caf::sec::invalid_argument, "a handoff has one sample (n = 1)");
        if (st.prefills.contains(spec.id) || st.decodes.contains(spec.id)) {
          return caf::make_error(caf::sec::invalid_argument,
                                 "request " + spec.id + " is already on node " + st.parts.name);
        }
        auto& entry = st.prefills[spec.id];
        entry.out.node = st.parts.name;
        entry.reply = self->make_response_promise<handoff>();
        caf::anon_send(st.parts.conductor, submit_atom_v, std::move(spec), st.sink);
        return entry.reply;
      },
      [self](decode_atom, engine::request_spec spec, caf::actor router,
             std::uint64_t ticket) -> caf::result<bool> {
        auto& st = self->state;
        if (st.prefills.contains(spec.id) || st.decodes.contains(spec.id)) {
          return caf::make_error(caf::sec::invalid_argument,
                                 "request " + spec.id + " is already on node " + st.parts.name);
        }
        watch(self, router);
        st.decodes[spec.id] = {std::move(router), ticket, std::max(1, spec.sampling.n)};
        caf::anon_send(st.parts.conductor, submit_atom_v, std::move(spec), st.sink);
        return true;
      },
      [self](cancel_atom, const std::string& id) {
        caf::anon_send(self->state.parts.conductor, cancel_atom_v, id);
      },
      [self](describe_atom) {
        const auto& p = self->state.parts;
        return node_info{p.name, p.role, p.max_context, p.vocab_size};
      },
      [self](stats_atom) -> caf::result<engine_stats> {
        auto rp = self->make_response_promise<engine_stats>();
        auto total = std::make_shared<engine_stats>();
        auto pools = self->state.parts.pools;
        self->request(self->state.parts.conductor, std::chrono::seconds(10), stats_atom_v)
            .then(
                [self, rp, total, pools](const engine_stats& s) mutable {
                  *total = s;
                  if (pools.empty()) {
                    rp.deliver(*total);
                    return;
                  }
                  auto left = std::make_shared<std::size_t>(pools.size());
                  for (const auto& p : pools) {
                    self->request(p, std::chrono::seconds(10), stats_atom_v)
                        .then(
                            [rp, total, left](const pool_stats_reply& r) mutable {
                              total->kv_pages += r.stats.kv_pages;
                              total->kv_free_pages += r.stats.kv_free_pages;
                              total->kv_cached_pages += r.stats.kv_cached_pages;
                              total->kv_evictable_pages += r.stats.kv_evictable_pages;
                              total->slots += r.stats.slots;
                              total->free_slots += r.stats.free_slots;
                              if (--*left == 0)
                                rp.deliver(*total);
                            },
                            [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
                  }
                },
                [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [self](relay_atom, engine::delta d) { relay(self, std::move(d)); },
  };
}

}  // namespace

node_parts node_parts_of(const runtime& rt, std::string name, std::string role) {
  node_parts p;
  p.name = std::move(name);
  p.role = std::move(role);
  p.conductor = rt.conductor();
  p.pools = rt.pool_actors();
  p.max_context = rt.model().max_context();
  p.vocab_size = rt.model().vocab_size();
  return p;
}

node_actor spawn_node_actor(caf::actor_system& sys, node_parts parts) {
  return sys.spawn(node_behavior, std::move(parts));
}

}  // namespace mstar::actors
