#pragma once

// The transport of one process: a UCX context and worker, the arenas this
// process registered, the peers' arenas it attached, and the transfers in
// flight between them. The transfer-agent actor owns one; tests own two.
// Read this file first (transport/README.md).

#include <algorithm>
#include <atomic>
#include <caf/expected.hpp>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/shm_arena.hpp"
#include "transport/descriptor.hpp"
#include "transport/path.hpp"
#include "transport/plan.hpp"
#include "transport/transfer.hpp"
#include "transport/ucx.hpp"

namespace mstar::transport {

namespace internal {
class transfer_run;
struct arena_binding;
class ipc_streams;
}  // namespace internal

/// How to build an `agent`.
struct agent_options {
  std::string name = "agent";  ///< names this agent in peers' messages
  /// The deployment this process belongs to; when set, `make` first removes
  /// the shared-memory segments its dead processes left behind.
  std::string deployment;
  context_options ucx;         ///< UCX settings (transports, devices)
  transfer_options transfers;  ///< windows for every transfer
  /// Map a same-host peer's shared-memory segment and copy directly instead
  /// of going through UCX (when its descriptor names a segment); open a
  /// same-host peer's device arena with CUDA IPC (when its descriptor
  /// carries a handle). Off, device arenas need a UCX with CUDA transports.
  bool map_same_host_segments = true;
  /// Ask UCX to report dead peers (falls back per endpoint where the
  /// transports cannot; see `endpoint::make`). Off avoids the attempt, and
  /// UCX's error line, on transports known not to support it.
  bool detect_peer_failure = true;
};

/// Index of an arena this agent registered.
using local_arena_id = std::uint32_t;
/// Index of a peer's arena this agent attached.
using remote_arena_id = std::uint32_t;

/// Plan arena `i` of a transfer: which of our arenas and which attached one.
struct arena_pair {
  local_arena_id local = 0;    ///< ours
  remote_arena_id remote = 0;  ///< the peer's
};

/// One process's transport endpoint. See the file comment.
///
/// Threads: every member function may be called from any thread; a lock
/// serialises them with the progress thread (UCX sees one thread at a
/// time). Without a progress thread, transfers advance only inside
/// `progress` and `wait`, on the caller's thread. The agent is immovable.
class agent {
 public:
  /// A context and worker per `options`; fails with the UCX status.
  [[nodiscard]] static caf::expected<std::unique_ptr<agent>> make(agent_options options);
  agent(const agent&) = delete;
  agent& operator=(const agent&) = delete;
  /// Stops the progress thread, aborts unfinished transfers (closed), then
  /// releases remote keys, endpoints, registrations, worker and context, in
  /// that order.
  ~agent();

  /// Registers `[base, base + layout.bytes())` for RMA; `shm_name` names the
  /// shared-memory segment the arena occupies (from its start), if any, so
  /// same-host peers can map it. Register once at start-up: the memory must
  /// outlive the agent.
  ///
  /// Device memory (`memory_kind::cuda`, from cudaMalloc) is exported as a
  /// CUDA IPC handle for same-host peers (built with CUDA), and registered
  /// with UCX only where UCX reports the CUDA memory type (best effort once
  /// exported). It fails when neither is possible (`unsupported`) or `base`
  /// is not device memory (invalid_argument).
  [[nodiscard]] caf::expected<local_arena_id> register_arena(
      std::byte* base, arena_layout layout, std::string shm_name = {},
      memory_kind memory = memory_kind::host);

  /// Has UCX allocate (zeroed) and register an arena of `layout`: memory its
  /// shared-memory transports can map for same-host peers. Its address is
  /// `arena_base(id)`; it lives as long as the agent.
  [[nodiscard]] caf::expected<local_arena_id> allocate_arena(arena_layout layout);

  /// Start of local arena `id`, or null for an unknown id.
  [[nodiscard]] std::byte* arena_base(local_arena_id id) const;

  /// Registers the whole of `segment` (see `register_arena`).
  [[nodiscard]] caf::expected<local_arena_id> register_segment(kernels::shm_arena& segment,
                                                               arena_layout layout);

  /// What a peer needs to reach arena `id`: send it over any control channel.
  [[nodiscard]] caf::expected<arena_descriptor> describe(local_arena_id id) const;

  /// Makes a peer's arena reachable (`choose_attach_path`): maps its segment
  /// when it is on this host (and mapping is allowed), opens its CUDA IPC
  /// handle when it is a device arena on this host, else connects to its
  /// worker (one endpoint per peer worker, reused; a closed or failed one is
  /// replaced) and unpacks its key. A device arena none of these reach is
  /// refused with `unsupported` naming why.
  [[nodiscard]] caf::expected<remote_arena_id> attach(const arena_descriptor& d);

