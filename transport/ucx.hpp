#pragma once

// RAII owners of the UCX handles the transport uses, one class per handle.
// Children hold a shared reference to their parent, so destruction order is
// structural whatever order callers drop them in: remote key, then endpoint,
// then worker, then context (a memory registration holds the context).
// Fallible creation is `make()` returning `caf::expected`, with the UCX status
// converted (and logged) where it is first seen.
//
// Threads: a context may be shared by threads; a worker and everything made
// from it are used by one thread at a time (the worker runs in UCX's
// serialized mode). `agent` is what enforces that with its lock.

#include <atomic>
#include <caf/expected.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <ucp/api/ucp_def.h>
#include <utility>
#include <vector>

#include "transport/error.hpp"

namespace mstar::transport {

/// Bytes exchanged with a peer (worker addresses, packed remote keys).
using byte_buffer = std::vector<std::uint8_t>;

/// The clock every deadline in this layer uses.
using clock = std::chrono::steady_clock;

/// Where a registered arena lives; CUDA arrives with the CUDA issue.
enum class memory_kind : std::uint8_t {
  host = 0,  ///< plain or shared host memory
  cuda = 1,  ///< CUDA device memory (needs a UCX built with CUDA transports)
};

/// How to create a UCX context.
struct context_options {
  /// UCX settings applied over the environment, without the `UCX_` prefix:
  /// {"TLS", "tcp"}, {"NET_DEVICES", "lo"}. They let two contexts in one
  /// process differ, and tests choose a transport without touching the
  /// process environment.
  std::vector<std::pair<std::string, std::string>> config;
  /// Ask for UCP_FEATURE_WAKEUP, so an idle progress thread can sleep on the
  /// worker's event fd instead of spinning.
  bool wakeup = true;
};

/// Owner of a `ucp_context_h` (ucp_init / ucp_cleanup).
class context {
 public:
  /// A context with the RMA (and optionally wakeup) features. Fails with the
  /// UCX status and the setting it rejected.
  [[nodiscard]] static caf::expected<std::shared_ptr<context>> make(const context_options& options);
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  /// ucp_cleanup; every worker and registration is gone by then (they hold
  /// a reference to this context).
  ~context();
  /// The raw handle, valid for this object's lifetime.
  [[nodiscard]] ucp_context_h native() const noexcept { return handle_; }
  /// Whether the wakeup feature was granted.
  [[nodiscard]] bool has_wakeup() const noexcept { return wakeup_; }

 private:
  context(ucp_context_h handle, bool wakeup) noexcept : handle_(handle), wakeup_(wakeup) {}
  ucp_context_h handle_;
  bool wakeup_;
};

/// Owner of a `ucp_worker_h`, in serialized thread mode.
class worker {
 public:
  /// A worker on `ctx`. Fails with the UCX status.
  [[nodiscard]] static caf::expected<std::shared_ptr<worker>> make(std::shared_ptr<context> ctx);
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;
  /// ucp_worker_destroy, then drops the context reference.
  ~worker();
  /// The raw handle, valid for this object's lifetime.
  [[nodiscard]] ucp_worker_h native() const noexcept { return handle_; }
  /// The context this worker was made from.
  [[nodiscard]] const std::shared_ptr<context>& owner() const noexcept { return context_; }
  /// This worker's address, to hand to a peer that will connect to it.
  [[nodiscard]] caf::expected<byte_buffer> address() const;
  /// One round of ucp_worker_progress; the number of events it handled.
  unsigned progress() noexcept;
  /// The worker's event fd, or -1 without the wakeup feature.
  [[nodiscard]] int event_fd() const noexcept { return event_fd_; }
  /// Arms the event fd: true when it is safe to sleep on it, false when
  /// events are pending and the caller must progress first.
  [[nodiscard]] bool arm() noexcept;
  /// Wakes a thread sleeping on the event fd (thread-safe).
  void signal() noexcept;

