#include "actors/node_actor.hpp"

#include <chrono>
#include <cstdlib>
#include <map>
#include <spdlog/spdlog.h>

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
  bool held = false;       ///< the conductor left its pool state to us
  bool hold_done = false;  ///< MSTAR_TEST_PREFILL_HOLD_MS already held it
};

/// Where a decoded request's deltas go, with the router's ticket for them.
struct decode_entry {
  caf::actor router;
  std::uint64_t ticket = 0;
  std::int32_t unfinished = 1;  ///< samples still open
  bool cancelled = false;       ///< cancelled before it reached the conductor
};

struct node_state {
  node_parts parts;
  sink_ptr sink;
  std::map<engine::request_id, prefill_entry> prefills;
  std::map<engine::request_id, decode_entry> decodes;
  std::map<caf::actor_addr, std::int64_t> routers;  ///< monitored, with their live requests
  /// Published requests, by the serial of their lease (a late lease timer
  /// of an earlier request with the same id does nothing).
  std::map<engine::request_id, std::uint64_t> published;
  std::uint64_t serial = 0;
  transfer_counters transfers;
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

// Tells every pool `msg` about request `rid` (one-way).
template <class Atom>
void tell_pools(self_ptr self, Atom atom, const engine::request_id& rid) {
  for (const auto& p : self->state.parts.pools)
    caf::anon_send(p, atom, rid);
}

void release_in_pools(self_ptr self, const engine::request_id& rid) {
  for (const auto& p : self->state.parts.pools)
    caf::anon_send(p, release_atom_v, std::vector<std::string>{rid});
}

void unpublish(self_ptr self, const engine::request_id& rid) {
  if (self->state.published.erase(rid) > 0)
    tell_pools(self, unpublish_atom_v, rid);
}

// A held prefill ended by the one-token cap: every pool publishes its part
// (then frees the request: the holds keep the state), under a lease.
void publish_then_reply(self_ptr self, prefill_entry entry, const engine::request_id& rid) {
  auto& st = self->state;
  struct gather {
    transfer_offer offer;
    std::size_t left = 0;
    std::string failed;
  };
  auto g = std::make_shared<gather>();
  g->left = st.parts.pools.size();
  g->offer.node = st.parts.name;
  g->offer.arenas = st.parts.arenas;
  auto done = [self, g, rid, entry = std::make_shared<prefill_entry>(std::move(entry))] {
    if (!g->failed.empty()) {
      spdlog::warn("request {}: nothing published ({}); its decode node recomputes the prompt", rid,
                   g->failed);
      tell_pools(self, unpublish_atom_v, rid);
    } else {
      entry->out.offer = std::move(g->offer);
      const auto serial = ++self->state.serial;
      self->state.published[rid] = serial;
      self->delayed_send(self, self->state.parts.lease, tick_atom_v, rid, serial);
    }
    entry->reply.deliver(std::move(entry->out));
  };
  for (const auto& p : st.parts.pools) {
    self->request(p, std::chrono::seconds(30), publish_atom_v, rid)
        .then(
            [g, done](transfer_offer& part) {
              if (auto ok = g->offer.pub.merge(part.pub); !ok && g->failed.empty())
                g->failed = ok.error().message();
              g->offer.kv_sums.insert(g->offer.kv_sums.end(), part.kv_sums.begin(),
                                      part.kv_sums.end());
              g->offer.slot_sums.insert(g->offer.slot_sums.end(), part.slot_sums.begin(),
                                        part.slot_sums.end());
              if (--g->left == 0)
                done();
            },
            [self, g, done](caf::error& e) {
              if (g->failed.empty())
                g->failed = self->system().render(e);
              if (--g->left == 0)
                done();
            });
  }
  // After the publish requests in each pool's mailbox: the holds keep what
  // was published.
  release_in_pools(self, rid);
}

// A test hook: MSTAR_TEST_PREFILL_HOLD_MS=N holds every prefill that ends in
// a handoff (held state, ended by the one-token cap) N ms before it is
// published and answered, and logs it, so a test can kill a prefill node
// while the router still waits for it; 0 when unset.
std::chrono::milliseconds prefill_hold() {
  static const auto ms = [] {
    const char* v = std::getenv("MSTAR_TEST_PREFILL_HOLD_MS");
    return std::chrono::milliseconds(v == nullptr ? 0 : std::strtol(v, nullptr, 10));
  }();
  return ms;
}

void relay(self_ptr self, engine::delta d) {
  auto& st = self->state;
  if (auto it = st.prefills.find(d.id); it != st.prefills.end()) {
    const bool last = d.finished.has_value();
    const bool capped = d.finished == engine::finish_reason::length;
    const auto rid = d.id;
    if (last && it->second.held && capped && !it->second.hold_done && prefill_hold().count() > 0) {
      it->second.hold_done = true;
      spdlog::info(
          "request {}: prefill done, held {} ms before its handoff "
          "(MSTAR_TEST_PREFILL_HOLD_MS)",
          rid, prefill_hold().count());
      self->delayed_send(self, prefill_hold(), relay_atom_v, std::move(d));
      return;
    }
    it->second.out.deltas.push_back(std::move(d));
    if (!last)
      return;
    auto entry = std::move(it->second);
    st.prefills.erase(it);
    if (entry.held && capped && !st.parts.pools.empty()) {
      publish_then_reply(self, std::move(entry), rid);
      return;
    }
    if (entry.held)
      release_in_pools(self, rid);
    entry.reply.deliver(std::move(entry.out));
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

// Runs `spec` here (its prompt adopted or not). A cancel that came while
// the prompt was being adopted follows it (the conductor then ends it at
// once, even mid-tokenization).
void submit(self_ptr self, engine::request_spec spec) {
  auto& st = self->state;
  auto it = st.decodes.find(spec.id);
  const bool cancelled = it != st.decodes.end() && it->second.cancelled;
  const auto id = spec.id;
  caf::anon_send(st.parts.conductor, submit_atom_v, std::move(spec), st.sink);
  if (cancelled)
    caf::anon_send(st.parts.conductor, cancel_atom_v, id);
}

// Gives back what an adoption took, then recomputes the prompt here.
void recompute(self_ptr self, engine::request_spec spec, const std::string& why,
               caf::typed_response_promise<bool> rp) {
  spdlog::warn("request {}: adopting its prompt failed ({}); recomputing it", spec.id, why);
  ++self->state.transfers.failed;
  tell_pools(self, abort_atom_v, spec.id);
  submit(self, std::move(spec));
  rp.deliver(false);
}

// Adopts `offer` in every pool, reads the missing bytes, finishes the
// adoption, then runs the request with its prompt in place.
void adopt_then_submit(self_ptr self, engine::request_spec spec, transfer_offer offer,
                       caf::typed_response_promise<bool> rp) {
  auto& st = self->state;
  struct gather {
    engine::adoption adopted;
    std::size_t left = 0;
    std::string failed;
  };
  auto g = std::make_shared<gather>();
  g->left = st.parts.pools.size();
  auto sp = std::make_shared<engine::request_spec>(std::move(spec));
  auto of = std::make_shared<transfer_offer>(std::move(offer));
  auto pulled = [self, sp, rp, g](const pull_result& moved) mutable {
    auto& t = self->state.transfers;
    ++t.pulls;
    t.mapped_pulls += moved.mapped ? 1 : 0;
    t.device_pulls += moved.device ? 1 : 0;
    t.bytes += moved.bytes;
    t.micros += moved.took.count();
    t.copy_micros += moved.copy.count();
    t.verify_micros += moved.verify.count();
    for (const auto& [label, s] : g->adopted.streams) {
      if (s.kv) {
        t.pages_fetched += static_cast<std::int64_t>(s.kv->fetch.size() + s.kv->end_fetch.size());
        t.pages_local += s.kv->adopted;
      }
      if (s.recurrent)
        t.slots_fetched += 1 + static_cast<std::int64_t>(s.recurrent->checkpoints.size());
    }
    spdlog::debug("request {}: pulled {} bytes in {} us{}", sp->id, moved.bytes, moved.took.count(),
                  moved.mapped ? " (mapped segment)" : "");
    auto left = std::make_shared<std::size_t>(self->state.parts.pools.size());
    auto failed = std::make_shared<std::string>();
    for (const auto& p : self->state.parts.pools) {
      self->request(p, std::chrono::seconds(30), finish_atom_v, sp->id)
          .then(
              [self, sp, rp, left, failed](bool) mutable {
                if (--*left > 0)
                  return;
                if (!failed->empty()) {
                  recompute(self, std::move(*sp), *failed, rp);
                  return;
                }
                submit(self, std::move(*sp));
                rp.deliver(true);
              },
              [self, sp, rp, left, failed](caf::error& e) mutable {
                *failed = self->system().render(e);
                if (--*left == 0)
                  recompute(self, std::move(*sp), *failed, rp);
              });
    }
  };
  auto adopted = [self, g, sp, of, rp, pulled]() mutable {
    if (!g->failed.empty()) {
      recompute(self, std::move(*sp), g->failed, rp);
      return;
    }
    pull_order order;
    order.arenas = of->arenas;
    order.kv_sums = of->kv_sums;
    order.slot_sums = of->slot_sums;
    order.timeout = self->state.parts.transfer_timeout;
    for (const auto& [label, s] : g->adopted.streams) {
      if (s.kv) {
        for (const auto& pp : s.kv->fetch)
          order.pages.push_back({pp.remote, pp.local});
        for (const auto& pp : s.kv->end_fetch)
          order.pages.push_back({pp.remote, pp.local});
      }
      if (s.recurrent) {
        order.slots.push_back({s.recurrent->remote_slot, s.recurrent->local_slot});
        for (const auto& c : s.recurrent->checkpoints)
          order.slots.push_back({c.remote, c.local});
      }
    }
    self->request(self->state.parts.transfer, self->state.parts.transfer_timeout * 2, pull_atom_v,
                  std::move(order))
        .then(pulled, [self, sp, rp](caf::error& e) mutable {
          recompute(self, std::move(*sp), self->system().render(e), rp);
        });
  };
  for (const auto& p : st.parts.pools) {
    self->request(p, std::chrono::seconds(30), adopt_atom_v, sp->id, of->pub)
        .then(
            [g, adopted](engine::adoption& part) mutable {
              if (auto ok = g->adopted.merge(part); !ok && g->failed.empty())
                g->failed = ok.error().message();
              if (--g->left == 0)
                adopted();
            },
            [self, g, adopted](caf::error& e) mutable {
              if (g->failed.empty())
                g->failed = self->system().render(e);
              if (--g->left == 0)
                adopted();
            });
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
  auto busy = [self](const engine::request_id& id) {
    return self->state.prefills.contains(id) || self->state.decodes.contains(id);
  };
  return {
      [self, busy](prefill_atom, engine::request_spec spec) -> caf::result<handoff> {
        auto& st = self->state;
        if (spec.sampling.n != 1)
          return caf::make_error(caf::sec::invalid_argument, "a handoff has one sample (n = 1)");
        if (busy(spec.id)) {
          return caf::make_error(caf::sec::invalid_argument,
                                 "request " + spec.id + " is already on node " + st.parts.name);
        }
        unpublish(self, spec.id);  // an earlier run of the same id, not yet let go
        auto& entry = st.prefills[spec.id];
        entry.out.node = st.parts.name;
        entry.held = static_cast<bool>(st.parts.transfer);
        entry.reply = self->make_response_promise<handoff>();
        caf::anon_send(st.parts.conductor, submit_atom_v, std::move(spec), st.sink, entry.held);
        return entry.reply;
      },
      [self, busy](decode_atom, engine::request_spec spec, caf::actor router, std::uint64_t ticket,
                   transfer_offer offer) -> caf::result<bool> {
        auto& st = self->state;
        if (busy(spec.id)) {
          return caf::make_error(caf::sec::invalid_argument,
                                 "request " + spec.id + " is already on node " + st.parts.name);
        }
        watch(self, router);
        st.decodes[spec.id] = {std::move(router), ticket, std::max(1, spec.sampling.n)};
        if (offer.empty() || !st.parts.transfer || st.parts.pools.empty()) {
          submit(self, std::move(spec));
          return false;
        }
        auto rp = self->make_response_promise<bool>();
        adopt_then_submit(self, std::move(spec), std::move(offer), rp);
        return rp;
      },
      [self](unpublish_atom, const std::string& id) { unpublish(self, id); },
      [self](tick_atom, const std::string& id, std::uint64_t serial) {
        // The lease is over: whoever was to read the state has had its time.
        auto it = self->state.published.find(id);
        if (it != self->state.published.end() && it->second == serial)
          unpublish(self, id);
      },
      [self](cancel_atom, const std::string& id) {
        if (auto it = self->state.decodes.find(id); it != self->state.decodes.end())
          it->second.cancelled = true;  // in case it is still being adopted
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
                  total->transfers = self->state.transfers;
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
