// A rank other than 0 of a socket group: every collective, it sends rank 0
// its call and payload, then reads rank 0's answer: the result, or why the
// group broke. While sending it also watches for rank 0 speaking first (a
// verdict), so a rank told to stop does not push megabytes nobody reads.
#include <array>
#include <fmt/format.h>

#include "parallel/internal/socket_rank.hpp"
#include "parallel/internal/socket_ranks.hpp"

namespace mstar::parallel::internal {
namespace {

class spoke final : public socket_rank {
 public:
  spoke(unique_fd to_root, int rank, int size, std::chrono::milliseconds timeout)
      : socket_rank(rank, size, timeout) {
    root_.fd = std::move(to_root);
  }
  ~spoke() override { leave("its communicator was destroyed"); }
  spoke(const spoke&) = delete;
  spoke& operator=(const spoke&) = delete;

 private:
  result<void> exchange(const call& c) override {
    const std::string_view op = op_name(c.kind);
    const auto until = std::chrono::steady_clock::now() + timeout_ + verdict_grace(timeout_);
    const frame mine{c.kind, c.root, seq_, c.count, c.send.size()};
    const auto sent = send_frame(root_, mine, c.send, until, /*stop_when_readable=*/true);
    if (sent.status == io_status::timed_out)
      return on_my_own(peer_timeout(op, rank_, 0, timeout_));
    // Sent, or rank 0 spoke first, or the connection closed: in each case
    // what rank 0 said (its answer, its verdict, or nothing) tells the rest.
    std::array<std::byte, sizeof(frame)> head{};
    auto got = read_all(root_.fd.get(), head, until);
    if (got.status == io_status::closed)
      return fail_gone(op, 0, got.why);
    if (got.status != io_status::done)
      return on_my_own(peer_timeout(op, rank_, 0, timeout_));
    const auto f = from_bytes<frame>(head);
    switch (f.kind) {
      case frame_kind::reply:
        if (sent.status != io_status::done || f.seq != seq_ || f.bytes != c.receive.size()) {
          return on_my_own(make_error(
              errc::internal,
              fmt::format("tensor parallel {} on rank {}: rank 0 answered call {} with {} bytes, "
                          "expected call {} with {}",
                          op, rank_, f.seq, f.bytes, seq_, c.receive.size())));
        }
        return receive(op, c.receive, until);
      case frame_kind::gone:
      case frame_kind::broken: {
        auto text = read_text(op, f, until);
        if (!text)
          return text.error();
        if (f.kind == frame_kind::gone)
          return fail_gone(op, f.root, std::move(*text));
        return fail(make_error(errc::internal, std::move(*text)));
      }
      case frame_kind::late:
        return fail(peer_timeout(op, rank_, f.root, std::chrono::milliseconds(f.count)));
      case frame_kind::all_reduce_sum:
      case frame_kind::all_gather:
      case frame_kind::broadcast:
        break;
    }
    return on_my_own(make_error(
        errc::internal, fmt::format("tensor parallel {} on rank {}: rank 0 sent a frame of kind {}",
                                    op, rank_, static_cast<std::uint32_t>(f.kind))));
  }

  // The answer's payload, straight into the caller's buffer.
  result<void> receive(std::string_view op, std::span<std::byte> into, deadline until) {
    auto got = read_all(root_.fd.get(), into, until);
    if (got.status == io_status::closed)
      return fail_gone(op, 0, got.why);
    if (got.status != io_status::done)
      return on_my_own(peer_timeout(op, rank_, 0, timeout_));
    return {};
  }

  result<std::string> read_text(std::string_view op, const frame& f, deadline until) {
    if (f.bytes > max_text_bytes) {
      return on_my_own(
          make_error(errc::internal,
                     fmt::format("tensor parallel {} on rank {}: rank 0's verdict has {} bytes", op,
                                 rank_, f.bytes)));
    }
    std::string text(f.bytes, '\0');
    auto got = read_all(root_.fd.get(), std::as_writable_bytes(std::span(text)), until);
    if (got.status != io_status::done) {
      // The verdict itself was cut short: rank 0 left, or stalled, mid-sentence.
      return fail_gone(op, 0, "its verdict was cut short");
    }
    return text;
  }

  // A failure rank 0 did not tell us of (it stalled, or said something we
  // cannot read): record it and tell rank 0, if it still listens, so its
  // next collective fails naming us instead of waiting for the timeout.
  error on_my_own(error e) {
    fail(e);
    tell(root_, {frame_kind::gone, rank_, seq_, 0, e.message().size()}, e.message());
    return e;
  }

  void announce_gone(int who, const std::string& reason) override {
    tell(root_, {frame_kind::gone, who, seq_, 0, reason.size()}, reason);
  }

  void close_links() override { root_.fd.reset(); }

  link root_;
};

}  // namespace

std::chrono::milliseconds verdict_grace(std::chrono::milliseconds timeout) {
  return std::min(timeout, std::chrono::milliseconds(1000));
}

std::unique_ptr<communicator> make_spoke(unique_fd to_root, int rank, int size,
                                         std::chrono::milliseconds timeout) {
  return std::make_unique<spoke>(std::move(to_root), rank, size, timeout);
}

}  // namespace mstar::parallel::internal
