#include "actors/deployment.hpp"

#include <fmt/format.h>

#include "actors/delta_queue.hpp"

namespace mstar::actors {

std::unique_ptr<deployment> deployment::start_in(caf::actor_system& sys, router_options options) {
  auto d = std::unique_ptr<deployment>(new deployment(sys));
  d->router_ = spawn_router(sys, options);
  return d;
}

deployment::~deployment() {
  caf::anon_send_exit(router_, caf::exit_reason::user_shutdown);
}

result<node_info> deployment::join(const node_actor& node, std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys_};
  result<node_info> out = make_error(errc::internal, "no answer");
  self->request(node, timeout, describe_atom_v)
      .receive([&](const node_info& info) { out = info; },
               [&](caf::error& e) {
                 out = make_error(errc::internal,
                                  "a node did not describe itself: " + sys_.render(e));
               });
  if (!out)
    return out;
  self->send(router_, join_atom_v, caf::actor_cast<caf::actor>(node), *out);
  std::lock_guard lock{mutex_};
  nodes_[out->name] = node;  // a restarted node replaces its earlier self
  return out;
}

engine::request_id deployment::name(engine::request_spec& spec) {
  if (spec.id.empty())
    spec.id = fmt::format("req-{}", next_id_.fetch_add(1));
  return spec.id;
}

request_handle deployment::submit(engine::request_spec spec) {
  const auto id = name(spec);
  auto queue = std::make_shared<delta_queue>(std::max<std::int32_t>(1, spec.sampling.n), nullptr);
  caf::anon_send(router_, submit_atom_v, std::move(spec), sink_ptr{queue});
  return request_handle{id, std::move(queue), &router_};
}

engine::request_id deployment::submit(engine::request_spec spec,
                                      std::function<void(const engine::delta&)> on_delta) {
  const auto id = name(spec);
  auto queue = std::make_shared<delta_queue>(std::max<std::int32_t>(1, spec.sampling.n),
                                             std::move(on_delta));
  caf::anon_send(router_, submit_atom_v, std::move(spec), sink_ptr{queue});
  return id;
}

void deployment::cancel(const engine::request_id& id) {
  caf::anon_send(router_, cancel_atom_v, id);
}

result<router_stats> deployment::stats() {
  caf::scoped_actor self{sys_};
  result<router_stats> out = make_error(errc::internal, "no answer");
  self->request(router_, std::chrono::seconds(10), stats_atom_v)
      .receive([&](const router_stats& s) { out = s; },
               [&](caf::error& e) { out = make_error(errc::internal, sys_.render(e)); });
  return out;
}

result<engine_stats> deployment::node_stats() {
  auto routed = stats();
  if (!routed)
    return routed.error();
  std::vector<node_actor> nodes;
  {
    std::lock_guard lock{mutex_};
    for (const auto& n : routed->nodes) {
      if (auto it = nodes_.find(n.name); n.alive && it != nodes_.end())
        nodes.push_back(it->second);
    }
  }
  caf::scoped_actor self{sys_};
  engine_stats total;
  std::int64_t answered = 0;
  for (const auto& n : nodes) {
    self->request(n, std::chrono::seconds(2), stats_atom_v)
        .receive(
            [&](const engine_stats& s) {
              ++answered;
              total.steps += s.steps;
              total.refused_steps += s.refused_steps;
              total.generated_tokens += s.generated_tokens;
              total.preemptions += s.preemptions;
              total.running += s.running;
              total.waiting += s.waiting;
              total.kv_pages += s.kv_pages;
              total.kv_free_pages += s.kv_free_pages;
              total.kv_cached_pages += s.kv_cached_pages;
              total.kv_evictable_pages += s.kv_evictable_pages;
              total.slots += s.slots;
              total.free_slots += s.free_slots;
              total.transfers += s.transfers;
            },
            [](caf::error&) {});  // a node that left counts for nothing
  }
  if (answered == 0 && !nodes.empty())
    return make_error(errc::internal, "no node of the deployment answered");
  return total;
}

}  // namespace mstar::actors
