#pragma once

// The public face of one transfer: its direction, options and a handle the
// caller waits on. `agent` runs transfers; this header is what callers and
// the actor layer hold.

#include <atomic>
#include <caf/error.hpp>
#include <cstdint>
#include <memory>
#include <mutex>

#include "transport/ucx.hpp"

namespace mstar::transport {

/// Which way bytes move relative to the agent that starts the transfer.
enum class direction : std::uint8_t {
  read,   ///< pull: the peer's arenas are the plan's source, ours the destination
  write,  ///< push: our arenas are the source, the peer's the destination
};

/// Limits on one transfer's operations in flight.
struct transfer_options {
  /// Bytes of RMA operations outstanding at once (a sliding window).
  std::uint64_t max_inflight_bytes = std::uint64_t{64} << 20;
  /// RMA operations outstanding at once.
  std::uint32_t max_inflight_ops = 64;
  /// Bytes a shared-memory copy moves per progress round, so cancellation
  /// and deadlines are seen between slices.
  std::uint64_t copy_slice_bytes = std::uint64_t{32} << 20;
};

namespace internal {
/// What a transfer shares with its handles (see `transfer_handle`).
struct transfer_status {
  std::atomic<bool> finished{false};  // set last, with release order
  std::atomic<bool> cancel_requested{false};
  std::atomic<std::uint64_t> bytes_done{0};  // bytes whose operations completed
  std::uint64_t total_bytes = 0;             // fixed at start
  clock::time_point deadline;                // fixed at start
  mutable std::mutex mutex;                  // guards `error`
  caf::error error;                          // none on success
};
}  // namespace internal

/// A caller's view of a running or finished transfer; cheap to copy and
/// safe to read from any thread. The agent that started it drives it.
class transfer_handle {
 public:
  /// An empty handle (no transfer).
  transfer_handle() = default;
  /// A handle on `status` (made by `agent`).
  explicit transfer_handle(std::shared_ptr<internal::transfer_status> status)
      : status_(std::move(status)) {}
  /// Whether the transfer reached its end (success or failure).
  [[nodiscard]] bool finished() const noexcept {
    return status_ != nullptr && status_->finished.load(std::memory_order_acquire);
  }
  /// The failure once finished: none on success; timed_out, cancelled,
  /// peer_failed, closed or ucx_failure otherwise (invalid_argument for an
  /// empty handle).
  [[nodiscard]] caf::error error() const;
  /// Bytes whose operations have completed so far (0 for an empty handle).
  [[nodiscard]] std::uint64_t bytes_done() const noexcept {
    return status_ == nullptr ? 0 : status_->bytes_done.load();
  }
  /// Bytes the transfer moves in all (0 for an empty handle).
  [[nodiscard]] std::uint64_t total_bytes() const noexcept {
    return status_ == nullptr ? 0 : status_->total_bytes;
  }
  /// The deadline it was started with. Precondition: `valid()`.
  [[nodiscard]] clock::time_point deadline() const noexcept { return status_->deadline; }
  /// Asks the agent to stop issuing operations; the transfer then finishes
  /// with `cancelled` once what is in flight has drained (or been cut off
  /// at the deadline). Thread-safe; no effect once finished.
  void cancel() noexcept {
    if (status_ != nullptr)
      status_->cancel_requested.store(true);
  }
  /// Whether this handle refers to a transfer.
  [[nodiscard]] bool valid() const noexcept { return status_ != nullptr; }
  /// The shared state, by identity (how the agent finds the transfer).
  [[nodiscard]] const internal::transfer_status* status_ptr() const noexcept {
    return status_.get();
  }

 private:
  std::shared_ptr<internal::transfer_status> status_;
};

}  // namespace mstar::transport
