#pragma once

// What every CPU forward (models/*_cpu.cpp, the vision tower) calls its
// kernels through: shapes are checked where a step is built, so a kernel
// refusing one is a bug.

#include <cassert>
#include <cstdint>
#include <vector>

#include "core/result.hpp"
#include "kernels/math.hpp"

namespace mstar::models::internal {

/// A kernel on well-formed shapes cannot fail; a failure is a bug here.
inline void must(const result<void>& r) {
  assert(r.has_value());
  (void)r;
}

/// out [t, n] = x [t, k] * w [n, k]^T.
inline void linear(const float* x, std::int64_t t, std::int64_t k, const std::vector<float>& w,
                   std::int64_t n, float* out) {
  must(kernels::linear(
      {kernels::matrix(x, t, k), kernels::matrix(w.data(), n, k), {}, kernels::matrix(out, t, n)}));
}

}  // namespace mstar::models::internal
