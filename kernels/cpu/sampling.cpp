#include "kernels/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace mstar::kernels {

namespace {

std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  x += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = x;
  z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31U);
}

std::uint64_t rotl(std::uint64_t x, unsigned k) noexcept {
  return (x << k) | (x >> (64U - k));
}

result<void> validate(const sampling_params& p) {
  if (p.logits.shape[0] <= 0 || p.logits.data == nullptr) {
    return make_error(errc::invalid_argument, "logits: empty row");
  }
  if (!(p.temperature >= 0.0F) || std::isinf(p.temperature)) {
    return make_error(errc::invalid_argument,
                      "temperature: " + std::to_string(p.temperature) + " must be finite and >= 0");
  }
  if (p.top_k < 0) {
    return make_error(errc::invalid_argument,
                      "top_k: " + std::to_string(p.top_k) + " must be >= 0 (0 keeps all)");
  }
  if (!(p.top_p > 0.0F && p.top_p <= 1.0F)) {
    return make_error(errc::invalid_argument,
                      "top_p: " + std::to_string(p.top_p) + " must be in (0, 1]");
  }
  bool any_finite = false;
  for (std::int64_t i = 0; i < p.logits.shape[0]; ++i) {
    const float v = p.logits(i);
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
      return make_error(errc::invalid_argument,
                        "logits[" + std::to_string(i) + "] is " + std::to_string(v));
    }
    any_finite = any_finite || std::isfinite(v);
  }
  if (!any_finite)
    return make_error(errc::invalid_argument, "logits: every entry is -inf");
  return {};
}

std::int32_t argmax(const view<const float, 1>& logits) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < logits.shape[0]; ++i) {
    if (logits(i) > logits(best))
      best = i;  // strict: ties keep the lower id
  }
  return static_cast<std::int32_t>(best);
}

}  // namespace

xoshiro256ss::xoshiro256ss(std::uint64_t seed, std::uint64_t stream) noexcept {
  std::uint64_t mix = stream;
  std::uint64_t x = seed ^ splitmix64(mix);
  for (auto& word : state_)
    word = splitmix64(x);
}

xoshiro256ss xoshiro256ss::from_state(const std::array<std::uint64_t, 4>& state) noexcept {
  xoshiro256ss g{0};
  g.state_ = state;
  return g;
}

std::uint64_t xoshiro256ss::next() noexcept {
  const std::uint64_t out = rotl(state_[1] * 5U, 7U) * 9U;
  const std::uint64_t t = state_[1] << 17U;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45U);
  return out;
}

double xoshiro256ss::uniform() noexcept {
  return static_cast<double>(next() >> 11U) * 0x1.0p-53;
}

result<std::vector<token_probability>> sampling_distribution(const sampling_params& p) {
  if (auto ok = validate(p); !ok)
    return ok.error();
  if (p.temperature == 0.0F || p.top_k == 1)
    return std::vector{token_probability{argmax(p.logits), 1.0}};

  const std::int64_t vocab = p.logits.shape[0];
  std::vector<token_probability> kept;
  kept.reserve(static_cast<std::size_t>(vocab));
  for (std::int64_t i = 0; i < vocab; ++i) {
    if (std::isfinite(p.logits(i)))
      kept.push_back({static_cast<std::int32_t>(i), p.logits(i)});
  }
  // Order by logit, ties to the lowest id, so every cut below is deterministic.
  const auto before = [](const token_probability& a, const token_probability& b) {
    return a.probability != b.probability ? a.probability > b.probability : a.id < b.id;
  };
  const std::size_t k =
      p.top_k == 0 ? kept.size() : std::min(kept.size(), static_cast<std::size_t>(p.top_k));
  std::partial_sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(k), kept.end(),
                    before);
  kept.resize(k);

  const double max = kept.front().probability;
  double total = 0.0;
  for (auto& c : kept) {
    c.probability = std::exp((c.probability - max) / double{p.temperature});
    total += c.probability;
  }
  double mass = 0.0;
  std::size_t keep = kept.size();
  for (std::size_t i = 0; i < kept.size(); ++i) {
    kept[i].probability /= total;
    mass += kept[i].probability;
    if (mass >= double{p.top_p} && keep == kept.size())
      keep = i + 1;
  }
  kept.resize(keep);
  double kept_mass = 0.0;
  for (const auto& c : kept)
    kept_mass += c.probability;
  for (auto& c : kept)
    c.probability /= kept_mass;
  return kept;
}

result<std::int32_t> sample(const sampling_params& p) {
  auto dist = sampling_distribution(p);
  if (!dist)
    return dist.error();
  const auto& candidates = *dist;
  const double target = xoshiro256ss{p.seed, p.counter}.uniform();
  double cumulative = 0.0;
  for (const auto& c : candidates) {
    cumulative += c.probability;
    if (target < cumulative)
      return c.id;
  }
  return candidates.back().id;  // rounding left the total a hair below 1
}

}  // namespace mstar::kernels
