#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace mstar::launch::internal {

/// Cuts a byte stream into whole lines, so that lines of several nodes never
/// interleave mid-line in the launcher's output. A line longer than
/// `max_line` bytes is cut there, to bound memory.
class line_splitter {
 public:
  using line_sink = std::function<void(std::string_view line)>;
  static constexpr std::size_t max_line = 64 * 1024;

  /// Appends `bytes` and hands every completed line (without '\n') to `sink`.
  void feed(std::string_view bytes, const line_sink& sink);

  /// Hands the unterminated rest, if any, to `sink` (at end of stream).
  void finish(const line_sink& sink);

 private:
  std::string pending_;
};

}  // namespace mstar::launch::internal
