#include <array>
#include <atomic>

#include "kernels/cuda/internal/common.cuh"

namespace mstar::kernels::cuda::detail {

int sm_count() {
  constexpr int max_devices = 64;
  static std::array<std::atomic<int>, max_devices> cache{};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= max_devices) {
    cudaGetLastError();
    return 132;
  }
  int count = cache[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
  if (count > 0)
    return count;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      count <= 0) {
    cudaGetLastError();
    return 132;
  }
  cache[static_cast<std::size_t>(device)].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace mstar::kernels::cuda::detail
