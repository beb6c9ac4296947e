#pragma once

// Pool storage in device memory: an `arena` (kernels/arena.hpp) over one
// cudaMalloc block whose byte movements run as the page-op kernels on a
// stream the arena borrows. Page and slot lists come from the host; the arena
// uploads them into its own small device list buffer, ordered on the same
// stream, so a pool calls it exactly as it calls a host arena.

#include <cuda_runtime_api.h>

#include "kernels/arena.hpp"

namespace mstar::kernels::cuda {

/// A zeroed device arena of `bytes` on the current device whose work runs on
/// `stream` (borrowed: it must outlive the arena; null is the legacy stream).
[[nodiscard]] result<std::unique_ptr<arena>> make_device_arena(std::size_t bytes,
                                                               cudaStream_t stream);

/// A factory making device arenas on `stream`, for the pools' configs, on
/// the device current when each is made. Every arena remembers its device
/// and makes it current before its operations, so the pools may call from
/// any thread.
[[nodiscard]] arena_factory device_arena_factory(cudaStream_t stream);
/// The same on `device`, whichever is current when the factory runs.
[[nodiscard]] arena_factory device_arena_factory(cudaStream_t stream, int device);

}  // namespace mstar::kernels::cuda
