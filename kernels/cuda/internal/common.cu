#include <array>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda {
namespace {

// -1: not read yet; then 0 / 1.
std::atomic<int> chained{-1};

}  // namespace

bool chained_launches() {
  int on = chained.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* e = std::getenv("MSTAR_PDL");
    on = e == nullptr || std::string_view{e} != "0" ? 1 : 0;
    int unread = -1;
    if (!chained.compare_exchange_strong(unread, on, std::memory_order_relaxed))
      on = unread;
  }
  return on == 1;
}

void set_chained_launches(bool on) {
  chained.store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace mstar::kernels::cuda

namespace mstar::kernels::cuda::detail {

bool chained_launches_on() {
  return kernels::cuda::chained_launches();
}

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
