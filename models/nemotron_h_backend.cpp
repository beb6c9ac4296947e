// The default launch / finish of a backend without a device queue: the
// forward runs at launch, its output waits for finish.
#include "models/nemotron_h_backend.hpp"

#include <fmt/format.h>

namespace mstar::models {

result<void> nemotron_h_backend::set_tensor_parallel(const nemotron_h_tensor_parallel& tp) {
  return make_error(errc::unsupported,
                    fmt::format("tensor parallelism ({} ranks) on {} needs NCCL, which this build "
                                "does not use; the CPU runs it over threads",
                                tp.comm != nullptr ? tp.comm->size() : 0, name()));
}

result<void> check_loopback(const nemotron_h_batch& batch, std::span<const std::int32_t> loopback,
                            std::size_t previous_rows) {
  if (loopback.empty())
    return {};
  const auto rows = batch.cu.size() - 1;
  if (loopback.size() != rows) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} loopback entries for {} rows", loopback.size(), rows));
  }
  for (std::size_t r = 0; r < rows; ++r) {
    const auto j = loopback[r];
    if (j < 0)
      continue;
    if (batch.cu[r + 1] - batch.cu[r] != 1) {
      return make_error(errc::invalid_argument,
                        fmt::format("row {} loops back its input but feeds {} tokens", r,
                                    batch.cu[r + 1] - batch.cu[r]));
    }
    if (static_cast<std::size_t>(j) >= previous_rows) {
      return make_error(errc::invalid_argument,
                        fmt::format("row {} loops back row {} of a forward that drew {} ids", r, j,
                                    previous_rows));
    }
  }
  return {};
}

result<void> resolve_loopback(const nemotron_h_batch& batch, std::span<const std::int32_t> loopback,
                              std::span<const std::int32_t> drawn, std::vector<std::int32_t>& ids) {
  if (auto ok = check_loopback(batch, loopback, drawn.size()); !ok)
    return ok;
  ids.assign(batch.ids.begin(), batch.ids.end());
  for (std::size_t r = 0; r < loopback.size(); ++r) {
    if (loopback[r] >= 0)
      ids[static_cast<std::size_t>(batch.cu[r])] = drawn[static_cast<std::size_t>(loopback[r])];
  }
  return {};
}

result<std::uint64_t> nemotron_h_backend::launch(const nemotron_h_batch& batch,
                                                 const nemotron_h_state& state, bool want_logits,
                                                 std::span<const row_sampling> sampling,
                                                 std::span<const std::int32_t> loopback) {
  if (ran_.size() >= max_outstanding) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} forwards are outstanding already", ran_.size()));
  }
  nemotron_h_batch b = batch;
  if (!loopback.empty()) {
    if (auto ok = resolve_loopback(batch, loopback, last_drawn_, ids_); !ok)
      return ok.error();
    b.ids = ids_;
  }
  ran r;
  r.ticket = next_ticket_++;
  if (auto ok = forward(b, state, want_logits ? &r.logits : nullptr,
                        want_logits ? nullptr : &r.sampled, sampling);
      !ok) {
    return ok.error();
  }
  last_drawn_ = r.sampled;
  ran_.push_back(std::move(r));
  return ran_.back().ticket;
}

result<void> nemotron_h_backend::finish(std::uint64_t ticket, std::vector<float>* logits,
                                        std::vector<std::int32_t>* sampled) {
  if (ran_.empty() || ran_.front().ticket != ticket) {
    return make_error(errc::invalid_argument,
                      fmt::format("forward {} is not the oldest outstanding one", ticket));
  }
  auto r = std::move(ran_.front());
  ran_.erase(ran_.begin());
  if (logits != nullptr)
    *logits = std::move(r.logits);
  if (sampled != nullptr)
    *sampled = std::move(r.sampled);
  return {};
}

}  // namespace mstar::models
