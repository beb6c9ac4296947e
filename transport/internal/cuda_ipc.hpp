#pragma once

// The CUDA side of the same-host device path (transport/README.md, "Device
// arenas"): exporting a local device arena as a CUDA IPC handle, opening a
// peer's (RAII, closed when the last transfer using it is done), the agent's
// copy streams and the events that mark a slice of copies complete, and a
// pinned staging buffer for checksums of device bytes. Declared in every
// build; without CUDA (no MSTAR_HAVE_CUDA) every operation fails with
// `unsupported`, so transport builds and links without the CUDA runtime.
// CUDA types stay out of this header (streams and events are opaque).

#include <caf/expected.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "transport/descriptor.hpp"

namespace mstar::transport::internal {

/// Whether this build has CUDA (MSTAR_HAVE_CUDA).
[[nodiscard]] bool cuda_built() noexcept;

/// A local device arena as exported: its device ordinal here and what a
/// peer needs to open it.
struct device_export {
  int device = -1;      ///< ordinal in this process
  cuda_ipc_export ipc;  ///< handle, offset in the allocation, PCI bus id
};

/// Exports the device allocation holding `base` (cudaIpcGetMemHandle of the
/// allocation base, found with cuMemGetAddressRange through the runtime's
/// driver entry point). cuda_failure naming the call; `unsupported` without
/// CUDA or for memory that is not device memory.
[[nodiscard]] caf::expected<device_export> export_device_arena(const std::byte* base);

/// The ordinal of the device holding `p` (a device pointer).
[[nodiscard]] caf::expected<int> device_of(const void* p);

/// Peer allocations open in this process now (cudaIpcOpenMemHandle not yet
/// closed): tests check that none leak.
[[nodiscard]] std::size_t open_ipc_mappings() noexcept;

/// One peer allocation opened in this process (cudaIpcOpenMemHandle),
/// shared by every arena in it and closed when the last goes: a process
/// opens a handle once (arenas of one allocation, or one arena attached by
/// two agents, share it).
struct opened_allocation;

/// A peer's device arena opened here: its allocation opened on the owner's
/// device (found by PCI bus id) and closed with the last arena using it;
/// plus a pidfd on the owner, since an opened allocation outlives its
/// exporter (the driver keeps it) and copies from a dead owner would still
/// succeed.
class ipc_mapping {
 public:
  /// Opens `d.cuda_ipc`; cuda_failure naming the call, not_found when no
  /// device here has the bus id, peer_failed when the owner is already gone.
  [[nodiscard]] static caf::expected<std::shared_ptr<ipc_mapping>> open(const arena_descriptor& d);
  ipc_mapping(const ipc_mapping&) = delete;
  ipc_mapping& operator=(const ipc_mapping&) = delete;
  ~ipc_mapping();
  /// The arena's first byte in this process (allocation base + offset).
  [[nodiscard]] std::byte* data() const noexcept { return arena_; }
  /// The device ordinal (here) holding it.
  [[nodiscard]] int device() const noexcept { return device_; }
  /// False once the owning process has exited (polls its pidfd; true when
  /// no pidfd could be had, which `open` logs).
  [[nodiscard]] bool owner_alive() const;
  /// "'<owner>' (pid <pid>)", for messages.
  [[nodiscard]] const std::string& owner() const noexcept { return owner_; }

 private:
  ipc_mapping() = default;
  std::shared_ptr<opened_allocation> allocation_;
  std::byte* arena_ = nullptr;
  int device_ = -1;
  int pidfd_ = -1;
  std::string owner_;
};

/// Makes peer access from `from` to `to` (ordinals) where the hardware has
/// it; a no-op for one device. Copies fall back to the driver's staged peer
/// copy otherwise, so only a CUDA error other than "already enabled" or
/// "not possible" fails.
[[nodiscard]] caf::expected<void> enable_peer_access(int from, int to);

/// An agent's copy streams, one non-blocking stream per device, made on
/// first use. Destroy only after every transfer using them ended.
class ipc_streams {
 public:
  ipc_streams() = default;
  ipc_streams(const ipc_streams&) = delete;
  ipc_streams& operator=(const ipc_streams&) = delete;
  ~ipc_streams();
  /// The stream (a cudaStream_t) of `device`.
  [[nodiscard]] caf::expected<void*> stream(int device);

 private:
  std::map<int, void*> streams_;
};

/// Enqueues one copy of `bytes` on `stream` (of `stream_device`): a
/// device-to-device cudaMemcpyAsync within one device, cudaMemcpyPeerAsync
/// between two (direct where peer access was enabled).
[[nodiscard]] caf::expected<void> enqueue_copy(void* stream, int stream_device, std::byte* dst,
                                               int dst_device, const std::byte* src, int src_device,
                                               std::uint64_t bytes);

/// An event recorded on a stream after a slice of copies: the slice is done
/// when the event is. Destroying it does not wait; see `synchronize`.
class ipc_event {
 public:
  /// Records an event on `stream` of `device`.
  [[nodiscard]] static caf::expected<std::unique_ptr<ipc_event>> record(void* stream, int device);
  ipc_event(const ipc_event&) = delete;
  ipc_event& operator=(const ipc_event&) = delete;
  ~ipc_event();
  /// True when done, false while pending, cuda_failure when a copy failed.
  [[nodiscard]] caf::expected<bool> ready() const;
  /// Blocks until done (what was enqueued before it can no longer touch memory).
  void synchronize() const;

 private:
  ipc_event() = default;
  // Unused in builds without CUDA, where record() refuses (clang warns).
  [[maybe_unused]] void* event_ = nullptr;
  [[maybe_unused]] int device_ = -1;
};

/// Pinned host memory that device bytes are copied into for checksums.
class pinned_staging {
 public:
  pinned_staging() = default;
  pinned_staging(const pinned_staging&) = delete;
  pinned_staging& operator=(const pinned_staging&) = delete;
  ~pinned_staging();
  /// `bytes` from device pointer `src`, copied synchronously into the
  /// buffer (grown as needed); valid until the next call.
  [[nodiscard]] caf::expected<const std::byte*> fetch(const std::byte* src, std::uint64_t bytes);

 private:
  // Unused in builds without CUDA, where fetch() refuses (clang warns).
  [[maybe_unused]] std::byte* buffer_ = nullptr;
  [[maybe_unused]] std::uint64_t capacity_ = 0;
};

}  // namespace mstar::transport::internal
