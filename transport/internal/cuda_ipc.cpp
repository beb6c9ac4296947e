#include "transport/internal/cuda_ipc.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef MSTAR_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace mstar::transport::internal {

namespace {

std::atomic<std::size_t> open_mappings{0};

[[maybe_unused]] caf::error no_cuda(std::string_view what) {
  return failure(mstar::errc::unsupported,
                 std::string{what} + ": this build has no CUDA (MSTAR_CUDA=OFF or no toolkit)");
}

// A pidfd on `pid`: becomes readable when the process exits, and unlike a
// bare pid it cannot be confused with a later process given the same number.
[[maybe_unused]] int open_pidfd(std::int64_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

#ifdef MSTAR_HAVE_CUDA

// A CUDA failure where it is first seen: the call, the code's name and text.
// The runtime keeps the last error per thread; it is read back so a later,
// unrelated check does not see this one again.
caf::error cuda_error(cudaError_t status, std::string_view what) {
  (void)cudaGetLastError();
  return logged(failure(errc::cuda_failure, std::string{what} + ": " + cudaGetErrorName(status) +
                                                " (" + cudaGetErrorString(status) + ")"));
}

// Makes `device` current for a scope and puts the caller's device back: the
// agent is called from any thread, whose current device is its own business.
class device_guard {
 public:
  device_guard() = default;
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    if (previous_ >= 0)
      (void)cudaSetDevice(previous_);
  }
  caf::error use(int device) {
    int current = -1;
    if (auto st = cudaGetDevice(&current); st != cudaSuccess)
      return cuda_error(st, "cudaGetDevice");
    if (current == device)
      return {};
    if (auto st = cudaSetDevice(device); st != cudaSuccess)
      return cuda_error(st, "cudaSetDevice(" + std::to_string(device) + ")");
    previous_ = current;
    return {};
  }

 private:
  int previous_ = -1;
};

// cuMemGetAddressRange through the runtime's driver entry point: the
// allocation holding a pointer. Taken this way so nothing links libcuda
// (cudart_static loads it at run time, and hosts without a driver must
// still load the transport).
using address_range_fn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);

caf::expected<std::pair<CUdeviceptr, std::size_t>> allocation_of(const void* p) {
  static const address_range_fn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<address_range_fn>(nullptr);
    }
    return reinterpret_cast<address_range_fn>(f);
  }();
  if (fn == nullptr)
    return failure(errc::cuda_failure,
                   "cuMemGetAddressRange: not found through "
                   "cudaGetDriverEntryPointByVersion");
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (const CUresult r = fn(&base, &size, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
    return logged(failure(errc::cuda_failure,
                          "cuMemGetAddressRange: CUresult " + std::to_string(static_cast<int>(r))));
  return std::pair{base, size};
}

#endif  // MSTAR_HAVE_CUDA

}  // namespace

bool cuda_built() noexcept {
#ifdef MSTAR_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::size_t open_ipc_mappings() noexcept {
  return open_mappings.load();
}

#ifdef MSTAR_HAVE_CUDA

caf::expected<int> device_of(const void* p) {
  cudaPointerAttributes attr{};
  if (auto st = cudaPointerGetAttributes(&attr, p); st != cudaSuccess)
    return cuda_error(st, "cudaPointerGetAttributes");
  if (attr.type != cudaMemoryTypeDevice)
    return failure(mstar::errc::unsupported,
                   "memory at a device arena's base is not device memory (cudaMalloc)");
  return attr.device;
}

