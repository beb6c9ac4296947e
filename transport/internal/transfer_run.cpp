#include "transport/internal/transfer_run.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <ucp/api/ucp.h>

namespace mstar::transport::internal {

transfer_run::transfer_run(direction dir, transfer_plan plan, std::vector<arena_binding> arenas,
                           transfer_options options, std::shared_ptr<transfer_status> status)
    : dir_(dir),
      plan_(std::move(plan)),
      arenas_(std::move(arenas)),
      options_(options),
      status_(std::move(status)) {
  for (const auto& b : arenas_) {
    if (b.ep != nullptr &&
        std::find(endpoints_.begin(), endpoints_.end(), b.ep) == endpoints_.end())
      endpoints_.push_back(b.ep);
    if (b.ipc != nullptr && std::find(owners_.begin(), owners_.end(), b.ipc) == owners_.end())
      owners_.push_back(b.ipc);
  }
  inflight_.reserve(options_.max_inflight_ops);
}

transfer_run::~transfer_run() {
  if (phase_ != phase::done)
    abort(failure(errc::closed, "transfer dropped before it finished"));
}

void transfer_run::note(caf::error err) {
  if (!error_)
    error_ = std::move(err);
  if (phase_ == phase::issuing)
    phase_ = phase::draining;
}

bool transfer_run::advance(clock::time_point now) {
  if (phase_ == phase::done)
    return false;
  if (now > status_->deadline) {
    const auto done = status_->bytes_done.load();
    abort(logged(failure(errc::timed_out,
                         fmt::format("transfer of {} bytes passed its deadline with {} bytes done",
                                     plan_.total_bytes, done))));
    return true;
  }
  check_endpoints();
  if (phase_ == phase::done)
    return true;
  if (status_->cancel_requested.load() && !error_)
    note(failure(errc::cancelled, "transfer cancelled by the caller"));
  reap();
  if (phase_ == phase::issuing)
    issue();
  if (phase_ == phase::issuing && next_ == plan_.ranges.size())
    phase_ = phase::draining;
  if (phase_ == phase::draining && inflight_.empty() && ipc_inflight_.empty())
    start_flush();
  if (phase_ == phase::flushing)
    reap_flushes();
  return phase_ == phase::done;
}

void transfer_run::check_endpoints() {
  for (const auto& ep : endpoints_) {
    if (ep->failed()) {
      abort(ep->error());
      return;
    }
    if (ep->closed()) {
      abort(logged(failure(errc::closed, "endpoint to '" + ep->peer() +
                                             "' was closed (a transfer on it timed out): "
                                             "attach the peer's arenas again")));
      return;
    }
  }
  // An opened device allocation outlives its exporter, so copies from a dead
  // owner would still succeed: its exit is what fails the transfer, as a
  // dead endpoint does on the RMA path.
  for (const auto& owner : owners_) {
    if (!owner->owner_alive()) {
      abort(logged(failure(errc::peer_failed, "owner " + owner->owner() +
                                                  " of an arena opened over CUDA IPC exited "
                                                  "during the transfer")));
      return;
    }
  }
}

void transfer_run::reap() {
  reap_ipc();
  std::uint64_t completed = 0;
  std::erase_if(inflight_, [&](inflight_op& op) {
    const ucs_status_t status = op.req.status();
    if (status == UCS_INPROGRESS)
      return false;
    if (status == UCS_OK)
      completed += op.bytes;
    else if (!error_)  // the first failure is the one to report (and log)
      note(ucx_error(status, dir_ == direction::read ? "ucp_get_nbx" : "ucp_put_nbx"));
    else
      note({});
    inflight_bytes_ -= op.bytes;
    return true;
  });
  status_->bytes_done.fetch_add(completed);
}

void transfer_run::issue() {
  std::uint64_t copied = 0;
  while (phase_ == phase::issuing && next_ < plan_.ranges.size()) {
    const auto& r = plan_.ranges[next_];
    const auto& b = arenas_[r.arena];
    if (b.mapped != nullptr) {
      if (copied >= options_.copy_slice_bytes)
        break;
      copy(r, b);
      copied += r.bytes;
    } else if (b.ipc != nullptr) {
      // A slice per round as the mapped copy has (so cancel and deadline
      // are seen between slices), and at most the RMA byte window queued
      // on the stream (what an abort has to wait out).
      const bool window_full = (ipc_inflight_bytes_ > 0 || copied > 0) &&
                               ipc_inflight_bytes_ + copied + r.bytes > options_.max_inflight_bytes;
      if (copied >= options_.copy_slice_bytes || window_full)
        break;
      if (!enqueue_ipc(r, b))
        break;
      copied += r.bytes;
    } else {
      const bool window_full =
          !inflight_.empty() && (inflight_.size() >= options_.max_inflight_ops ||
                                 inflight_bytes_ + r.bytes > options_.max_inflight_bytes);
      if (window_full)
        break;
      issue_rma(r, b);
    }
    ++next_;
  }
  close_ipc_round();
}

bool transfer_run::enqueue_ipc(const byte_range& r, const arena_binding& b) {
  const bool read = dir_ == direction::read;
  std::byte* dst = read ? b.local + r.dst_offset : b.ipc->data() + r.dst_offset;
  const std::byte* src = read ? b.ipc->data() + r.src_offset : b.local + r.src_offset;
  const int dst_device = read ? b.local_device : b.ipc->device();
  const int src_device = read ? b.ipc->device() : b.local_device;
  if (auto ok = enqueue_copy(b.stream, b.local_device, dst, dst_device, src, src_device, r.bytes);
      !ok) {
    note(std::move(ok.error()));
    return false;
  }
  auto it = std::find_if(ipc_round_.begin(), ipc_round_.end(),
                         [&](const ipc_round& x) { return x.stream == b.stream; });
  if (it == ipc_round_.end())
    it = ipc_round_.insert(ipc_round_.end(), ipc_round{b.stream, b.local_device, 0});
  it->bytes += r.bytes;
  return true;
}

void transfer_run::close_ipc_round() {
  for (const auto& round : ipc_round_) {
    auto event = ipc_event::record(round.stream, round.device);
    if (!event) {
      // The copies are queued but unmarked: wait them out here, so nothing
      // can land after the run reports its end.
      note(std::move(event.error()));
      wait_ipc();
      continue;
    }
    ipc_inflight_bytes_ += round.bytes;
    ipc_inflight_.push_back({std::move(*event), round.bytes});
  }
  ipc_round_.clear();
}

void transfer_run::reap_ipc() {
  std::uint64_t completed = 0;
  std::erase_if(ipc_inflight_, [&](ipc_slice& slice) {
    auto ready = slice.done->ready();
    if (ready && !*ready)
      return false;
    if (ready)
      completed += slice.bytes;
    else
      note(std::move(ready.error()));
    ipc_inflight_bytes_ -= slice.bytes;
    return true;
  });
  status_->bytes_done.fetch_add(completed);
}

void transfer_run::wait_ipc() {
  // A queued copy cannot be cancelled: waiting for it is what guarantees it
  // no longer touches either arena. The window bounds the wait.
  for (const auto& slice : ipc_inflight_)
    slice.done->synchronize();
  if (!ipc_round_.empty()) {
    // Enqueued without an event (its recording failed): the streams
    // themselves are waited on through a fresh event each.
    for (const auto& round : ipc_round_) {
      if (auto event = ipc_event::record(round.stream, round.device))
        (*event)->synchronize();
    }
  }
}

void transfer_run::copy(const byte_range& r, const arena_binding& b) {
  if (dir_ == direction::read)
    std::memcpy(b.local + r.dst_offset, b.mapped + r.src_offset, r.bytes);
  else
    std::memcpy(b.mapped + r.dst_offset, b.local + r.src_offset, r.bytes);
  status_->bytes_done.fetch_add(r.bytes);
}

void transfer_run::issue_rma(const byte_range& r, const arena_binding& b) {
  ucp_request_param_t param{};
  if (b.local_memh != nullptr) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    param.memh = b.local_memh;
  }
  void* status_ptr = nullptr;
  if (dir_ == direction::read) {
    status_ptr = ucp_get_nbx(b.ep->native(), b.local + r.dst_offset, r.bytes,
                             b.remote_base + r.src_offset, b.rkey, &param);
  } else {
    status_ptr = ucp_put_nbx(b.ep->native(), b.local + r.src_offset, r.bytes,
                             b.remote_base + r.dst_offset, b.rkey, &param);
  }
  auto req = request::adopt(status_ptr, dir_ == direction::read ? "ucp_get_nbx" : "ucp_put_nbx");
  if (!req) {
    note(std::move(req.error()));
    return;
  }
  if (req->status() == UCS_OK) {
    status_->bytes_done.fetch_add(r.bytes);
    return;
  }
  inflight_bytes_ += r.bytes;
  inflight_.push_back({std::move(*req), r.bytes});
}

