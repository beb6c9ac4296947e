#include "serve/deployment_port.hpp"

#include <algorithm>

#include "actors/deployment.hpp"

namespace mstar::serve {

void deployment_port::submit(engine::request_spec spec,
                             std::function<void(const engine::delta&)> on_delta) {
  (void)d_.submit(std::move(spec), std::move(on_delta));
}

void deployment_port::cancel(const engine::request_id& id) {
  d_.cancel(id);
}

std::optional<engine_gauges> deployment_port::gauges() {
  auto s = d_.node_stats();
  if (!s)
    return std::nullopt;
  auto g = gauges_of(*s);
  if (auto r = d_.stats()) {
    engine_gauges::router_counters rc;
    for (const auto& n : r->nodes)
      rc.nodes_alive += n.alive ? 1 : 0;
    rc.handoffs = r->handoffs;
    rc.adopted = r->adopted;
    rc.reroutes = r->reroutes;
    const auto& t = s->transfers;
    rc.pulls = t.pulls;
    rc.mapped_pulls = t.mapped_pulls;
    rc.failed_adoptions = t.failed;
    rc.pages_fetched = t.pages_fetched;
    rc.pages_local = t.pages_local;
    rc.slots_fetched = t.slots_fetched;
    rc.bytes = t.bytes;
    rc.transfer_seconds = static_cast<double>(t.micros) / 1e6;
    rc.copy_seconds = static_cast<double>(t.copy_micros) / 1e6;
    rc.verify_seconds = static_cast<double>(t.verify_micros) / 1e6;
    g.nodes = std::max<std::int64_t>(1, rc.nodes_alive);
    g.router = rc;
  }
  return g;
}

}  // namespace mstar::serve
