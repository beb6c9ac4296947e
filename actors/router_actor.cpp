#include "actors/router_actor.hpp"

#include <fmt/format.h>
#include <limits>
#include <map>

#include "actors/conductor_actor.hpp"

namespace mstar::actors {
namespace {

constexpr std::size_t no_node = std::numeric_limits<std::size_t>::max();

/// Where one request is and what its client has seen.
struct route {
  engine::request_spec spec;  ///< as submitted (id set)
  sink_ptr sink;
  std::vector<engine::token_id> generated;  ///< streamed to the client so far
  std::size_t node = no_node;               ///< the node it runs on
  bool prefilling = false;
  bool cancelled = false;
  std::int64_t cached = -1;  ///< prompt tokens cached where the prompt ran (-1: not known)
  std::int32_t reroutes = 0;
  std::int32_t unfinished = 1;  ///< samples still open
  std::uint64_t attempt = 0;    ///< bumps at every dispatch: older replies are stale
  /// The id the request runs under on its node: "<id>#<attempt>", new at
  /// every dispatch, so a node never meets an id it may still be running
  /// from an earlier dispatch (one whose node the router took for dead).
  std::string wire;
  std::string published_as;  ///< the wire id `offer`'s state is published under
  std::string last_failure;  ///< why it was last re-routed
  bool parked = false;       ///< waiting for a node that can take it
  transfer_offer offer;      ///< the prefill node's published state, until a decode node takes it
  std::size_t publisher = no_node;  ///< the node holding `offer`'s state under a lease
};

struct member {
  node_actor handle;
  router_node info;
  /// Wire ids of requests moved off the node when it was taken for dead:
  /// if the same node joins again (a dropped link, not a crash), they are
  /// cancelled there, so nothing runs on for nobody.
  std::vector<std::string> abandoned;
};

struct router_state {
  router_options options;
  std::vector<member> nodes;
  std::map<engine::request_id, route> routes;
  std::map<std::string, engine::request_id> wires;  ///< wire id -> request
  router_stats counters;
  static inline const char* name = "mstar.router";
};

using self_ptr = caf::stateful_actor<router_state>*;

bool can_prefill(const router_node& n) {
  return n.alive && (n.role == "prefill" || n.role == "both");
}
bool can_decode(const router_node& n) {
  return n.alive && (n.role == "decode" || n.role == "both");
}

// The least loaded live node `fits` accepts, preferring role `first`.
template <class Fits>
std::size_t pick(const router_state& st, Fits fits, std::string_view first) {
  std::size_t best = no_node;
  auto better = [&](std::size_t i) {
    if (best == no_node)
      return true;
    const auto& a = st.nodes[i].info;
    const auto& b = st.nodes[best].info;
    const bool a_first = a.role == first, b_first = b.role == first;
    if (a_first != b_first)
      return a_first;
    return a.outstanding < b.outstanding;
  };
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    if (fits(st.nodes[i].info) && better(i))
      best = i;
  }
  return best;
}

// Whether the deployment splits prefill from decode right now.
bool split(const router_state& st) {
  bool prefill_only = false, decoder = false;
  for (const auto& m : st.nodes) {
    prefill_only = prefill_only || (m.info.alive && m.info.role == "prefill");
    decoder = decoder || can_decode(m.info);
  }
  return prefill_only && decoder;
}

void leave_node(self_ptr self, route& r) {
  if (r.node != no_node && r.node < self->state.nodes.size()) {
    auto& n = self->state.nodes[r.node].info;
    n.outstanding = std::max<std::int64_t>(0, n.outstanding - 1);
  }
  r.node = no_node;
}

// The prefill node may let go of what it published for the request.
void let_go(self_ptr self, route& r) {
  if (r.publisher != no_node && self->state.nodes[r.publisher].info.alive)
    self->send(self->state.nodes[r.publisher].handle, unpublish_atom_v, r.published_as);
  r.publisher = no_node;
  r.published_as.clear();
  r.offer = {};
}

// A new dispatch of request `id`: the next attempt and the wire id it runs
// under (replies and deltas of earlier dispatches are stale from now on).
std::uint64_t next_dispatch(self_ptr self, const engine::request_id& id, route& r) {
  auto& st = self->state;
  if (!r.wire.empty())
    st.wires.erase(r.wire);
  const auto attempt = ++r.attempt;
  r.wire = fmt::format("{}#{}", id, attempt);
  st.wires[r.wire] = id;
  return attempt;
}

void finish(self_ptr self, const engine::request_id& id) {
  auto it = self->state.routes.find(id);
  if (it == self->state.routes.end())
    return;
  let_go(self, it->second);
  leave_node(self, it->second);
  if (!it->second.wire.empty())
    self->state.wires.erase(it->second.wire);
  self->state.routes.erase(it);
  --self->state.counters.in_flight;
}

// Ends every open sample of the request with `reason` (and `why` for an error).
void end(self_ptr self, const engine::request_id& id, engine::finish_reason reason,
         const std::string& why) {
  auto it = self->state.routes.find(id);
  if (it == self->state.routes.end())
    return;
  for (std::int32_t i = 0; i < it->second.unfinished; ++i) {
    auto d = error_delta(id, why);
    d.index = i;
    d.finished = reason;
    if (reason != engine::finish_reason::error)
      d.error.clear();
    it->second.sink->push(std::move(d));
  }
  finish(self, id);
}

void fail(self_ptr self, const engine::request_id& id, const std::string& why) {
  end(self, id, engine::finish_reason::error, why);
}

void dispatch(self_ptr self, const engine::request_id& id);

// The request's node failed it or went away: run it elsewhere, resumed
// after what its client has.
void reroute(self_ptr self, const engine::request_id& id, const std::string& why) {
  auto it = self->state.routes.find(id);
  if (it == self->state.routes.end())
    return;
  auto& r = it->second;
  leave_node(self, r);
  r.last_failure = why;
  if (r.cancelled) {
    end(self, id, engine::finish_reason::cancelled, {});
    return;
  }
  if (++r.reroutes > self->state.options.max_reroutes) {
    fail(self, id, fmt::format("gave up after {} re-routes; last: {}", r.reroutes - 1, why));
    return;
  }
  ++self->state.counters.reroutes;
  dispatch(self, id);
}

void on_node_error(self_ptr self, const engine::request_id& id, std::uint64_t attempt,
                   const std::string& node, caf::error& e) {
  auto it = self->state.routes.find(id);
  if (it == self->state.routes.end() || it->second.attempt != attempt)
    return;  // stale: the request moved on already
  reroute(self, id, fmt::format("node {} failed it: {}", node, self->system().render(e)));
}

void decode(self_ptr self, const engine::request_id& id) {
  auto& st = self->state;
  auto& r = st.routes.at(id);
  const auto at = pick(st, can_decode, "decode");
  if (at == no_node) {
    if (!r.parked && st.options.wait_for_node.count() > 0) {
      // Wait for a node to join (mstar-launch restarts the ones that die).
      r.parked = true;
      self->delayed_send(self, st.options.wait_for_node, tick_atom_v, id, ++r.attempt);
      return;
    }
    fail(self, id,
         r.last_failure.empty() ? "no node of the deployment can decode"
                                : "no node that can decode is left (" + r.last_failure + ")");
    return;
  }
  r.parked = false;
  const auto attempt = next_dispatch(self, id, r);
  auto spec = r.spec;
  spec.id = r.wire;
  spec.generated = r.generated;
  r.node = at;
  r.prefilling = false;
  auto& m = st.nodes[at];
  ++m.info.outstanding;
  auto offer = std::move(r.offer);  // a re-route recomputes instead
  r.offer = {};
  self->request(m.handle, std::chrono::seconds(120), decode_atom_v, std::move(spec),
                caf::actor{self}, attempt, std::move(offer))
      .then(
          [self, id](bool adopted) {
            auto it = self->state.routes.find(id);
            if (it == self->state.routes.end())
              return;
            if (adopted)
              ++self->state.counters.adopted;
            let_go(self, it->second);  // the decode node is done with it
          },
          [self, id, attempt, name = m.info.name](caf::error& e) {
            if (auto it = self->state.routes.find(id); it != self->state.routes.end())
              let_go(self, it->second);
            on_node_error(self, id, attempt, name, e);
          });
}

void on_handoff(self_ptr self, const engine::request_id& id, std::uint64_t attempt, handoff h) {
  auto& st = self->state;
  auto it = st.routes.find(id);
  if (it == st.routes.end() || it->second.attempt != attempt)
    return;
  auto& r = it->second;
  r.publisher = h.offer.empty() ? no_node : r.node;
  r.published_as = r.publisher == no_node ? std::string{} : r.wire;
  r.offer = std::move(h.offer);
  leave_node(self, r);
  const auto max_tokens = r.spec.stop.max_tokens;
  bool ended = false;
  for (auto& d : h.deltas) {
    d.id = id;
    r.generated.insert(r.generated.end(), d.tokens.begin(), d.tokens.end());
    if (d.finished) {
      r.cached = d.counts.cached_tokens;
      // Ended by the one-token cap, not by the request's own rules.
      const bool capped = *d.finished == engine::finish_reason::length &&
                          static_cast<std::int64_t>(r.generated.size()) < max_tokens;
      if (capped && r.cancelled) {
        d.finished = engine::finish_reason::cancelled;
        ended = true;
      } else if (capped) {
        d.finished.reset();
        d.counts = {};
      } else {
        ended = true;
      }
    }
    if (d.finished || !d.tokens.empty() || !d.text.empty())
      r.sink->push(std::move(d));
  }
  if (ended) {
    finish(self, id);
    return;
  }
  ++st.counters.handoffs;
  decode(self, id);
}

void prefill(self_ptr self, const engine::request_id& id) {
  auto& st = self->state;
  auto& r = st.routes.at(id);
  const auto at = pick(st, can_prefill, "prefill");
  if (at == no_node) {
    decode(self, id);  // a decode-capable node runs it whole
    return;
  }
  const auto attempt = next_dispatch(self, id, r);
  auto spec = r.spec;
  spec.id = r.wire;
  spec.stop.max_tokens = 1;
  r.node = at;
  r.prefilling = true;
  auto& m = st.nodes[at];
  ++m.info.outstanding;
  self->request(m.handle, st.options.prefill_timeout, prefill_atom_v, std::move(spec))
      .then([self, id, attempt](handoff& h) { on_handoff(self, id, attempt, std::move(h)); },
            [self, id, attempt, name = m.info.name](caf::error& e) {
              on_node_error(self, id, attempt, name, e);
            });
}

void dispatch(self_ptr self, const engine::request_id& id) {
  auto& st = self->state;
  auto& r = st.routes.at(id);
  // A handoff carries one sequence's first token; n > 1, a request that
  // already has tokens, or one that wants none runs whole where it decodes.
  const bool handoff =
      split(st) && r.spec.sampling.n == 1 && r.generated.empty() && r.spec.stop.max_tokens > 1;
  if (handoff)
    prefill(self, id);
  else
    decode(self, id);
}

// A node joined: the parked requests try again.
void wake_parked(self_ptr self) {
  std::vector<engine::request_id> parked;
  for (const auto& [id, r] : self->state.routes) {
    if (r.parked)
      parked.push_back(id);
  }
  for (const auto& id : parked) {
    auto it = self->state.routes.find(id);
    if (it == self->state.routes.end())
      continue;
    it->second.parked = false;
    dispatch(self, id);
  }
}

void on_delta(self_ptr self, std::uint64_t ticket, engine::delta d) {
  auto& st = self->state;
  auto w = st.wires.find(d.id);
  if (w == st.wires.end())
    return;  // from a dispatch the request has left, or a finished request
  auto it = st.routes.find(w->second);
  if (it == st.routes.end())
    return;
  auto& r = it->second;
  if (r.node == no_node || r.prefilling || ticket != r.attempt)
    return;  // from a dispatch the request has left
  d.id = it->first;
  r.generated.insert(r.generated.end(), d.tokens.begin(), d.tokens.end());
  const bool last = d.finished && --r.unfinished == 0;
  if (d.finished && r.cached >= 0)
    d.counts.cached_tokens = r.cached;
  r.sink->push(std::move(d));
  if (last)
    finish(self, it->first);
}

void on_down(self_ptr self, const caf::down_msg& m) {
  auto& st = self->state;
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    auto& n = st.nodes[i];
    if (n.handle.address() != m.source || !n.info.alive)
      continue;
    n.info.alive = false;
    n.info.exit_reason = self->system().render(m.reason);
    std::vector<engine::request_id> moved;
    for (const auto& [id, r] : st.routes) {
      if (r.node == i) {
        moved.push_back(id);
        n.abandoned.push_back(r.wire);
      }
    }
    for (const auto& id : moved)
      reroute(self, id, fmt::format("node {} left ({})", n.info.name, n.info.exit_reason));
  }
}

