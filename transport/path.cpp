#include "transport/path.hpp"

namespace mstar::transport {

caf::expected<attach_path> choose_attach_path(const arena_descriptor& d, const path_inputs& in) {
  const bool same_host = !d.host.empty() && d.host == in.host;
  if (d.memory == memory_kind::host) {
    if (in.map_same_host && same_host && !d.shm_name.empty())
      return attach_path::mapped_segment;
    return attach_path::rma;
  }
  const std::string what = "device arena '" + d.layout.name + "' of '" + d.owner + "'";
  if (in.map_same_host && same_host && d.cuda_ipc) {
    if (!in.cuda_built)
      return failure(mstar::errc::unsupported,
                     what + ": its CUDA IPC handle cannot be opened by a build without CUDA");
    return attach_path::cuda_ipc;
  }
  if (in.ucx_moves_device)
    return attach_path::rma;
  // Say which condition of the IPC path failed: that is what the operator
  // can change (UCX's transports usually cannot be).
  std::string why;
  if (!same_host)
    why = "it is on another host (CUDA IPC reaches processes of one host only)";
  else if (!d.cuda_ipc)
    why =
        "its descriptor carries no CUDA IPC handle (owner built without CUDA, or its export "
        "failed)";
  else
    why = "same-host mapping is turned off (agent_options::map_same_host_segments)";
  return failure(mstar::errc::unsupported,
                 what + ": " + why + ", and UCX here has no CUDA transports to move device memory");
}

const char* to_string(attach_path p) noexcept {
  switch (p) {
    case attach_path::rma:
      return "rma";
    case attach_path::mapped_segment:
      return "mapped_segment";
    case attach_path::cuda_ipc:
      return "cuda_ipc";
  }
  return "unknown";
}

}  // namespace mstar::transport
