#pragma once

#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace mstar::test {

/// A seeded source of random test tensors. Construct it inside the test body:
/// it adds the seed to every failure message (SCOPED_TRACE) so a failing case
/// can be replayed.
class random_tensors {
 public:
  explicit random_tensors(std::uint64_t seed)
      : trace_(__FILE__, __LINE__, "seed = " + std::to_string(seed)), engine_(seed) {}

  /// `n` floats uniform in [lo, hi).
  std::vector<float> floats(std::size_t n, float lo = -1.0F, float hi = 1.0F) {
    std::uniform_real_distribution<float> dist{lo, hi};
    std::vector<float> out(n);
    for (auto& v : out)
      v = dist(engine_);
    return out;
  }

  /// `n` ints uniform in [lo, hi].
  std::vector<std::int32_t> ints(std::size_t n, std::int32_t lo, std::int32_t hi) {
    std::uniform_int_distribution<std::int32_t> dist{lo, hi};
    std::vector<std::int32_t> out(n);
    for (auto& v : out)
      v = dist(engine_);
    return out;
  }

  /// The engine, for shuffles.
  std::mt19937_64& engine() { return engine_; }

 private:
  ::testing::ScopedTrace trace_;
  std::mt19937_64 engine_;
};

/// A buffer of `n` NaNs: outputs start poisoned so a kernel that skips an
/// element is caught.
inline std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace mstar::test
