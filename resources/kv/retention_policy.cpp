#include "resources/kv/retention_policy.hpp"

#include <fmt/format.h>

namespace mstar::resources {

result<retention_policy> retention_policy::make(std::int64_t context_budget,
                                                std::int64_t protected_prefix) {
  if (context_budget <= 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("context_budget must be > 0, got {}", context_budget));
  }
  if (protected_prefix < 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("protected_prefix must be >= 0, got {}", protected_prefix));
  }
  return retention_policy{context_budget, protected_prefix};
}

}  // namespace mstar::resources