  /// Whether attached arena `id` is reached through a mapped segment.
  [[nodiscard]] bool is_mapped(remote_arena_id id) const;

  /// How attached arena `id` is reached (not_found for an unknown or
  /// detached id).
  [[nodiscard]] caf::expected<attach_path> path_of(remote_arena_id id) const;

  /// Forgets attached arena `id`: releases its key, unmaps its segment, or
  /// closes its CUDA IPC mapping (once no running transfer holds it: a
  /// transfer keeps the mapping it copies through). RMA and segment arenas
  /// are refused (invalid_argument) while any transfer runs. The id is not
  /// reused; later use is not_found.
  [[nodiscard]] caf::expected<void> detach(remote_arena_id id);

  /// Starts moving `plan` (built from the same layouts as the arenas)
  /// between our and the peer's arenas, `arenas[i]` binding plan arena `i`.
  /// Every range is checked against both arenas' sizes first. The transfer
  /// ends by `deadline` whatever happens: at the deadline outstanding
  /// operations are cut off (the endpoint is force-closed) and it fails
  /// with `timed_out`. CUDA IPC copies cannot be cut off: an early end waits
  /// for those already queued on the stream (at most the byte window).
  ///
  /// Device arenas: the caller orders its own kernels around a transfer
  /// (nothing writes the source or touches the destination units between
  /// `start` and the end of `wait`); the copies run on the agent's streams.
  [[nodiscard]] caf::expected<transfer_handle> start(direction dir, transfer_plan plan,
                                                     const std::vector<arena_pair>& arenas,
                                                     clock::time_point deadline);

  /// Waits for `h` to finish, progressing the worker on this thread unless
  /// the progress thread runs. Returns the transfer's outcome. Bounded by the
  /// transfer's deadline.
  [[nodiscard]] caf::expected<void> wait(const transfer_handle& h);

  /// One round of progress: the worker, then every transfer. Returns the
  /// number of events (UCX events plus transfers finished).
  std::size_t progress();

  /// Starts a thread that progresses the worker and the transfers, sleeping
  /// on the worker's event fd when idle (spinning where UCX offers no fd).
  /// A process serving reads over TCP must keep one running: UCX emulates
  /// remote reads with messages the target has to answer. Start and stop
  /// from one owning thread, not concurrently with `wait`.
  [[nodiscard]] caf::expected<void> start_progress_thread();

  /// Stops and joins the progress thread; a no-op when none runs.
  void stop_progress_thread();

  /// This agent's name.
  [[nodiscard]] const std::string& name() const noexcept { return options_.name; }

 private:
  struct local_arena;
  struct remote_arena;
  // Worker addresses in byte order, as std::less would give. std::less goes
  // through vector's operator<=>, whose inlined memcmp GCC 12 flags under -O3
  // with an impossible bound (a -Wstringop-overread false positive).
  struct address_order {
    bool operator()(const byte_buffer& a, const byte_buffer& b) const {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
    }
  };
  explicit agent(agent_options options) noexcept;
  caf::expected<local_arena_id> add_local(std::unique_ptr<memory_region> region, std::byte* base,
                                          arena_layout layout, std::string shm_name,
                                          memory_kind memory);
  std::size_t progress_locked();
  void progress_loop();
  caf::expected<std::shared_ptr<endpoint>> endpoint_to(const arena_descriptor& d);
  caf::expected<internal::arena_binding> bind(direction dir, const arena_pair& pair,
                                              const transfer_plan& plan, std::uint32_t index);

  agent_options options_;
  byte_buffer address_;
  // Members in release order reversed: the thread and transfers go first,
  // then remote keys, endpoints, registrations, worker, context.
  std::shared_ptr<context> context_;
  std::shared_ptr<worker> worker_;
  std::vector<std::unique_ptr<local_arena>> locals_;
  std::map<byte_buffer, std::shared_ptr<endpoint>, address_order> peers_;
  std::vector<std::unique_ptr<remote_arena>> remotes_;
  std::unique_ptr<internal::ipc_streams> ipc_streams_;  // CUDA IPC copy streams, per device
  bool ucx_moves_device_ = false;                       // UCX reports the CUDA memory type
  std::vector<std::unique_ptr<internal::transfer_run>> runs_;
  mutable std::mutex mutex_;
  std::condition_variable finished_cv_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> threaded_{false};  // whether the progress thread runs
  std::atomic<int> waiting_{0};
  std::thread thread_;
};

}  // namespace mstar::transport
