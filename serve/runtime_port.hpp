#pragma once

// The actors' runtime as the HTTP front end's engine.

#include "serve/engine_port.hpp"

namespace mstar::actors {
class runtime;
}

namespace mstar::serve {

class runtime_port final : public engine_port {
 public:
  explicit runtime_port(actors::runtime& rt) : rt_(rt) {}
  void submit(engine::request_spec spec,
              std::function<void(const engine::delta&)> on_delta) override;
  void cancel(const engine::request_id& id) override;
  [[nodiscard]] std::optional<engine_gauges> gauges() override;

 private:
  actors::runtime& rt_;
};

}  // namespace mstar::serve