 private:
  worker(std::shared_ptr<context> ctx, ucp_worker_h handle, int event_fd) noexcept
      : context_(std::move(ctx)), handle_(handle), event_fd_(event_fd) {}
  std::shared_ptr<context> context_;  // first member: released last
  ucp_worker_h handle_;
  int event_fd_;
};

/// Owner of an outstanding UCX request (`ucs_status_ptr_t` from an `_nbx`
/// call). Destroying a pending request releases it to UCX
/// (ucp_request_free): the operation finishes inside UCX with no callback.
/// Move-only. Keep the worker alive while requests exist.
class request {
 public:
  /// An empty request: an operation that completed immediately.
  request() noexcept = default;
  /// Takes `status_ptr` from an `_nbx` call: a completed status (UCS_OK or
  /// null) leaves this empty; an error pointer is returned as an error.
  [[nodiscard]] static caf::expected<request> adopt(void* status_ptr, std::string_view what);
  request(request&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  request& operator=(request&& other) noexcept;
  request(const request&) = delete;
  request& operator=(const request&) = delete;
  /// Releases the request back to UCX.
  ~request();
  /// UCS_OK when done (or empty), UCS_INPROGRESS while pending, else the
  /// failure status.
  [[nodiscard]] ucs_status_t status() const noexcept;

 private:
  explicit request(void* ptr) noexcept : ptr_(ptr) {}
  void* ptr_ = nullptr;
};

class remote_key;

/// Owner of a `ucp_ep_h` to a peer's worker, in peer error-handling mode so
/// a dead peer fails the endpoint instead of hanging it. Immovable: UCX's
/// error callback holds `this`.
class endpoint {
 public:
  /// Connects `w` to the worker at `remote_address`; `peer` names it in
  /// errors. With `detect_peer_failure`, asks UCX to report a dead peer
  /// (error-handling mode "peer"); when no transport between the two can
  /// (UCX 1.13's shared-memory transports cannot), falls back to no error
  /// handling, logs that, and leaves deadlines to catch a dead peer. Fails
  /// with the UCX status.
  [[nodiscard]] static caf::expected<std::shared_ptr<endpoint>> make(
      std::shared_ptr<worker> w, std::span<const std::uint8_t> remote_address, std::string peer,
      bool detect_peer_failure = true);
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;
  /// Closes (`close` with a short deadline) if not closed already.
  ~endpoint();
  /// The raw handle; null once closed.
  [[nodiscard]] ucp_ep_h native() const noexcept { return handle_; }
  /// The worker this endpoint belongs to.
  [[nodiscard]] const std::shared_ptr<worker>& owner() const noexcept { return worker_; }
  /// The peer's name, for messages.
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  /// Whether UCX reported the endpoint failed (peer death, reset).
  [[nodiscard]] bool failed() const noexcept { return failure_status_.load() != 0; }
  /// The failure as an error (peer_failed with the UCX status), or none.
  [[nodiscard]] caf::error error() const;
  /// Flushes and closes, progressing the worker until `deadline`; a failed
  /// endpoint is force-closed, and a close still pending at the deadline is
  /// left to the worker's destruction. Destroys the remote keys unpacked on
  /// this endpoint first, as UCX requires. Idempotent.
  void close(clock::time_point deadline) noexcept;
  /// Releases the endpoint (its remote keys first) at once without a flush:
  /// outstanding operations complete with UCS_ERR_CANCELED and nothing more
  /// reaches the peer. Without peer failure detection UCX allows no forced
  /// close: a flush close is started and abandoned after a short grace, its
  /// operations left to UCX until the worker is destroyed.
  void force_close() noexcept;
  /// Whether UCX reports this peer's death (error-handling mode "peer").
  [[nodiscard]] bool detects_peer_failure() const noexcept { return detects_peer_failure_; }
  /// Whether `close` or `force_close` ran.
  [[nodiscard]] bool closed() const noexcept { return handle_ == nullptr; }

 private:
  endpoint(std::shared_ptr<worker> w, std::string peer) noexcept
      : worker_(std::move(w)), peer_(std::move(peer)) {}
  friend class remote_key;
  static void on_error(void* self, ucp_ep_h ep, ucs_status_t status) noexcept;
  ucs_status_t create(std::span<const std::uint8_t> remote_address, bool peer_errors) noexcept;
  void release_keys() noexcept;

  std::shared_ptr<worker> worker_;  // first member: released last
  std::string peer_;
  ucp_ep_h handle_ = nullptr;
  bool detects_peer_failure_ = false;
  std::atomic<int> failure_status_{0};
  std::vector<remote_key*> keys_;  // live keys unpacked here, released before the close
};

/// Owner of a `ucp_mem_h`: a registered local region.
class memory_region {
 public:
  /// Registers `[base, base + bytes)` of `kind` with `ctx`. The memory must
  /// outlive this object. Fails with the UCX status.
  [[nodiscard]] static caf::expected<std::unique_ptr<memory_region>> make(
      std::shared_ptr<context> ctx, void* base, std::size_t bytes, memory_kind kind);
  /// Has UCX allocate and register `bytes` of host memory (zeroed), where
  /// it can: shared memory its same-host transports map directly. The memory
  /// lives as long as this object.
  [[nodiscard]] static caf::expected<std::unique_ptr<memory_region>> allocate(
      std::shared_ptr<context> ctx, std::size_t bytes);
  memory_region(const memory_region&) = delete;
  memory_region& operator=(const memory_region&) = delete;
  /// ucp_mem_unmap (freeing UCX-allocated memory); operations on the region
  /// must be finished.
  ~memory_region();
  /// The raw handle, valid for this object's lifetime.
  [[nodiscard]] ucp_mem_h native() const noexcept { return handle_; }
  /// Start of the region.
  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  /// The packed remote key a peer unpacks to reach this region.
  [[nodiscard]] caf::expected<byte_buffer> packed_key() const;

 private:
  memory_region(std::shared_ptr<context> ctx, ucp_mem_h handle, std::byte* base) noexcept
      : context_(std::move(ctx)), handle_(handle), base_(base) {}
  std::shared_ptr<context> context_;  // first member: released last
  ucp_mem_h handle_;
  std::byte* base_;
};

/// Owner of a `ucp_rkey_h`: a peer's packed key unpacked on an endpoint.
class remote_key {
 public:
  /// Unpacks `packed` on `ep`. Fails with the UCX status.
  [[nodiscard]] static caf::expected<std::unique_ptr<remote_key>> make(
      std::shared_ptr<endpoint> ep, std::span<const std::uint8_t> packed);
  remote_key(const remote_key&) = delete;
  remote_key& operator=(const remote_key&) = delete;
  /// ucp_rkey_destroy (unless the endpoint's close already did), before the
  /// endpoint reference is dropped.
  ~remote_key();
  /// The raw handle; null once the endpoint closed.
  [[nodiscard]] ucp_rkey_h native() const noexcept { return handle_; }
  /// The endpoint the key was unpacked on.
  [[nodiscard]] const std::shared_ptr<endpoint>& owner() const noexcept { return endpoint_; }

 private:
  friend class endpoint;
  remote_key(std::shared_ptr<endpoint> ep, ucp_rkey_h handle) noexcept
      : endpoint_(std::move(ep)), handle_(handle) {}
  void release() noexcept;
  std::shared_ptr<endpoint> endpoint_;  // first member: released last
  ucp_rkey_h handle_;
};

}  // namespace mstar::transport
