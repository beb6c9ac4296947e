#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda {
namespace {

// -1: not read yet; then 0 / 1.
std::atomic<int> chained{-1};
std::atomic<int> residual_early{-1};

// A switch's value: `setting` once read or set, else the environment's
// `name` (on_unless_zero: on unless "0"; otherwise on only at "1").
bool switch_value(std::atomic<int>& setting, const char* name, bool on_unless_zero) {
  int on = setting.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* e = std::getenv(name);
    on = on_unless_zero ? (e == nullptr || std::string_view{e} != "0" ? 1 : 0)
                        : (e != nullptr && std::string_view{e} == "1" ? 1 : 0);
    int unread = -1;
    if (!setting.compare_exchange_strong(unread, on, std::memory_order_relaxed))
      on = unread;
  }
  return on == 1;
}

}  // namespace

bool chained_launches() {
  return switch_value(chained, "MSTAR_PDL", true);
}

void set_chained_launches(bool on) {
  chained.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool gemv_residual_early() {
  return switch_value(residual_early, "MSTAR_GEMV_RESIDUAL_EARLY", false);
}

void set_gemv_residual_early(bool on) {
  residual_early.store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace mstar::kernels::cuda

namespace mstar::kernels::cuda::detail {

bool chained_launches_on() {
  return kernels::cuda::chained_launches();
}

bool chained_launch_of(const void* kernel) {
  if (!chained_launches_on())
    return false;
  // MSTAR_PDL_PLAIN (a diagnosis aid, read once): comma-separated pieces of
  // kernels' mangled names; a kernel whose name holds one launches plain,
  // after the kernel before it has completed.
  static const std::string plain = [] {
    const char* e = std::getenv("MSTAR_PDL_PLAIN");
    return std::string{e != nullptr ? e : ""};
  }();
  if (plain.empty())
    return true;
  static std::mutex mutex;
  static std::unordered_map<const void*, bool> known;
  const std::lock_guard lock{mutex};
  if (const auto it = known.find(kernel); it != known.end())
    return it->second;
  const char* name = nullptr;
  if (cudaFuncGetName(&name, kernel) != cudaSuccess || name == nullptr) {
    cudaGetLastError();
    name = "";
  }
  const std::string_view n{name};
  bool chained = true;
  for (std::size_t at = 0; at <= plain.size();) {
    const std::size_t end = std::min(plain.find(',', at), plain.size());
    const std::string_view piece = std::string_view{plain}.substr(at, end - at);
    if (!piece.empty() && n.find(piece) != std::string_view::npos)
      chained = false;
    at = end + 1;
  }
  known.emplace(kernel, chained);
  return chained;
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