caf::expected<device_export> export_device_arena(const std::byte* base) {
  auto device = device_of(base);
  if (!device)
    return device.error();
  device_guard guard;
  if (auto err = guard.use(*device))
    return err;
  auto allocation = allocation_of(base);
  if (!allocation)
    return allocation.error();
  cudaIpcMemHandle_t handle{};
  // The handle names the whole allocation; the peer adds the offset. Memory
  // from cudaMallocAsync pools or cuMemCreate has no legacy IPC handle and
  // fails here (cudaErrorInvalidValue).
  if (auto st = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(allocation->first));
      st != cudaSuccess)
    return cuda_error(st, "cudaIpcGetMemHandle (device arenas must come from cudaMalloc)");
  char bus[64] = {};
  if (auto st = cudaDeviceGetPCIBusId(bus, sizeof bus, *device); st != cudaSuccess)
    return cuda_error(st, "cudaDeviceGetPCIBusId");
  device_export out;
  out.device = *device;
  out.ipc.handle.resize(sizeof handle);
  static_assert(sizeof(cudaIpcMemHandle_t) == cuda_ipc_handle_bytes);
  std::memcpy(out.ipc.handle.data(), &handle, sizeof handle);
  out.ipc.offset = reinterpret_cast<std::uintptr_t>(base) - allocation->first;
  out.ipc.pci_bus_id = bus;
  return out;
}

struct opened_allocation {
  void* base = nullptr;  // what cudaIpcOpenMemHandle returned
  int device = -1;
  std::string owner;
  opened_allocation() = default;
  opened_allocation(const opened_allocation&) = delete;
  opened_allocation& operator=(const opened_allocation&) = delete;
  ~opened_allocation() {
    device_guard guard;
    (void)guard.use(device);
    if (auto st = cudaIpcCloseMemHandle(base); st != cudaSuccess)
      (void)cuda_error(st, "cudaIpcCloseMemHandle of " + owner + "'s allocation");
    --open_mappings;
  }
};

namespace {

// The allocations open in this process by owner pid and handle: the runtime
// wants one open per handle and process, whichever agent or arena asks.
std::mutex registry_mutex;
std::map<std::string, std::weak_ptr<opened_allocation>> registry;

caf::expected<std::shared_ptr<opened_allocation>> open_allocation(const arena_descriptor& d,
                                                                  int device,
                                                                  const std::string& owner) {
  std::string key = std::to_string(d.pid) + ":";
  key.append(reinterpret_cast<const char*>(d.cuda_ipc->handle.data()), d.cuda_ipc->handle.size());
  const std::lock_guard lock{registry_mutex};
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  if (auto it = registry.find(key); it != registry.end()) {
    if (auto live = it->second.lock())
      return live;
  }
  device_guard guard;
  if (auto err = guard.use(device))
    return err;
  cudaIpcMemHandle_t handle{};
  std::memcpy(&handle, d.cuda_ipc->handle.data(), sizeof handle);
  void* base = nullptr;
  if (auto st = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
      st != cudaSuccess)
    return cuda_error(st, "cudaIpcOpenMemHandle of " + owner + "'s arena '" + d.layout.name + "'");
  auto opened = std::make_shared<opened_allocation>();
  opened->base = base;
  opened->device = device;
  opened->owner = owner;
  ++open_mappings;
  registry[key] = opened;
  return opened;
}

}  // namespace

