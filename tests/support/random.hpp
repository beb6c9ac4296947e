#pragma once

// Random test inputs drawn from a caller's seeded generator, so a failing
// case replays exactly.

#include <cstddef>
#include <random>
#include <vector>

namespace mstar::test {

/// `n` floats from a normal distribution of mean 0 and standard deviation `scale`.
inline std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale = 1.0F) {
  std::normal_distribution<float> normal(0.0F, scale);
  std::vector<float> v(n);
  for (auto& x : v)
    x = normal(rng);
  return v;
}

}  // namespace mstar::test
