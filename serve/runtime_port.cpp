#include "serve/runtime_port.hpp"

#include "actors/runtime.hpp"

namespace mstar::serve {

void runtime_port::submit(engine::request_spec spec,
                          std::function<void(const engine::delta&)> on_delta) {
  (void)rt_.submit(std::move(spec), std::move(on_delta));
}

void runtime_port::cancel(const engine::request_id& id) {
  rt_.cancel(id);
}

std::optional<engine_gauges> runtime_port::gauges() {
  auto s = rt_.stats();
  if (!s)
    return std::nullopt;
  auto g = gauges_of(*s);
  return g;
}

}  // namespace mstar::serve
