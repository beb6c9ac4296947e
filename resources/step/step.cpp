#include "resources/step/step.hpp"

namespace mstar::resources {

const std::string& refusal_message(const admit_refusal& r) {
  return std::visit([](const auto& reason) -> const std::string& { return reason.message; }, r);
}

}  // namespace mstar::resources
