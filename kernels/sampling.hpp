#pragma once

// Token sampling over one row of logits: greedy, temperature, top-k, top-p.
// CPU reference (kernels/cpu/sampling.cpp); the CUDA issue adds a batched
// launcher over the same params and the same generator.

#include <array>
#include <cstdint>
#include <vector>

#include "core/result.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::kernels {

/// xoshiro256** (Blackman and Vigna), seeded through splitmix64: small, fast
/// and identical on every platform, so a seed reproduces a sample anywhere.
class xoshiro256ss {
 public:
  /// The generator for draw stream `stream` of seed `seed`; distinct pairs
  /// give unrelated sequences.
  explicit xoshiro256ss(std::uint64_t seed, std::uint64_t stream = 0) noexcept;

  /// The generator in exactly `state` (no seeding), for the published
  /// reference vectors; an all-zero state stays zero.
  [[nodiscard]] static xoshiro256ss from_state(const std::array<std::uint64_t, 4>& state) noexcept;

  /// The next 64 random bits.
  std::uint64_t next() noexcept;

  /// A uniform double in [0, 1), from the top 53 bits of `next()`.
  double uniform() noexcept;

 private:
  std::array<std::uint64_t, 4> state_{};
};

/// Operands and settings of `sample`.
struct sampling_params {
  view<const float, 1> logits;  ///< [V] float32 scores of one row; -inf masks a token
  float temperature = 0.0F;     ///< >= 0; 0 is greedy (argmax, ties to the lowest id)
  std::int32_t top_k = 0;       ///< keep the k most likely tokens; 0 keeps all
  float top_p = 1.0F;           ///< in (0, 1]: keep the fewest most likely tokens whose
                                ///< probability sums to at least top_p
  std::uint64_t seed = 0;       ///< the request's seed
  std::uint64_t counter = 0;    ///< which draw of the request this is (tokens sampled so far)
};

/// One candidate token and its probability after every filter.
struct token_probability {
  std::int32_t id = 0;     ///< token id, an index into the logits row
  double probability = 0;  ///< renormalised over the kept candidates
};

/// The distribution `sample` draws from: candidates ordered by probability
/// (ties: lowest id first), after temperature, then top-k, then top-p, then
/// renormalisation. Greedy settings give the single argmax with probability 1.
/// Errors: an empty row, a NaN or +inf logit, no finite logit, or a setting
/// out of its domain (each named).
[[nodiscard]] result<std::vector<token_probability>> sampling_distribution(
    const sampling_params& p);

/// Draws one token id from `sampling_distribution(p)` with the uniform
/// `xoshiro256ss{seed, counter}.uniform()`. A draw depends only on (logits,
/// settings, seed, counter), never on earlier draws, so a request that
/// moves between nodes (or is replayed) samples the same tokens without
/// carrying generator state.
[[nodiscard]] result<std::int32_t> sample(const sampling_params& p);

}  // namespace mstar::kernels