caf::behavior router_behavior(self_ptr self, router_options options) {
  self->state.options = options;
  self->set_down_handler([self](const caf::down_msg& m) { on_down(self, m); });
  return {
      [self](join_atom, const caf::actor& untyped, const node_info& info) {
        auto& st = self->state;
        auto handle = caf::actor_cast<node_actor>(untyped);
        router_node n{info.name, info.role, true, 0, {}};
        self->monitor(handle);
        for (auto& m : st.nodes) {
          if (m.info.name == info.name && !m.info.alive) {  // a restarted node
            // When the link dropped but the node ran on, what was moved off
            // it may still run there: stop it (a restarted node knows none).
            for (const auto& wire : m.abandoned)
              self->send(handle, cancel_atom_v, wire);
            m = {handle, n, {}};
            wake_parked(self);
            return;
          }
        }
        st.nodes.push_back({handle, n, {}});
        wake_parked(self);
      },
      [self](tick_atom, const std::string& id, std::uint64_t attempt) {
        // A parked request's wait is over: still no node, it fails.
        auto it = self->state.routes.find(id);
        if (it != self->state.routes.end() && it->second.parked && it->second.attempt == attempt)
          dispatch(self, id);
      },
      [self](submit_atom, engine::request_spec spec, const sink_ptr& sink) {
        auto& st = self->state;
        if (st.routes.contains(spec.id)) {
          sink->push(error_delta(spec.id, "a request with this id is already running"));
          return;
        }
        const auto id = spec.id;
        route r;
        r.unfinished = std::max<std::int32_t>(1, spec.sampling.n);
        r.spec = std::move(spec);
        r.sink = sink;
        st.routes.emplace(id, std::move(r));
        ++st.counters.routed;
        ++st.counters.in_flight;
        dispatch(self, id);
      },
      [self](cancel_atom, const std::string& id) {
        auto& st = self->state;
        auto it = st.routes.find(id);
        if (it == st.routes.end())
          return;
        it->second.cancelled = true;
        if (it->second.node != no_node)
          self->send(st.nodes[it->second.node].handle, cancel_atom_v, it->second.wire);
        else if (it->second.parked)
          end(self, id, engine::finish_reason::cancelled, {});
      },
      [self](delta_atom, std::uint64_t ticket, engine::delta d) {
        on_delta(self, ticket, std::move(d));
      },
      [self](stats_atom) {
        auto s = self->state.counters;
        for (const auto& m : self->state.nodes)
          s.nodes.push_back(m.info);
        return s;
      },
  };
}

}  // namespace

caf::actor spawn_router(caf::actor_system& sys, router_options options) {
  return sys.spawn(router_behavior, options);
}

}  // namespace mstar::actors
