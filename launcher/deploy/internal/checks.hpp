#pragma once

// The rules that span several keys: unique names, free ports, roles, front.

#include "core/result.hpp"
#include "launcher/deploy/deploy_config.hpp"

namespace mstar::deploy::internal {

/// Whether `a` and `b` name one machine: equal ignoring case, or both loopback.
[[nodiscard]] bool same_host(std::string_view a, std::string_view b);

/// Checks a deployment whose keys each passed their own checks and whose
/// defaults are filled in (front, node devices). The error names the key path
/// of the later of two clashing keys.
[[nodiscard]] result<void> check_deployment(const deployment_config& config);

}  // namespace mstar::deploy::internal
