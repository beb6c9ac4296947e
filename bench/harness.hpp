#pragma once

// A small benchmark harness: every case is measured next to its baseline in
// the same run, interleaved round by round so drift on a shared machine hits
// both alike, and reported as a ratio (ARCHITECTURE.md, Benchmarks).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mstar::bench {

/// One measured case and its baseline.
struct comparison {
  std::string bench;                    ///< benchmark name ("keys")
  std::string name;                     ///< case name ("chain_128_tokens")
  std::string metric;                   ///< what `value` counts ("keys_per_s")
  std::string unit;                     ///< its unit ("1/s")
  std::string baseline;                 ///< what the baseline is ("openssl_sha256")
  double value = 0;                     ///< median rate of the measured code
  double baseline_value = 0;            ///< median rate of the baseline
  std::map<std::string, double> extra;  ///< derived figures (µs per step...)
  [[nodiscard]] double ratio() const { return baseline_value > 0 ? value / baseline_value : 0; }
};

/// Runs `subject` and `baseline` alternately for `rounds` rounds; each call
/// does `items` units of work. Returns the median items per second of each.
template <class Subject, class Baseline>
std::pair<double, double> interleaved_rates(Subject&& subject, Baseline&& baseline, double items,
                                            int rounds) {
  using clock = std::chrono::steady_clock;
  std::vector<double> a, b;
  auto rate = [&](auto&& fn) {
    const auto t0 = clock::now();
    fn();
    const std::chrono::duration<double> dt = clock::now() - t0;
    return items / dt.count();
  };
  subject();  // warm caches and thread-local buffers
  baseline();
  for (int r = 0; r < rounds; ++r) {
    a.push_back(rate(subject));
    b.push_back(rate(baseline));
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return {median(a), median(b)};
}

/// Prints a table for people, or one JSON object per line for tools.
inline void report(const std::vector<comparison>& results, bool as_json) {
  if (as_json) {
    for (const auto& r : results) {
      const nlohmann::json line{{"bench", r.bench},
                                {"case", r.name},
                                {"metric", r.metric},
                                {"value", r.value},
                                {"unit", r.unit},
                                {"baseline", r.baseline},
                                {"baseline_value", r.baseline_value},
                                {"ratio", r.ratio()}};
      nlohmann::json full = line;
      for (const auto& [k, v] : r.extra)
        full[k] = v;
      std::puts(full.dump().c_str());
    }
    return;
  }
  fmt::print("{:<10} {:<24} {:>14} {:>16} {:>14} {:>7}\n", "bench", "case", "value", "baseline",
             "baseline_val", "ratio");
  for (const auto& r : results) {
    fmt::print("{:<10} {:<24} {:>10.4g} {:<3} {:>16} {:>14.4g} {:>7.3f}\n", r.bench, r.name,
               r.value, r.unit, r.baseline, r.baseline_value, r.ratio());
    for (const auto& [k, v] : r.extra)
      fmt::print("{:<10} {:<24} {:>10.4g} {}\n", "", "", v, k);
  }
}

}  // namespace mstar::bench
