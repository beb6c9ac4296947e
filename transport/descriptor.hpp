#pragma once

// What one process tells another about a registered arena, over any control
// channel (a CAF message, a pipe, a file): enough to connect to its worker,
// reach its memory with RMA, and address pages or slots inside it.

#include <caf/expected.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/kv_geometry.hpp"
#include "transport/ucx.hpp"

namespace mstar::transport {

/// What an arena holds, which decides how plans address it.
enum class arena_kind : std::uint8_t {
  kv_pages = 1,         ///< a KV pool: `[num_pages][page_bytes]`, page-major
  recurrent_block = 2,  ///< one recurrent block: `[num_layers][max_slots][slot_bytes]`
};

/// The geometry of an arena: `[num_layers][num_units][unit_bytes]` bytes,
/// where a unit is a page (KV, one "layer" since a page holds every layer)
/// or a slot (one recurrent block, layer-major).
struct arena_layout {
  arena_kind kind = arena_kind::kv_pages;  ///< pages or a recurrent block
  std::string name;                        ///< "kv", or the block's name ("ssm", "conv")
  std::uint64_t num_layers = 1;            ///< 1 for KV; the block's layers for recurrent
  std::uint64_t num_units = 0;             ///< pages, or slots per layer
  std::uint64_t unit_bytes = 0;            ///< bytes of one page, or of one slot in one layer

  /// The layout of a KV pool's arena of `num_pages` pages of `geometry`.
  [[nodiscard]] static arena_layout kv(const kernels::kv_geometry& geometry,
                                       std::uint64_t num_pages);
  /// The layout of recurrent block `name`: `num_layers` x `max_slots` slots
  /// of `slot_bytes`.
  [[nodiscard]] static arena_layout recurrent(std::string name, std::uint64_t num_layers,
                                              std::uint64_t max_slots, std::uint64_t slot_bytes);
  /// Total bytes: num_layers * num_units * unit_bytes (the caller validated
  /// that it does not overflow; `validate` checks).
  [[nodiscard]] std::uint64_t bytes() const noexcept { return num_layers * num_units * unit_bytes; }
  /// invalid_argument naming the field when a count is zero or the size
  /// overflows 64 bits.
  [[nodiscard]] caf::expected<void> validate() const;
  /// Field-wise equality.
  friend bool operator==(const arena_layout&, const arena_layout&) = default;
};

/// Bytes of a CUDA IPC memory handle (`cudaIpcMemHandle_t`, CUDA_IPC_HANDLE_SIZE),
/// fixed here so descriptors parse in builds without CUDA.
inline constexpr std::size_t cuda_ipc_handle_bytes = 64;

/// What a same-host peer needs to open a device arena with CUDA IPC: the
/// handle of the allocation holding it, where the arena starts in it, and
/// which GPU it lives on by PCI bus id (device ordinals differ between
/// processes under CUDA_VISIBLE_DEVICES; the bus id does not).
struct cuda_ipc_export {
  byte_buffer handle;        ///< `cudaIpcGetMemHandle` of the allocation base, 64 bytes
  std::uint64_t offset = 0;  ///< the arena's start minus the allocation base
  std::string pci_bus_id;    ///< the owner's device, "0000:3b:00.0" (`cudaDeviceGetPCIBusId`)
  /// Field-wise equality.
  friend bool operator==(const cuda_ipc_export&, const cuda_ipc_export&) = default;
};

/// A registered arena as a peer sees it. Plain data; serialise with
/// `to_json` / `descriptor_from_json`.
struct arena_descriptor {
  std::string owner;                       ///< the owning agent's name, for messages
  byte_buffer worker_address;              ///< the owner's UCX worker address
  byte_buffer packed_key;                  ///< the arena's packed UCX remote key
  std::uint64_t base = 0;                  ///< the arena's address in the owner's process
  std::uint64_t size = 0;                  ///< bytes registered from `base`
  arena_layout layout;                     ///< geometry; `layout.bytes() <= size`
  memory_kind memory = memory_kind::host;  ///< host or device memory
  std::string host;                        ///< the owner's host identity (`host_identity()`)
  std::string shm_name;                    ///< its shared-memory segment, empty when none
  std::int64_t pid = 0;                    ///< the owner's process id
  /// A device arena's CUDA IPC export (memory `cuda` only); absent in
  /// descriptors from owners built without CUDA, and in older ones.
  std::optional<cuda_ipc_export> cuda_ipc;

  /// Field-wise equality.
  friend bool operator==(const arena_descriptor&, const arena_descriptor&) = default;
};

/// `d` as a JSON object (bytes as lowercase hex).
[[nodiscard]] std::string to_json(const arena_descriptor& d);

/// Parses `to_json`'s output; parse_error or invalid_argument naming the
/// field and the rule it broke (a missing field, bad hex, a layout larger
/// than the region).
[[nodiscard]] caf::expected<arena_descriptor> descriptor_from_json(std::string_view text);

}  // namespace mstar::transport
