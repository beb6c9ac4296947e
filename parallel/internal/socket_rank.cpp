#include "parallel/internal/socket_rank.hpp"

#include <fmt/format.h>

namespace mstar::parallel::internal {

using namespace std::chrono_literals;

io_outcome send_frame(link& l, const frame& f, std::span<const std::byte> payload, deadline until,
                      bool stop_when_readable) {
  const auto head = to_bytes(f);
  auto out = write_all(l.fd.get(), head, until, stop_when_readable);
  if (out.status == io_status::done && !payload.empty()) {
    auto body = write_all(l.fd.get(), payload, until, stop_when_readable);
    body.bytes += out.bytes;
    out = std::move(body);
  }
  if (out.status != io_status::done && out.bytes > 0)
    l.clean = false;
  return out;
}

void tell(link& l, const frame& f, std::string_view text) {
  if (!l.fd || !l.clean)
    return;
  // A verdict is small and the peer's receive buffer holds only what it has
  // not read of this collective's answer: it goes at once, or the peer is
  // not reading and will see the connection close instead.
  const std::span bytes(reinterpret_cast<const std::byte*>(text.data()), text.size());
  (void)send_frame(l, f, bytes, std::chrono::steady_clock::now() + 100ms);
}

std::string_view op_name(frame_kind k) {
  switch (k) {
    case frame_kind::all_reduce_sum:
      return "all_reduce_sum";
    case frame_kind::all_gather:
      return "all_gather";
    case frame_kind::broadcast:
      return "broadcast";
    case frame_kind::reply:
      return "reply";
    case frame_kind::gone:
      return "gone";
    case frame_kind::late:
      return "late";
    case frame_kind::broken:
      return "broken";
  }
  return "an unknown frame";
}

result<void> socket_rank::all_reduce_sum(std::span<float> data) {
  const auto bytes = std::as_writable_bytes(data);
  return run({frame_kind::all_reduce_sum, -1, data.size(), bytes, bytes});
}

result<void> socket_rank::all_gather(std::span<const float> in, std::span<float> out) {
  if (auto e = failure("all_gather"))
    return *e;
  if (out.size() != in.size() * static_cast<std::size_t>(size_)) {
    return refuse(make_error(errc::invalid_argument,
                             fmt::format("tensor parallel all_gather on rank {}: output holds {} "
                                         "floats, not {} ranks x {}",
                                         rank_, out.size(), size_, in.size())));
  }
  return run(
      {frame_kind::all_gather, -1, in.size(), std::as_bytes(in), std::as_writable_bytes(out)});
}

result<void> socket_rank::broadcast(std::span<std::byte> data, int root) {
  if (auto e = failure("broadcast"))
    return *e;
  if (root < 0 || root >= size_) {
    return refuse(
        make_error(errc::invalid_argument,
                   fmt::format("tensor parallel broadcast on rank {}: root {} is not a rank of {}",
                               rank_, root, size_)));
  }
  if (root == rank_)
    return run({frame_kind::broadcast, root, data.size(), data, {}});
  return run({frame_kind::broadcast, root, data.size(), {}, data});
}

result<void> socket_rank::run(const call& c) {
  if (auto e = failure(op_name(c.kind)))
    return *e;
  ++seq_;
  return exchange(c);
}

error socket_rank::refuse(error e) {
  fail(e);
  announce_gone(rank_, e.message());
  return e;
}

error socket_rank::fail(error e) {
  if (!broken_ && gone_ < 0)
    broken_ = e;
  return e;
}

error socket_rank::fail_gone(std::string_view op, int who, std::string reason) {
  auto e = peer_gone(op, rank_, who, reason);
  if (!broken_ && gone_ < 0) {
    gone_ = who;
    gone_reason_ = std::move(reason);
  }
  return e;
}

void socket_rank::leave(const std::string& reason) {
  if (left_)
    return;
  left_ = true;
  if (!broken_ && gone_ < 0) {
    gone_ = rank_;
    gone_reason_ = reason;
  }
  announce_gone(rank_, reason);
  close_links();
}

std::optional<error> socket_rank::failure(std::string_view op) const {
  if (broken_)
    return *broken_;
  if (gone_ >= 0)
    return peer_gone(op, rank_, gone_, gone_reason_);
  return std::nullopt;
}

}  // namespace mstar::parallel::internal
