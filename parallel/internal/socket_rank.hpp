#pragma once

// What both kinds of socket rank share (socket_ranks.hpp): the checks of
// each call's arguments, the sequence number, and the group's state once
// broken. The hub and the spokes differ only in how a call's bytes move
// (exchange) and whom they tell when they leave.

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "parallel/communicator.hpp"
#include "parallel/internal/socket_io.hpp"
#include "parallel/internal/socket_wire.hpp"

namespace mstar::parallel::internal {

/// One connection and whether its outgoing stream ends on a frame boundary:
/// after a partial write nothing more may be said on it (the peer would read
/// the rest of the old frame).
struct link {
  unique_fd fd;
  bool clean = true;
};

/// Sends `f` and `payload` on `l`; marks it unclean when only part went.
[[nodiscard]] io_outcome send_frame(link& l, const frame& f, std::span<const std::byte> payload,
                                    deadline until, bool stop_when_readable = false);

/// Sends `f` and `text` on `l` if it is clean, waiting at most a moment: a
/// verdict or a goodbye, which a peer that is still there reads.
void tell(link& l, const frame& f, std::string_view text);

/// The name of a collective's frame kind, for errors.
[[nodiscard]] std::string_view op_name(frame_kind k);

class socket_rank : public communicator {
 public:
  socket_rank(int rank, int size, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {}

  [[nodiscard]] int rank() const noexcept final { return rank_; }
  [[nodiscard]] int size() const noexcept final { return size_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept final { return timeout_; }

  result<void> all_reduce_sum(std::span<float> data) final;
  result<void> all_gather(std::span<const float> in, std::span<float> out) final;
  result<void> broadcast(std::span<std::byte> data, int root) final;
  void abort(const std::string& reason) final { leave(reason); }

 protected:
  /// One collective as bytes: what this rank sends rank 0 and where the
  /// result lands. For broadcast, the root sends and the others receive.
  struct call {
    frame_kind kind;
    int root = -1;
    std::uint64_t count = 0;  ///< elements (bytes for broadcast)
    std::span<const std::byte> send;
    std::span<std::byte> receive;
  };

  /// Moves the bytes of `c` (sequence number seq_), recording any failure.
  [[nodiscard]] virtual result<void> exchange(const call& c) = 0;
  /// Tells every peer this rank reachs that rank `who` left for `reason`.
  virtual void announce_gone(int who, const std::string& reason) = 0;
  /// Closes every connection.
  virtual void close_links() = 0;

  /// Records `e` as the group's cause unless one is recorded; returns it.
  error fail(error e);
  /// Records that rank `who` left for `reason`; returns the error of `op`.
  error fail_gone(std::string_view op, int who, std::string reason);
  /// Tells the peers this rank leaves (best effort), then closes its
  /// connections; later calls fail naming this rank and `reason`. Derived
  /// destructors call it: peers see a rank that left.
  void leave(const std::string& reason);

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  std::uint64_t seq_ = 0;  ///< collectives called so far

 private:
  result<void> run(const call& c);
  /// This rank's own bad argument: it fails here and leaves, so peers do
  /// not wait for a call it will not make.
  error refuse(error e);
  [[nodiscard]] std::optional<error> failure(std::string_view op) const;

  std::optional<error> broken_;  ///< a timeout, a mismatch, a bad argument
  int gone_ = -1;                ///< the first rank that left, if that broke the group
  std::string gone_reason_;
  bool left_ = false;
};

}  // namespace mstar::parallel::internal