caf::expected<std::shared_ptr<ipc_mapping>> ipc_mapping::open(const arena_descriptor& d) {
  if (!d.cuda_ipc || d.cuda_ipc->handle.size() != cuda_ipc_handle_bytes)
    return failure(mstar::errc::invalid_argument,
                   "arena of '" + d.owner + "': no CUDA IPC handle in its descriptor");
  if (d.pid == ::getpid())
    return failure(mstar::errc::unsupported,
                   "device arena '" + d.layout.name + "' of '" + d.owner +
                       "' belongs to this process: CUDA IPC opens other processes' handles only");
  std::shared_ptr<ipc_mapping> m{new ipc_mapping};
  m->owner_ = "'" + d.owner + "' (pid " + std::to_string(d.pid) + ")";
  m->pidfd_ = open_pidfd(d.pid);
  if (m->pidfd_ < 0) {
    if (errno == ESRCH)
      return logged(failure(errc::peer_failed, "owner " + m->owner_ + " of device arena '" +
                                                   d.layout.name + "' has exited"));
    spdlog::warn("transport: no pidfd on {} ({}): a transfer from it will not notice its exit",
                 m->owner_, std::strerror(errno));
  }
  if (auto st = cudaDeviceGetByPCIBusId(&m->device_, d.cuda_ipc->pci_bus_id.c_str());
      st != cudaSuccess) {
    (void)cudaGetLastError();
    return failure(mstar::errc::not_found, "device arena of " + m->owner_ + ": no device " +
                                               d.cuda_ipc->pci_bus_id +
                                               " visible here (CUDA_VISIBLE_DEVICES?)");
  }
  auto opened = open_allocation(d, m->device_, m->owner_);
  if (!opened)
    return opened.error();
  m->allocation_ = std::move(*opened);
  void* base = m->allocation_->base;
  // The allocation must hold the whole arena: a wrong offset or size in a
  // descriptor must not turn into copies past the allocation. Where the
  // driver cannot say (it should for opened handles), the check is skipped
  // with a warning rather than refusing the path.
  device_guard guard;
  if (auto err = guard.use(m->device_))
    return err;
  auto allocation = allocation_of(base);
  if (!allocation) {
    spdlog::warn(
        "transport: size of {}'s opened allocation unknown ({}); offset and size "
        "unchecked",
        m->owner_, describe(allocation.error()));
  } else if (d.cuda_ipc->offset > allocation->second ||
             d.size > allocation->second - d.cuda_ipc->offset) {
    return failure(mstar::errc::out_of_range, "device arena of " + m->owner_ + ": offset " +
                                                  std::to_string(d.cuda_ipc->offset) + " + size " +
                                                  std::to_string(d.size) +
                                                  " passes its allocation of " +
                                                  std::to_string(allocation->second) + " bytes");
  }
  m->arena_ = static_cast<std::byte*>(base) + d.cuda_ipc->offset;
  return m;
}

ipc_mapping::~ipc_mapping() {
  if (pidfd_ >= 0)
    ::close(pidfd_);
}

bool ipc_mapping::owner_alive() const {
  if (pidfd_ < 0)
    return true;
  pollfd fd{pidfd_, POLLIN, 0};
  return ::poll(&fd, 1, 0) == 0;
}

caf::expected<void> enable_peer_access(int from, int to) {
  if (from == to)
    return {};
  int can = 0;
  if (auto st = cudaDeviceCanAccessPeer(&can, from, to); st != cudaSuccess)
    return cuda_error(st, "cudaDeviceCanAccessPeer");
  if (can == 0) {
    spdlog::debug("transport: no peer access from device {} to {}; copies are staged", from, to);
    return {};
  }
  device_guard guard;
  if (auto err = guard.use(from))
    return err;
  const auto st = cudaDeviceEnablePeerAccess(to, 0);
  if (st == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return {};
  }
  if (st != cudaSuccess)
    return cuda_error(st, "cudaDeviceEnablePeerAccess");
  return {};
}

ipc_streams::~ipc_streams() {
  for (auto& [device, stream] : streams_) {
    device_guard guard;
    (void)guard.use(device);
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
}

caf::expected<void*> ipc_streams::stream(int device) {
  if (auto it = streams_.find(device); it != streams_.end())
    return it->second;
  device_guard guard;
  if (auto err = guard.use(device))
    return err;
  cudaStream_t s = nullptr;
  if (auto st = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); st != cudaSuccess)
    return cuda_error(st, "cudaStreamCreateWithFlags");
  streams_.emplace(device, s);
  return static_cast<void*>(s);
}

caf::expected<void> enqueue_copy(void* stream, int stream_device, std::byte* dst, int dst_device,
                                 const std::byte* src, int src_device, std::uint64_t bytes) {
  device_guard guard;
  if (auto err = guard.use(stream_device))
    return err;
  auto* s = static_cast<cudaStream_t>(stream);
  const auto st = dst_device == src_device
                      ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)
                      : cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s);
  if (st != cudaSuccess)
    return cuda_error(st, dst_device == src_device ? "cudaMemcpyAsync" : "cudaMemcpyPeerAsync");
  return {};
}

