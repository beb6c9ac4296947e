#include <cuda_runtime_api.h>
#include <string>

#include "kernels/device.hpp"

namespace mstar::kernels {

cuda_report query_cuda_devices() {
  cuda_report report;
  report.compiled = true;
  cudaRuntimeGetVersion(&report.runtime_version);
  cudaDriverGetVersion(&report.driver_version);
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    report.reason = std::string{"cudaGetDeviceCount failed: "} + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear it so later runtime calls start clean
    return report;
  }
  if (count == 0)
    report.reason = "the CUDA runtime sees no device";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
      report.reason =
          "cudaGetDeviceProperties(" + std::to_string(i) + ") failed: " + cudaGetErrorString(err);
      continue;
    }
    report.devices.push_back(cuda_device_info{i, prop.name, prop.major, prop.minor,
                                              static_cast<std::uint64_t>(prop.totalGlobalMem),
                                              prop.multiProcessorCount});
  }
  return report;
}

}  // namespace mstar::kernels
