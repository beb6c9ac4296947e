#pragma once

// One transfer's state machine, driven by `agent` under its lock: issue
// ranges (RMA, a mapped-memory copy, or a CUDA IPC copy on the agent's
// stream) within a window, reap completions, flush, and finish; a deadline, a failed endpoint or a
// cancel request end it early without leaving an operation that could still touch memory.

#include <deque>
#include <memory>
#include <vector>

#include "transport/internal/cuda_ipc.hpp"
#include "transport/plan.hpp"
#include "transport/transfer.hpp"
#include "transport/ucx.hpp"

namespace mstar::transport::internal {

/// Where plan arena `i` lives on each side, for one transfer.
struct arena_binding {
  std::byte* local = nullptr;      // our arena
  std::uint64_t local_size = 0;    // its registered bytes
  ucp_mem_h local_memh = nullptr;  // its registration (RMA only)
  std::uint64_t remote_base = 0;   // the peer's arena address (RMA)
  std::uint64_t remote_size = 0;   // the peer's registered bytes
  ucp_rkey_h rkey = nullptr;       // the peer's key (RMA)
  std::shared_ptr<endpoint> ep;    // to the peer (RMA); null when mapped
  std::byte* mapped = nullptr;     // the peer's arena mapped here, or null
  // CUDA IPC: the peer's device arena opened here (held until the run ends,
  // so a detach mid-transfer cannot close it under the copies), our arena's
  // device, and the agent's stream on that device.
  std::shared_ptr<ipc_mapping> ipc;
  int local_device = -1;
  void* stream = nullptr;
};

class transfer_run {
 public:
  transfer_run(direction dir, transfer_plan plan, std::vector<arena_binding> arenas,
               transfer_options options, std::shared_ptr<transfer_status> status);
  transfer_run(const transfer_run&) = delete;
  transfer_run& operator=(const transfer_run&) = delete;
  // Aborts (closed) when destroyed unfinished, so no request outlives it.
  ~transfer_run();

  // One step of work at time `now`; true when the run finished in this call.
  bool advance(clock::time_point now);
  // Ends now with `err` (kept behind an earlier error): endpoints with
  // operations outstanding are force-closed so nothing lands afterwards.
  void abort(caf::error err);
  [[nodiscard]] bool finished() const noexcept { return phase_ == phase::done; }
  [[nodiscard]] const transfer_status* status() const noexcept { return status_.get(); }

 private:
  enum class phase { issuing, draining, flushing, done };
  struct inflight_op {
    request req;
    std::uint64_t bytes = 0;
  };
  // Copies enqueued on one stream in one round, done when `done` is.
  struct ipc_slice {
    std::unique_ptr<ipc_event> done;
    std::uint64_t bytes = 0;
  };
  // Bytes enqueued this round per stream, not yet behind an event.
  struct ipc_round {
    void* stream = nullptr;
    int device = -1;
    std::uint64_t bytes = 0;
  };

  void note(caf::error err);
  void check_endpoints();
  void reap();
  void issue();
  void issue_rma(const byte_range& r, const arena_binding& b);
  void copy(const byte_range& r, const arena_binding& b);
  bool enqueue_ipc(const byte_range& r, const arena_binding& b);
  void close_ipc_round();
  void reap_ipc();
  void wait_ipc();
  void start_flush();
  void reap_flushes();
  void finish();

  direction dir_;
  transfer_plan plan_;
  std::vector<arena_binding> arenas_;
  transfer_options options_;
  std::shared_ptr<transfer_status> status_;
  std::vector<std::shared_ptr<endpoint>> endpoints_;  // distinct, of RMA bindings
  phase phase_ = phase::issuing;
  std::size_t next_ = 0;  // next range to issue
  std::uint64_t inflight_bytes_ = 0;
  std::vector<inflight_op> inflight_;
  std::vector<request> flushes_;
  std::vector<std::shared_ptr<ipc_mapping>> owners_;  // distinct, of CUDA IPC bindings
  std::vector<ipc_slice> ipc_inflight_;
  std::vector<ipc_round> ipc_round_;
  std::uint64_t ipc_inflight_bytes_ = 0;
  caf::error error_;
};

}  // namespace mstar::transport::internal