void transfer_run::start_flush() {
  phase_ = phase::flushing;
  // Remote completion of puts (and of anything before a cancel) is only
  // known after a flush; gets are complete already but the flush also
  // surfaces a failure of the endpoint.
  for (const auto& ep : endpoints_) {
    ucp_request_param_t param{};
    auto req = request::adopt(ucp_ep_flush_nbx(ep->native(), &param),
                              "ucp_ep_flush_nbx to '" + ep->peer() + "'");
    if (!req) {
      note(std::move(req.error()));
      continue;
    }
    flushes_.push_back(std::move(*req));
  }
  reap_flushes();
}

void transfer_run::reap_flushes() {
  std::erase_if(flushes_, [&](request& req) {
    const ucs_status_t status = req.status();
    if (status == UCS_INPROGRESS)
      return false;
    if (status != UCS_OK && !error_)
      note(ucx_error(status, "ucp_ep_flush_nbx"));
    return true;
  });
  if (flushes_.empty())
    finish();
}

void transfer_run::abort(caf::error err) {
  if (phase_ == phase::done)
    return;
  note(std::move(err));
  if (!inflight_.empty() || !flushes_.empty()) {
    // Operations still outstanding may yet read or write arena memory; a
    // forced close completes them (cancelled) and cuts the peer off.
    for (const auto& ep : endpoints_)
      ep->force_close();
  }
  inflight_.clear();
  flushes_.clear();
  wait_ipc();
  ipc_inflight_.clear();
  ipc_round_.clear();
  ipc_inflight_bytes_ = 0;
  finish();
}

void transfer_run::finish() {
  phase_ = phase::done;
  {
    const std::lock_guard lock{status_->mutex};
    status_->error = error_;
  }
  status_->finished.store(true, std::memory_order_release);
}

}  // namespace mstar::transport::internal
