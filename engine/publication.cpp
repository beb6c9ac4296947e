#include "engine/publication.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace mstar::engine {
namespace {

// Adds `from`'s parts to `into`, or names the first (label, part) both
// carry and changes nothing. Both stream types hold optional `kv` and
// `recurrent` parts.
template <class Stream>
result<void> merge_parts(std::map<std::string, Stream>& into,
                         const std::map<std::string, Stream>& from, std::string_view what) {
  for (const auto& [label, s] : from) {
    const auto it = into.find(label);
    if (it == into.end())
      continue;
    const char* part = s.kv && it->second.kv
                           ? "KV"
                           : (s.recurrent && it->second.recurrent ? "recurrent" : nullptr);
    if (part != nullptr) {
      return make_error(errc::invalid_argument,
                        fmt::format("both {} carry the {} part of label '{}'", what, part, label));
    }
  }
  for (const auto& [label, s] : from) {
    auto& mine = into[label];
    if (s.kv)
      mine.kv = s.kv;
    if (s.recurrent)
      mine.recurrent = s.recurrent;
  }
  return {};
}

}  // namespace

result<void> publication::merge(const publication& other) {
  return merge_parts(streams, other.streams, "publications");
}

bool publication::has_kv() const {
  return std::any_of(streams.begin(), streams.end(),
                     [](const auto& s) { return s.second.kv.has_value(); });
}

bool publication::has_recurrent() const {
  return std::any_of(streams.begin(), streams.end(),
                     [](const auto& s) { return s.second.recurrent.has_value(); });
}

result<void> adoption::merge(const adoption& other) {
  return merge_parts(streams, other.streams, "adoptions");
}

}  // namespace mstar::engine
