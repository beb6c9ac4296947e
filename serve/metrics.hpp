#pragma once

// The server's Prometheus metrics (text exposition format 0.0.4), names
// prefixed `mstar:`: requests by finish reason, HTTP responses by status,
// token counters, prefix-cache queried / hit tokens, and histograms of time
// to first token, inter-token latency and end-to-end latency. Gauges of the
// engine (running / waiting requests, KV pages, recurrent slots) come from
// the runtime's counters at scrape time.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "serve/engine_port.hpp"

namespace mstar::serve {

class generation;

/// A cumulative histogram with fixed upper bounds (seconds).
class histogram {
 public:
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  /// `name_bucket{le=...}`, `name_sum`, `name_count` lines.
  void render(std::string& out, const std::string& name, const std::string& help) const;
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> buckets_;  ///< per bound, not cumulative
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class metrics {
 public:
  metrics();
  /// A generation that ended (any finish reason).
  void finished(const generation& g);
  /// One HTTP response sent with `status`.
  void responded(int status);
  /// The exposition text; `engine` null when the runtime did not answer.
  [[nodiscard]] std::string render(const engine_gauges* engine) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> finished_;  ///< by finish reason
  std::map<int, std::uint64_t> responses_;         ///< by HTTP status
  std::uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::uint64_t images_ = 0;  ///< images of ended chat requests
  std::uint64_t cache_queried_ = 0, cache_hit_ = 0;
  histogram ttft_, itl_, e2e_;
};

}  // namespace mstar::serve
