#pragma once

// One transfer's state machine, driven by `agent` under its lock: issue
// ranges (RMA or a mapped-memory copy) within a window, reap completions,
// flush, and finish; a deadline, a failed endpoint or a cancel request end
// it early without leaving an operation that could still touch memory.

#include <deque>
#include <memory>
#include <vector>

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

  void note(caf::error err);
  void check_endpoints();
  void reap();
  void issue();
  void issue_rma(const byte_range& r, const arena_binding& b);
  void copy(const byte_range& r, const arena_binding& b);
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
  caf::error error_;
};

}  // namespace mstar::transport::internal
