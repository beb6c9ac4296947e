#pragma once

// Host-side setup the attention launchers share (attention_decode_*.cu,
// attention_prefill*.cu, attention_split.cu): raising a kernel's dynamic
// shared memory limit once per device, its resident blocks per SM cached
// by launch shape, the head_dim dispatch, the grid clamp and the one-pass
// stand-in for split arguments. Host code only: it generates no device
// code.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/cuda/internal/attend_split.cuh"

namespace mstar::kernels::cuda::detail {

/// Raises `Kernel`'s dynamic shared memory limit to `bytes`, once per
/// device: the attribute holds per device and kernel, so later launches
/// skip the runtime call. A template on the kernel itself, not its type,
/// because instantiations of one kernel template share a type. `bytes`
/// must be the same at every call for one `Kernel`.
template <auto Kernel>
cudaError_t raise_smem_limit(std::size_t bytes) {
  constexpr int max_devices = 64;
  static std::array<std::atomic<bool>, max_devices> raised{};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess)
    return err;
  const bool cached = device >= 0 && device < max_devices;
  if (cached && raised[static_cast<std::size_t>(device)].load(std::memory_order_relaxed))
    return cudaSuccess;
  err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes));
  if (err == cudaSuccess && cached)
    raised[static_cast<std::size_t>(device)].store(true, std::memory_order_relaxed);
  return err;
}

/// Resident blocks per SM of `Kernel` at `threads` threads and `smem`
/// bytes of dynamic shared memory (the occupancy calculator, cached per
/// shape), its limit raised to `smem_limit` first; 1 if the runtime
/// cannot say.
template <auto Kernel>
int resident_blocks(std::size_t smem_limit, int threads, std::size_t smem) {
  static std::mutex lock;
  static std::map<std::pair<int, std::size_t>, int> cache;
  const std::pair<int, std::size_t> key{threads, smem};
  {
    const std::lock_guard<std::mutex> hold{lock};
    if (const auto it = cache.find(key); it != cache.end())
      return it->second;
  }
  int n = 0;
  if (raise_smem_limit<Kernel>(smem_limit) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, threads, smem) != cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 1;
  }
  const std::lock_guard<std::mutex> hold{lock};
  cache[key] = n;
  return n;
}

/// Calls fn.template operator()<D>() for head_dim D of 64, 128 and, where
/// MaxD allows, 256; false for another head_dim. The decode launchers'
/// head_dim dispatch: each instantiates its kernel for the D it takes only.
template <int MaxD, class Fn>
bool with_head_dim(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 64:
      fn.template operator()<64>();
      return true;
    case 128:
      fn.template operator()<128>();
      return true;
    case 256:
      if constexpr (MaxD >= 256) {
        fn.template operator()<256>();
        return true;
      } else {
        return false;
      }
    default:
      return false;
  }
}

/// `blocks` as a grid size: at least 1, at most `cap` (by default the
/// largest grid.x).
[[nodiscard]] inline unsigned grid_of(std::int64_t blocks,
                                      std::int64_t cap = (std::int64_t{1} << 31) - 1) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, cap));
}

/// `s` where the caller split the step, else one chunk of `step`
/// positions a row: the one-pass launch, writing a.out.
[[nodiscard]] inline split_args split_or_one(const split_args* s, int step) {
  if (s != nullptr)
    return *s;
  split_args one{};
  one.splits = 1;
  one.step = step;
  return one;
}

}  // namespace mstar::kernels::cuda::detail
