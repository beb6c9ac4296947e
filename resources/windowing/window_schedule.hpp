#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/retention_policy.hpp"

namespace mstar::resources {

/// One window's slice of a windowed generation, in absolute unit indices of
/// the whole sequence. The leading `cond_units` re-pin the previous window's
/// tail as clean conditioning (the chained-mode overlap), so only
/// `[commit_start(), commit_end())` is newly generated and committed.
struct window_plan {
  std::int64_t index = 0;       ///< position of this window in the schedule
  std::int64_t start = 0;       ///< first unit the window covers
  std::int64_t end = 0;         ///< one past the last unit the window covers
  std::int64_t cond_units = 0;  ///< leading units pinned from the previous window

  /// Units the window covers, conditioning included.
  [[nodiscard]] std::int64_t units() const noexcept { return end - start; }
  /// First unit this window newly commits; earlier ones were committed before.
  [[nodiscard]] std::int64_t commit_start() const noexcept { return start + cond_units; }
  /// One past the last unit this window commits.
  [[nodiscard]] std::int64_t commit_end() const noexcept { return end; }

  friend bool operator==(const window_plan&, const window_plan&) = default;
};

/// Window arithmetic for one request: `total_units` abstract sequence units
/// (latent frames for video models) generated in windows of `window_units`
/// that advance by `window_units - overlap_units`. Every unit is committed by
/// exactly one window (the commit spans partition [0, total_units)) and only
/// the last window may be short. `context_units` bounds the committed history
/// kept after each commit; 0 keeps everything. Immutable once made, so it may
/// be shared between threads.
class window_schedule {
 public:
  /// A schedule, or invalid_argument for the first rule broken, checked in
  /// this order: total_units >= 1, window_units >= 1,
  /// 0 <= overlap_units < window_units, context_units >= 0.
  [[nodiscard]] static result<window_schedule> make(std::int64_t total_units,
                                                    std::int64_t window_units,
                                                    std::int64_t context_units = 0,
                                                    std::int64_t overlap_units = 0);

  /// Units of the whole sequence.
  [[nodiscard]] std::int64_t total_units() const noexcept { return total_units_; }
  /// Units one full window covers, conditioning included.
  [[nodiscard]] std::int64_t window_units() const noexcept { return window_units_; }
  /// Committed units kept behind the commit frontier; 0 means keep all.
  [[nodiscard]] std::int64_t context_units() const noexcept { return context_units_; }
  /// Units each window (after the first) re-pins from its predecessor.
  [[nodiscard]] std::int64_t overlap_units() const noexcept { return overlap_units_; }
  /// Distance between consecutive window starts; always >= 1.
  [[nodiscard]] std::int64_t stride() const noexcept { return window_units_ - overlap_units_; }
  /// Windows needed to cover the sequence; always >= 1.
  [[nodiscard]] std::int64_t num_windows() const noexcept { return num_windows_; }

  /// Every window in order, `window(0)` to `window(num_windows() - 1)`.
  [[nodiscard]] std::vector<window_plan> windows() const;

  /// Window `index`, or out_of_range when `index` is outside
  /// [0, num_windows()); negative indices do not count from the end.
  [[nodiscard]] result<window_plan> window(std::int64_t index) const;

  /// Units of the committed stream (protected head excluded) older than the
  /// context horizon once window `index` has committed: they may be released.
  /// 0 whenever context_units() is 0, without looking at `index`, since
  /// nothing is ever released; otherwise out_of_range for a bad `index`.
  [[nodiscard]] result<std::int64_t> released_end(std::int64_t index) const;

  /// The retention a window commit declares for its stream: the context
  /// horizon in cache tokens behind `prefix_tokens` of protected head.
  /// nullopt when context_units() is 0, because nothing is ever released.
  /// invalid_argument when `tokens_per_unit < 1` (checked first, even with no
  /// context), when the budget overflows int64, or when the policy itself is
  /// invalid (a negative `prefix_tokens`). The pool floors releases to whole
  /// pages, so the realised context tracks the nominal one within a page.
  [[nodiscard]] result<std::optional<retention_policy>> retention(std::int64_t tokens_per_unit,
                                                                  std::int64_t prefix_tokens) const;

 private:
  window_schedule(std::int64_t total_units, std::int64_t window_units, std::int64_t context_units,
                  std::int64_t overlap_units, std::int64_t num_windows) noexcept;

  [[nodiscard]] window_plan plan_at(std::int64_t index) const noexcept;

  std::int64_t total_units_;
  std::int64_t window_units_;
  std::int64_t context_units_;
  std::int64_t overlap_units_;
  std::int64_t num_windows_;
};

}  // namespace mstar::resources
