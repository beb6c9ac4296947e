#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace mstar::kernels {

/// One accelerator this process can see.
struct cuda_device_info {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::uint64_t total_memory_bytes = 0;
  int multiprocessors = 0;
};

/// What the CUDA runtime reports about this machine.
struct cuda_report {
  bool compiled = false;  ///< this build has CUDA sources (MSTAR_CUDA)
  int runtime_version = 0;
  int driver_version = 0;
  std::vector<cuda_device_info> devices;
  std::string reason;  ///< why `devices` is empty, when it is
};

/// Queries the CUDA runtime once. Never fails: a CPU-only build or a machine
/// without a GPU or driver yields an empty device list and the reason.
[[nodiscard]] cuda_report query_cuda_devices();

/// Whether the environment asks for a GPU: MSTAR_REQUIRE_GPU set to anything
/// but "" or "0" (the device scripts, bench/h200_*.sh, set it). Then a missing
/// device, or one the binaries cannot run on, is a failure of the GPU tests
/// and benchmarks instead of a skip.
[[nodiscard]] inline bool gpu_required() {
  const char* v = std::getenv("MSTAR_REQUIRE_GPU");
  return v != nullptr && std::string_view{v} != "" && std::string_view{v} != "0";
}

}  // namespace mstar::kernels
