#pragma once

#include <cstdint>

#include "core/result.hpp"

namespace mstar::resources {

/// How much committed KV history a stream keeps: the newest `context_budget`
/// tokens behind a protected head of `protected_prefix` tokens. A window
/// commit declares it so the pool can release everything older inside the
/// commit, where no pre-planned step can still address the freed pages.
struct retention_policy {
  /// Committed tokens kept behind the protected head; always > 0, since a
  /// zero budget would release the very span the commit just wrote.
  std::int64_t context_budget = 0;
  /// Leading tokens of the stream (a text prompt, say) that are never
  /// released; always >= 0.
  std::int64_t protected_prefix = 0;

  /// A policy with the given budget and head, or invalid_argument naming the
  /// field when `context_budget <= 0` or `protected_prefix < 0`. The only way
  /// to get a validated policy, so pools may trust the fields.
  [[nodiscard]] static result<retention_policy> make(std::int64_t context_budget,
                                                     std::int64_t protected_prefix);

  friend bool operator==(const retention_policy&, const retention_policy&) = default;
};

}  // namespace mstar::resources
