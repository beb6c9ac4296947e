#pragma once

// A deployment's router (actors/deployment.hpp) as the HTTP front end's
// engine: the front node of mstar-node serves through it.

#include "serve/engine_port.hpp"

namespace mstar::actors {
class deployment;
}

namespace mstar::serve {

class deployment_port final : public engine_port {
 public:
  explicit deployment_port(actors::deployment& d) : d_(d) {}
  void submit(engine::request_spec spec,
              std::function<void(const engine::delta&)> on_delta) override;
  void cancel(const engine::request_id& id) override;
  /// Every live node's gauges, summed.
  [[nodiscard]] std::optional<engine_gauges> gauges() override;

 private:
  actors::deployment& d_;
};

}  // namespace mstar::serve