caf::expected<std::unique_ptr<ipc_event>> ipc_event::record(void* stream, int device) {
  device_guard guard;
  if (auto err = guard.use(device))
    return err;
  std::unique_ptr<ipc_event> e{new ipc_event};
  e->device_ = device;
  cudaEvent_t ev = nullptr;
  if (auto st = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); st != cudaSuccess)
    return cuda_error(st, "cudaEventCreateWithFlags");
  e->event_ = ev;
  if (auto st = cudaEventRecord(ev, static_cast<cudaStream_t>(stream)); st != cudaSuccess)
    return cuda_error(st, "cudaEventRecord");
  return e;
}

ipc_event::~ipc_event() {
  if (event_ != nullptr) {
    device_guard guard;
    (void)guard.use(device_);
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  }
}

caf::expected<bool> ipc_event::ready() const {
  const auto st = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (st == cudaSuccess)
    return true;
  if (st == cudaErrorNotReady)
    return false;
  return cuda_error(st, "a CUDA IPC copy (cudaEventQuery)");
}

void ipc_event::synchronize() const {
  if (auto st = cudaEventSynchronize(static_cast<cudaEvent_t>(event_)); st != cudaSuccess)
    (void)cuda_error(st, "cudaEventSynchronize");
}

pinned_staging::~pinned_staging() {
  if (buffer_ != nullptr)
    (void)cudaFreeHost(buffer_);
}

caf::expected<const std::byte*> pinned_staging::fetch(const std::byte* src, std::uint64_t bytes) {
  if (bytes > capacity_) {
    if (buffer_ != nullptr)
      (void)cudaFreeHost(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    void* p = nullptr;
    if (auto st = cudaMallocHost(&p, bytes); st != cudaSuccess)
      return cuda_error(st, "cudaMallocHost (checksum staging)");
    buffer_ = static_cast<std::byte*>(p);
    capacity_ = bytes;
  }
  if (auto st = cudaMemcpy(buffer_, src, bytes, cudaMemcpyDeviceToHost); st != cudaSuccess)
    return cuda_error(st, "cudaMemcpy device to host (checksum staging)");
  return static_cast<const std::byte*>(buffer_);
}

#else  // no CUDA: every operation says so

struct opened_allocation {};

caf::expected<int> device_of(const void*) {
  return no_cuda("device_of");
}

caf::expected<device_export> export_device_arena(const std::byte*) {
  return no_cuda("exporting a device arena over CUDA IPC");
}

caf::expected<std::shared_ptr<ipc_mapping>> ipc_mapping::open(const arena_descriptor& d) {
  return no_cuda("opening the CUDA IPC handle of '" + d.owner + "'");
}

ipc_mapping::~ipc_mapping() {
  if (pidfd_ >= 0)
    ::close(pidfd_);
}

bool ipc_mapping::owner_alive() const {
  return true;
}

caf::expected<void> enable_peer_access(int, int) {
  return no_cuda("enable_peer_access");
}

ipc_streams::~ipc_streams() = default;

caf::expected<void*> ipc_streams::stream(int) {
  return no_cuda("a CUDA copy stream");
}

caf::expected<void> enqueue_copy(void*, int, std::byte*, int, const std::byte*, int,
                                 std::uint64_t) {
  return no_cuda("a CUDA IPC copy");
}

caf::expected<std::unique_ptr<ipc_event>> ipc_event::record(void*, int) {
  return no_cuda("a CUDA event");
}

ipc_event::~ipc_event() = default;

caf::expected<bool> ipc_event::ready() const {
  return no_cuda("a CUDA event");
}

void ipc_event::synchronize() const {}

pinned_staging::~pinned_staging() = default;

caf::expected<const std::byte*> pinned_staging::fetch(const std::byte*, std::uint64_t) {
  return no_cuda("checksums of device memory");
}

#endif  // MSTAR_HAVE_CUDA

}  // namespace mstar::transport::internal
