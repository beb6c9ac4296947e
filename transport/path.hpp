#pragma once

// Which way `agent::attach` reaches a peer's arena, decided from the
// descriptor and what this process has: a mapped shared-memory segment or an
// opened CUDA IPC handle on the same host, UCX RMA otherwise. A device arena
// that none of them can reach is refused here, naming why, rather than left
// to fail (or worse, succeed on the wrong memory) at transfer time.

#include <caf/expected.hpp>
#include <cstdint>
#include <string>

#include "transport/descriptor.hpp"

namespace mstar::transport {

/// How an attached arena is reached.
enum class attach_path : std::uint8_t {
  rma,             ///< UCX get / put through the peer's worker and key
  mapped_segment,  ///< the peer's shared-memory segment mapped here, memcpy
  cuda_ipc,        ///< the peer's device allocation opened here, cudaMemcpyAsync
};

/// What decides the path besides the descriptor.
struct path_inputs {
  std::string host;               ///< this process's `host_identity()`
  bool map_same_host = true;      ///< `agent_options::map_same_host_segments`
  bool ucx_moves_device = false;  ///< UCX here reports the CUDA memory type
  bool cuda_built = false;        ///< this build has CUDA (MSTAR_HAVE_CUDA)
};

/// The path for `d`: same-host host arenas with a segment are mapped,
/// same-host device arenas with a CUDA IPC export are opened, the rest go
/// over RMA, except a device arena that UCX cannot move here, which fails
/// with `unsupported` saying which condition is missing.
[[nodiscard]] caf::expected<attach_path> choose_attach_path(const arena_descriptor& d,
                                                            const path_inputs& in);

/// "rma", "mapped_segment" or "cuda_ipc".
[[nodiscard]] const char* to_string(attach_path p) noexcept;

}  // namespace mstar::transport
