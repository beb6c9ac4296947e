#include "engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "kernels/sampling.hpp"

namespace mstar::engine {

void apply_penalties(std::span<float> logits, const sampling_params& p,
                     const std::unordered_map<token_id, std::int32_t>& counts,
                     std::span<const token_id> prompt) {
  const auto V = logits.size();
  if (p.repetition_penalty != 1.0F) {
    std::unordered_set<token_id> seen(prompt.begin(), prompt.end());
    for (const auto& [id, n] : counts)
      seen.insert(id);
    for (const auto id : seen) {
      if (id >= V)
        continue;
      float& x = logits[id];
      x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0F || p.frequency_penalty != 0.0F) {
    for (const auto& [id, n] : counts) {
      if (id >= V)
        continue;
      logits[id] -= p.frequency_penalty * static_cast<float>(n) + p.presence_penalty;
    }
  }
}

result<draw_result> draw(std::span<const float> logits, const sampling_params& p,
                         std::uint64_t counter) {
  draw_result out;
  auto tok = kernels::sample({kernels::contiguous<const float, 1>(
                                  logits.data(), {static_cast<std::int64_t>(logits.size())}),
                              p.temperature, p.top_k, p.top_p, p.seed, counter});
  if (!tok)
    return tok.error();
  out.id = static_cast<token_id>(*tok);
  if (p.logprobs > 0) {
    // log-softmax of the row as the model scored it (after penalties).
    const float m = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float x : logits)
      sum += std::exp(static_cast<double>(x - m));
    const double lse = static_cast<double>(m) + std::log(sum);
    auto lp = [&](std::size_t i) { return static_cast<float>(logits[i] - lse); };
    out.chosen = {out.id, lp(out.id)};
    const auto k = std::min<std::size_t>(static_cast<std::size_t>(p.logprobs), logits.size());
    std::vector<std::uint32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0U);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](std::uint32_t a, std::uint32_t b) {
                        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                      });
    for (std::size_t i = 0; i < k; ++i)
      out.top.push_back({idx[i], lp(idx[i])});
  }
  return out;
}

}  // namespace mstar::engine
