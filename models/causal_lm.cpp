// causal_lm's default launch / finish: the forward runs at launch.
#include "models/causal_lm.hpp"

#include <fmt/format.h>

namespace mstar::models {

result<std::uint64_t> causal_lm::launch(std::span<const step_row> rows, const step_plans& plans,
                                        std::span<const row_sampling> draws,
                                        std::span<const std::int32_t> loopback) {
  if (launched_.size() >= 2) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} forwards are outstanding already", launched_.size()));
  }
  std::vector<step_row> own;
  std::vector<resources::token_id> ids(rows.size());
  if (!loopback.empty()) {
    if (loopback.size() != rows.size()) {
      return make_error(errc::invalid_argument, fmt::format("{} loopback entries for {} rows",
                                                            loopback.size(), rows.size()));
    }
    const auto* drawn = &last_drawn_;
    own.assign(rows.begin(), rows.end());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const auto j = loopback[r];
      if (j < 0)
        continue;
      if (static_cast<std::size_t>(j) >= drawn->size() || rows[r].tokens.size() != 1) {
        return make_error(errc::invalid_argument,
                          fmt::format("row {} loops back row {} of no such draw", r, j));
      }
      ids[r] = static_cast<resources::token_id>((*drawn)[static_cast<std::size_t>(j)]);
      own[r].tokens = {&ids[r], 1};
    }
    rows = own;
  }
  auto out = forward(rows, plans, draws);
  if (!out)
    return out.error();
  last_drawn_ = out->sampled;
  launched_.emplace_back(next_ticket_, std::move(*out));
  return next_ticket_++;
}

result<forward_output> causal_lm::finish(std::uint64_t ticket) {
  if (launched_.empty() || launched_.front().first != ticket) {
    return make_error(errc::invalid_argument,
                      fmt::format("forward {} is not the oldest outstanding one", ticket));
  }
  auto out = std::move(launched_.front().second);
  launched_.erase(launched_.begin());
  return out;
}

result<void> causal_lm::place_images(std::vector<resources::token_id>& /*prompt*/,
                                     std::span<const image_input> images) const {
  if (images.empty())
    return {};
  return make_error(
      errc::unsupported,
      fmt::format("the request has {} image(s); this model takes no images", images.size()));
}

std::vector<image_span> causal_lm::image_spans(std::span<const resources::token_id> /*prompt*/,
                                               std::span<const image_input> /*images*/) const {
  return {};
}

void causal_lm::begin_sequence(const resources::request_id& /*rid*/,
                               std::span<const resources::token_id> /*prompt*/,
                               std::span<const image_input> /*images*/) {}

void causal_lm::end_sequence(const resources::request_id& /*rid*/) {}

}  // namespace mstar::models
