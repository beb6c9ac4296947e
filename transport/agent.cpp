#include "transport/agent.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "transport/internal/cuda_ipc.hpp"
#include "transport/internal/transfer_run.hpp"
#include "transport/shm.hpp"

namespace mstar::transport {

namespace {

// A run still unfinished this long after its deadline is cut off by `wait`
// (the run enforces its own deadline; this covers a stalled progress loop).
constexpr auto wait_grace = std::chrono::seconds{2};
// Idle progress rounds before the progress thread sleeps on the event fd.
constexpr int idle_rounds_before_sleep = 64;
constexpr int sleep_ms = 5;

}  // namespace

struct agent::local_arena {
  std::byte* base = nullptr;
  arena_layout layout;
  std::string shm_name;
  memory_kind memory = memory_kind::host;
  std::unique_ptr<memory_region> region;  // null for a device arena UCX refused
  byte_buffer packed_key;
  int device = -1;                     // device arenas: the ordinal here
  std::optional<cuda_ipc_export> ipc;  // device arenas: the CUDA IPC export
};

struct agent::remote_arena {
  arena_descriptor descriptor;
  attach_path path = attach_path::rma;
  std::unique_ptr<remote_key> key;             // RMA path
  std::optional<kernels::shm_arena> mapping;   // same-host host arena
  std::shared_ptr<internal::ipc_mapping> ipc;  // same-host device arena
};

namespace {

// Whether UCX here moves device memory: Debian's UCX has no CUDA transports,
// and an RMA path for a device arena would then fail only at transfer time.
bool ucx_reports_cuda(const context& ctx) {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ctx.native(), &attr) != UCS_OK)
    return false;
  return (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

}  // namespace

caf::error transfer_handle::error() const {
  if (status_ == nullptr)
    return failure(mstar::errc::invalid_argument, "empty transfer handle");
  const std::lock_guard lock{status_->mutex};
  return status_->error;
}

agent::agent(agent_options options) noexcept : options_(std::move(options)) {}

caf::expected<std::unique_ptr<agent>> agent::make(agent_options options) {
  if (!options.deployment.empty()) {
    auto removed = remove_stale_segments(options.deployment);
    if (!removed)
      return removed.error();
    for (const auto& name : *removed)
      spdlog::info("transport: removed stale segment {} of a dead process", name);
  }
  std::unique_ptr<agent> a{new agent{std::move(options)}};
  auto ctx = context::make(a->options_.ucx);
  if (!ctx)
    return ctx.error();
  a->context_ = std::move(*ctx);
  a->ucx_moves_device_ = ucx_reports_cuda(*a->context_);
  a->ipc_streams_ = std::make_unique<internal::ipc_streams>();
  auto w = worker::make(a->context_);
  if (!w)
    return w.error();
  a->worker_ = std::move(*w);
  auto address = a->worker_->address();
  if (!address)
    return address.error();
  a->address_ = std::move(*address);
  return a;
}

agent::~agent() {
  stop_progress_thread();
  const std::lock_guard lock{mutex_};
  for (auto& run : runs_)
    run->abort(failure(errc::closed, "agent '" + options_.name + "' destroyed"));
  runs_.clear();
  remotes_.clear();  // remote keys before their endpoints
  peers_.clear();    // endpoints close, progressing the worker
  locals_.clear();   // registrations before the worker and context
}

caf::expected<local_arena_id> agent::add_local(std::unique_ptr<memory_region> region,
                                               std::byte* base, arena_layout layout,
                                               std::string shm_name, memory_kind memory) {
  auto arena = std::make_unique<local_arena>();
  if (region != nullptr) {
    auto key = region->packed_key();
    if (!key)
      return key.error();
    arena->packed_key = std::move(*key);
    base = region->base();
  }
  arena->base = base;
  arena->layout = std::move(layout);
  arena->shm_name = std::move(shm_name);
  arena->memory = memory;
  arena->region = std::move(region);
  locals_.push_back(std::move(arena));
  return static_cast<local_arena_id>(locals_.size() - 1);
}

caf::expected<local_arena_id> agent::register_arena(std::byte* base, arena_layout layout,
                                                    std::string shm_name, memory_kind memory) {
  if (auto ok = layout.validate(); !ok)
    return ok.error();
  const std::lock_guard lock{mutex_};
  if (memory == memory_kind::host) {
    auto region = memory_region::make(context_, base, layout.bytes(), memory);
    if (!region)
      return region.error();
    return add_local(std::move(*region), base, std::move(layout), std::move(shm_name), memory);
  }
  // A device arena: exported for same-host peers where CUDA is built, and
  // registered with UCX only where UCX moves device memory (a UCX without
  // CUDA transports is not asked to map device memory it cannot use).
  const auto what = "device arena '" + layout.name + "'";
  int device = -1;
  std::optional<cuda_ipc_export> exported;
  caf::error export_error = failure(mstar::errc::unsupported, "this build has no CUDA");
  if (internal::cuda_built()) {
    auto d = internal::device_of(base);
    if (!d)
      return failure(mstar::errc::invalid_argument, what + ": " + transport::describe(d.error()));
    device = *d;
    if (auto e = internal::export_device_arena(base)) {
      exported = std::move(e->ipc);
    } else {
      export_error = std::move(e.error());
      spdlog::warn("transport: {} not exported over CUDA IPC: {}", what,
                   transport::describe(export_error));
    }
  }
  std::unique_ptr<memory_region> region;
  if (ucx_moves_device_) {
    auto r = memory_region::make(context_, base, layout.bytes(), memory);
    if (!r && !exported)
      return r.error();
    if (r)
      region = std::move(*r);
  } else if (!exported) {
    return failure(mstar::errc::unsupported,
                   what + ": UCX here has no CUDA transports and no CUDA IPC export was made (" +
                       transport::describe(export_error) + ")");
  }
  auto id = add_local(std::move(region), base, std::move(layout), std::move(shm_name), memory);
  if (id) {
    locals_[*id]->device = device;
    locals_[*id]->ipc = std::move(exported);
  }
  return id;
}

caf::expected<local_arena_id> agent::allocate_arena(arena_layout layout) {
  if (auto ok = layout.validate(); !ok)
    return ok.error();
  const std::lock_guard lock{mutex_};
  auto region = memory_region::allocate(context_, layout.bytes());
  if (!region)
    return region.error();
  auto* base = (*region)->base();
  return add_local(std::move(*region), base, std::move(layout), {}, memory_kind::host);
}

std::byte* agent::arena_base(local_arena_id id) const {
  const std::lock_guard lock{mutex_};
  return id < locals_.size() ? locals_[id]->base : nullptr;
}

caf::expected<local_arena_id> agent::register_segment(kernels::shm_arena& segment,
                                                      arena_layout layout) {
  if (layout.bytes() > segment.size())
    return failure(mstar::errc::invalid_argument,
                   "arena '" + layout.name + "' is larger than segment '" + segment.name() + "'");
  return register_arena(segment.data(), std::move(layout), segment.name());
}

caf::expected<arena_descriptor> agent::describe(local_arena_id id) const {
  const std::lock_guard lock{mutex_};
  if (id >= locals_.size())
    return failure(mstar::errc::not_found, "no local arena " + std::to_string(id));
  const auto& a = *locals_[id];
  return arena_descriptor{options_.name,
                          address_,
                          a.packed_key,
                          reinterpret_cast<std::uint64_t>(a.base),
                          a.layout.bytes(),
                          a.layout,
                          a.memory,
                          host_identity(),
                          a.shm_name,
                          static_cast<std::int64_t>(::getpid()),
                          a.ipc};
}

caf::expected<std::shared_ptr<endpoint>> agent::endpoint_to(const arena_descriptor& d) {
  auto& slot = peers_[d.worker_address];
  if (slot != nullptr && !slot->closed() && !slot->failed())
    return slot;
  if (slot != nullptr)
    slot->force_close();  // failed: UCX wants it closed; its keys are released first
  auto ep = endpoint::make(worker_, d.worker_address, d.owner, options_.detect_peer_failure);
  if (!ep) {
    peers_.erase(d.worker_address);
    return ep.error();
  }
  slot = *ep;
  return slot;
}

caf::expected<remote_arena_id> agent::attach(const arena_descriptor& d) {
  if (auto ok = d.layout.validate(); !ok)
    return ok.error();
  auto arena = std::make_unique<remote_arena>();
  arena->descriptor = d;
  auto path = choose_attach_path(d, {.host = host_identity(),
                                     .map_same_host = options_.map_same_host_segments,
                                     .ucx_moves_device = ucx_moves_device_,
                                     .cuda_built = internal::cuda_built()});
  if (!path)
    return path.error();
  arena->path = *path;
  if (*path == attach_path::mapped_segment) {
    auto mapping = open_segment(d);
    if (!mapping)
      return mapping.error();
    arena->mapping.emplace(std::move(*mapping));
  } else if (*path == attach_path::cuda_ipc) {
    auto mapping = internal::ipc_mapping::open(d);
    if (!mapping)
      return mapping.error();
    arena->ipc = std::move(*mapping);
  }
  const std::lock_guard lock{mutex_};
  if (*path == attach_path::rma) {
    auto ep = endpoint_to(d);
    if (!ep)
      return ep.error();
    auto key = remote_key::make(*ep, d.packed_key);
    if (!key)
      return key.error();
    arena->key = std::move(*key);
  }
  remotes_.push_back(std::move(arena));
  return static_cast<remote_arena_id>(remotes_.size() - 1);
}

bool agent::is_mapped(remote_arena_id id) const {
  const std::lock_guard lock{mutex_};
  return id < remotes_.size() && remotes_[id] != nullptr && remotes_[id]->mapping.has_value();
}

caf::expected<attach_path> agent::path_of(remote_arena_id id) const {
  const std::lock_guard lock{mutex_};
  if (id >= remotes_.size() || remotes_[id] == nullptr)
    return failure(mstar::errc::not_found, "no attached arena " + std::to_string(id));
  return remotes_[id]->path;
}

caf::expected<void> agent::detach(remote_arena_id id) {
  const std::lock_guard lock{mutex_};
  if (id >= remotes_.size() || remotes_[id] == nullptr)
    return failure(mstar::errc::not_found, "no attached arena " + std::to_string(id));
  // A running transfer holds a CUDA IPC mapping (shared), but uses a remote
  // key or a mapped segment by raw handle: those wait for the runs to end.
  if (remotes_[id]->path != attach_path::cuda_ipc && !runs_.empty())
    return failure(mstar::errc::invalid_argument,
                   "attached arena " + std::to_string(id) +
                       ": transfers are running; detach it after they end");
  remotes_[id].reset();
  return {};
}

caf::expected<internal::arena_binding> agent::bind(direction dir, const arena_pair& pair,
                                                   const transfer_plan& plan, std::uint32_t index) {
  if (pair.local >= locals_.size() || pair.remote >= remotes_.size() ||
      remotes_[pair.remote] == nullptr)
    return failure(mstar::errc::not_found,
                   "plan arena " + std::to_string(index) + ": no such local or attached arena");
  const auto& local = *locals_[pair.local];
  auto& remote = *remotes_[pair.remote];
  if (local.layout.kind != plan.kind || remote.descriptor.layout.kind != plan.kind)
    return failure(mstar::errc::invalid_argument,
                   "plan arena " + std::to_string(index) + ": arena kinds do not match the plan");
  internal::arena_binding b;
  b.local = local.base;
  b.local_size = local.layout.bytes();
  b.local_memh = local.region != nullptr ? local.region->native() : nullptr;
  b.remote_base = remote.descriptor.base;
  b.remote_size = remote.descriptor.size;
  const auto where = "plan arena " + std::to_string(index) + ": ";
  if (remote.ipc) {
    if (local.memory != memory_kind::cuda || local.device < 0)
      return failure(mstar::errc::unsupported,
                     where +
                         "a CUDA IPC arena copies device to device: bind a device arena "
                         "registered with memory_kind::cuda");
    if (auto ok = internal::enable_peer_access(local.device, remote.ipc->device()); !ok)
      return ok.error();
    auto stream = ipc_streams_->stream(local.device);
    if (!stream)
      return stream.error();
    b.ipc = remote.ipc;
    b.local_device = local.device;
    b.stream = *stream;
  } else if (remote.mapping) {
    if (local.memory != memory_kind::host)
      return failure(mstar::errc::unsupported,
                     "plan arena " + std::to_string(index) +
                         ": a mapped segment copies with memcpy, into host memory only");
    b.mapped = remote.mapping->data();
  } else {
    if (local.region == nullptr)
      return failure(mstar::errc::unsupported,
                     where + "our arena '" + local.layout.name +
                         "' has no UCX registration (UCX here has no CUDA transports)");
    if (remote.key->native() == nullptr)
      return failure(errc::closed, "arena of '" + remote.descriptor.owner +
                                       "': its endpoint was closed; attach it again");
    b.rkey = remote.key->native();
    b.ep = remote.key->owner();
  }
  // Every range must stay inside both arenas: a bad plan must not become a
  // stray write into another process.
  const bool read = dir == direction::read;
  for (const auto& r : plan.ranges) {
    if (r.arena != index)
      continue;
    const auto local_end = (read ? r.dst_offset : r.src_offset) + r.bytes;
    const auto remote_end = (read ? r.src_offset : r.dst_offset) + r.bytes;
    if (local_end > b.local_size || remote_end > b.remote_size)
      return failure(mstar::errc::out_of_range,
                     "plan arena " + std::to_string(index) + ": a range ends past an arena");
  }
  return b;
}

caf::expected<transfer_handle> agent::start(direction dir, transfer_plan plan,
                                            const std::vector<arena_pair>& arenas,
                                            clock::time_point deadline) {
  if (plan.num_arenas != arenas.size())
    return failure(mstar::errc::invalid_argument, "plan has " + std::to_string(plan.num_arenas) +
                                                      " arenas, " + std::to_string(arenas.size()) +
                                                      " bound");
  const std::lock_guard lock{mutex_};
  std::vector<internal::arena_binding> bindings;
  for (std::uint32_t i = 0; i < arenas.size(); ++i) {
    auto b = bind(dir, arenas[i], plan, i);
    if (!b)
      return b.error();
    bindings.push_back(std::move(*b));
  }
  auto status = std::make_shared<internal::transfer_status>();
  status->total_bytes = plan.total_bytes;
  status->deadline = deadline;
  runs_.push_back(std::make_unique<internal::transfer_run>(
      dir, std::move(plan), std::move(bindings), options_.transfers, status));
  worker_->signal();
  return transfer_handle{std::move(status)};
}

std::size_t agent::progress_locked() {
  std::size_t events = worker_->progress();
  const auto now = clock::now();
  std::size_t finished = 0;
  for (auto& run : runs_) {
    if (run->advance(now))
      ++finished;
  }
  if (finished > 0) {
    std::erase_if(runs_, [](const auto& run) { return run->finished(); });
    finished_cv_.notify_all();
  }
  return events + finished;
}

std::size_t agent::progress() {
  const std::lock_guard lock{mutex_};
  return progress_locked();
}

caf::expected<void> agent::wait(const transfer_handle& h) {
  if (!h.valid())
    return failure(mstar::errc::invalid_argument, "wait on an empty transfer handle");
  const auto limit = h.deadline() + wait_grace;
  ++waiting_;
  while (!h.finished() && clock::now() < limit) {
    if (threaded_.load()) {
      std::unique_lock lock{mutex_};
      // Help first: a mapped copy (or whatever UCX has ready) then finishes
      // on this thread, without two hops through the progress thread, which
      // on a busy core each cost a scheduling slice.
      progress_locked();
      finished_cv_.wait_until(lock, limit, [&] { return h.finished() || !threaded_.load(); });
    } else if (progress() == 0) {
      std::this_thread::yield();
    }
  }
  --waiting_;
  if (!h.finished()) {
    const std::lock_guard lock{mutex_};
    for (auto& run : runs_) {
      if (run->status() == h.status_ptr())
        run->abort(logged(failure(errc::timed_out, "transfer did not finish by its deadline")));
    }
    std::erase_if(runs_, [](const auto& run) { return run->finished(); });
  }
  if (auto err = h.error())
    return err;
  return {};
}

caf::expected<void> agent::start_progress_thread() {
  if (thread_.joinable())
    return failure(errc::closed, "agent '" + options_.name + "': progress thread already runs");
  stop_ = false;
  thread_ = std::thread{[this] { progress_loop(); }};
  threaded_ = true;
  return {};
}

void agent::stop_progress_thread() {
  if (!thread_.joinable())
    return;
  threaded_ = false;
  stop_ = true;
  worker_->signal();
  thread_.join();
  finished_cv_.notify_all();  // a waiter sleeping on the thread progresses itself now
}

void agent::progress_loop() {
  int idle = 0;
  while (!stop_.load()) {
    bool sleep = false;
    std::size_t events = 0;
    {
      const std::lock_guard lock{mutex_};
      events = progress_locked();
      idle = events == 0 && runs_.empty() ? idle + 1 : 0;
      if (idle > idle_rounds_before_sleep)
        sleep = worker_->arm();
    }
    if (sleep) {
      pollfd fd{worker_->event_fd(), POLLIN, 0};
      ::poll(&fd, 1, sleep_ms);
      idle = 0;
    } else if (events == 0 || waiting_.load() > 0) {
      std::this_thread::yield();  // let a peer on the same core, or a caller, in
    }
  }
}

}  // namespace mstar::transport
