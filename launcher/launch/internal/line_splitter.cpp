#include "launcher/launch/internal/line_splitter.hpp"

namespace mstar::launch::internal {

void line_splitter::feed(std::string_view bytes, const line_sink& sink) {
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const auto take = newline == std::string_view::npos ? bytes.size() : newline;
    pending_.append(bytes.substr(0, take));
    bytes.remove_prefix(newline == std::string_view::npos ? take : take + 1);
    if (newline != std::string_view::npos || pending_.size() >= max_line) {
      if (!pending_.empty() && pending_.back() == '\r')
        pending_.pop_back();
      sink(pending_);
      pending_.clear();
    }
  }
}

void line_splitter::finish(const line_sink& sink) {
  if (!pending_.empty())
    sink(pending_);
  pending_.clear();
}

}  // namespace mstar::launch::internal
