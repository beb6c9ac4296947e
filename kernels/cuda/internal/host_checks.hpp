#pragma once

// Host-side shape checks for the launchers: the CPU reference's
// `check_view` rules, reduced to pass/fail (a launcher returns
// cudaErrorInvalidValue; callers wanting the message run the CPU check).

#include <initializer_list>

#include "core/result.hpp"

namespace mstar::kernels::cuda::detail {

/// Whether every check passed.
inline bool all_ok(std::initializer_list<result<void>> checks) {
  for (const auto& check : checks) {
    if (!check)
      return false;
  }
  return true;
}

}  // namespace mstar::kernels::cuda::detail
