#include "serve/deployment_port.hpp"

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
  return engine_gauges{
      s->running, s->waiting,    s->kv_pages, s->kv_free_pages, s->kv_evictable_pages,
      s->slots,   s->free_slots, s->steps,    s->preemptions};
}

}  // namespace mstar::serve
