#include "resources/windowing/window_schedule.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

namespace mstar::resources {

result<window_schedule> window_schedule::make(std::int64_t total_units, std::int64_t window_units,
                                              std::int64_t context_units,
                                              std::int64_t overlap_units) {
  if (total_units < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("total_units must be >= 1, got {}", total_units));
  }
  if (window_units < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("window_units must be >= 1, got {}", window_units));
  }
  if (overlap_units < 0 || overlap_units >= window_units) {
    return make_error(errc::invalid_argument,
                      fmt::format("overlap_units must be in [0, window_units), got {} with "
                                  "window_units={}",
                                  overlap_units, window_units));
  }
  if (context_units < 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("context_units must be >= 0, got {}", context_units));
  }
  const std::int64_t stride = window_units - overlap_units;
  // total - window + stride - 1 <= total - 1, so the ceiling cannot overflow.
  const std::int64_t num_windows =
      total_units <= window_units ? 1 : 1 + (total_units - window_units + stride - 1) / stride;
  return window_schedule{total_units, window_units, context_units, overlap_units, num_windows};
}

window_schedule::window_schedule(std::int64_t total_units, std::int64_t window_units,
                                 std::int64_t context_units, std::int64_t overlap_units,
                                 std::int64_t num_windows) noexcept
    : total_units_(total_units),
      window_units_(window_units),
      context_units_(context_units),
      overlap_units_(overlap_units),
      num_windows_(num_windows) {}

window_plan window_schedule::plan_at(std::int64_t index) const noexcept {
  const std::int64_t start = index * stride();
  // start < total, so this cannot overflow where start + window might.
  const std::int64_t end = start + std::min(window_units_, total_units_ - start);
  return window_plan{index, start, end, index > 0 ? overlap_units_ : 0};
}

std::vector<window_plan> window_schedule::windows() const {
  std::vector<window_plan> plans;
  plans.reserve(static_cast<std::size_t>(num_windows_));
  for (std::int64_t i = 0; i < num_windows_; ++i) {
    plans.push_back(plan_at(i));
  }
  return plans;
}

result<window_plan> window_schedule::window(std::int64_t index) const {
  if (index < 0 || index >= num_windows_) {
    return make_error(errc::out_of_range,
                      fmt::format("window index must be in [0, num_windows), got {} with "
                                  "num_windows={}",
                                  index, num_windows_));
  }
  return plan_at(index);
}

result<std::int64_t> window_schedule::released_end(std::int64_t index) const {
  if (context_units_ == 0) {
    return std::int64_t{0};
  }
  auto plan = window(index);
  if (!plan) {
    return plan.error();
  }
  return std::max<std::int64_t>(0, plan->commit_end() - context_units_);
}

result<std::optional<retention_policy>> window_schedule::retention(
    std::int64_t tokens_per_unit, std::int64_t prefix_tokens) const {
  if (tokens_per_unit < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("tokens_per_unit must be >= 1, got {}", tokens_per_unit));
  }
  if (context_units_ == 0) {
    return std::optional<retention_policy>{};
  }
  if (context_units_ > std::numeric_limits<std::int64_t>::max() / tokens_per_unit) {
    return make_error(errc::invalid_argument,
                      fmt::format("context_units * tokens_per_unit overflows int64: {} * {}",
                                  context_units_, tokens_per_unit));
  }
  auto policy = retention_policy::make(context_units_ * tokens_per_unit, prefix_tokens);
  if (!policy) {
    return policy.error();
  }
  return std::optional<retention_policy>{std::move(*policy)};
}

}  // namespace mstar::resources
