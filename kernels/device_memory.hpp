#pragma once

// A device's memory now, for sizing pools from it (engine/memory_plan.hpp).
// Apart from device.hpp so that the CUDA sources including that one need not
// compile the project's result type.

#include <cstdint>

#include "core/result.hpp"

namespace mstar::kernels {

/// A device's memory as the CUDA runtime sees it now (`cudaMemGetInfo`).
struct device_memory_info {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;  ///< not yet taken by this or any other process
};

/// The memory of device `index`, queried without changing the calling
/// thread's current device for longer than the call (kernels/cuda/runtime.cpp;
/// device_cpu_only.cpp in a CPU-only build). unsupported in a CPU-only build
/// or without a device; invalid_argument for an index the runtime does not know.
[[nodiscard]] result<device_memory_info> query_device_memory(int index);

}  // namespace mstar::kernels
