#pragma once

// Shared by the GPU tests: the skip-without-a-device guard, device vectors
// with upload / poison / download, the normalised error and the per-dtype
// budgets (kernels/cuda/README.md keeps the same table).

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cuda/launch.hpp"
#include "kernels/device.hpp"
#include "tests/kernels/random_tensors.hpp"

namespace mstar::test::gpu {

#ifndef MSTAR_CUDA_MIN_ARCH
#define MSTAR_CUDA_MIN_ARCH 90  // the lowest of CMAKE_CUDA_ARCHITECTURES (tests/CMakeLists.txt)
#endif

using kernels::gpu_required;

/// Why GPU tests cannot run here (empty when a device is usable): no device,
/// or device 0's compute capability is below what the binaries are built
/// for. The CUDA runtime is asked once per process.
inline const std::string& no_gpu_reason() {
  static const std::string reason = [] {
    const kernels::cuda_report report = kernels::query_cuda_devices();
    if (report.devices.empty())
      return "no CUDA device: " +
             (report.reason.empty() ? std::string{"none found"} : report.reason);
    const auto& d = report.devices.front();
    if (d.compute_major * 10 + d.compute_minor < MSTAR_CUDA_MIN_ARCH) {
      return "device 0 (" + d.name + ") has compute capability " + std::to_string(d.compute_major) +
             "." + std::to_string(d.compute_minor) + ", below the sm_" +
             std::to_string(MSTAR_CUDA_MIN_ARCH) + " the binaries are built for";
    }
    return std::string{};
  }();
  return reason;
}

/// First statement of every GPU test: skips with the reason when no usable
/// device, or fails with it when gpu_required().
#define MSTAR_REQUIRE_GPU()                                                           \
  do {                                                                                \
    if (const std::string& why = ::mstar::test::gpu::no_gpu_reason(); !why.empty()) { \
      if (::mstar::test::gpu::gpu_required()) {                                       \
        GTEST_FAIL() << why << " (MSTAR_REQUIRE_GPU is set)";                         \
      }                                                                               \
      GTEST_SKIP() << why;                                                            \
    }                                                                                 \
  } while (false)

/// Normalised-error budgets, max |gpu - cpu| / max |cpu|.
namespace budget {
inline constexpr double f32_elementwise = 1e-6;  ///< silu, relu2, add, mul, embedding
inline constexpr double f32_reduction = 1e-5;    ///< rms norms, softmax, rope
inline constexpr double f32_gemm = 1e-5;         ///< linear through cublasSgemm
inline constexpr double bf16_in_f32_out = 1e-4;  ///< linear_bf16 with an f32 output
inline constexpr double bf16_out = 1e-2;         ///< linear_bf16 with a bf16 output
inline constexpr double attention = 1e-4;        ///< paged attention, f32 and bf16 arenas
/// paged attention's tensor-core prefill (bf16 arena, q and P rounded to bf16)
/// Measured on the H200: 4.6e-3 at most (bench/results/h200-kernels17.md).
inline constexpr double attention_bf16_q = 1e-2;
inline constexpr double recurrent = 1e-4;  ///< causal conv, SSD scan and update
}  // namespace budget

/// A seeded generator that prints its seed, so a failing case replays.
inline random_tensors seeded(std::uint64_t seed) {
  std::cout << "[ seed     ] " << seed << '\n';
  return random_tensors{seed};
}

/// `n` elements of T in device memory.
template <class T>
struct device_vector {
  kernels::cuda::device_buffer buffer;
  std::size_t count = 0;

  [[nodiscard]] T* data() const { return buffer.as<T>(); }
  [[nodiscard]] std::size_t size() const { return count; }
  [[nodiscard]] std::size_t bytes() const { return count * sizeof(T); }
  [[nodiscard]] std::span<const T> span() const { return {data(), count}; }

  /// A copy on the host (synchronous: waits for all prior device work).
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> host(count);
    if (count != 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), data(), bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }
};

/// Device memory for `n` elements, every byte `fill` (0xff: float and bf16
/// NaN, int32 -1): a kernel that skips an element shows.
template <class T>
device_vector<T> poisoned(std::size_t n, int fill = 0xff) {
  device_vector<T> out;
  auto buffer = kernels::cuda::device_buffer::make(n * sizeof(T));
  if (!buffer) {
    ADD_FAILURE() << buffer.error().to_string();
    return out;
  }
  out.buffer = std::move(buffer).value();
  out.count = n;
  if (n != 0) {
    EXPECT_EQ(cudaMemset(out.data(), fill, out.bytes()), cudaSuccess);
  }
  return out;
}

/// A device copy of `host`.
template <class T>
device_vector<T> upload(const std::vector<T>& host) {
  device_vector<T> out = poisoned<T>(host.size());
  if (!host.empty() && out.data() != nullptr) {
    EXPECT_EQ(cudaMemcpy(out.data(), host.data(), out.bytes(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  return out;
}

/// max |got - ref| / max |ref| (a floor of 1e-30); infinite when a NaN or
/// inf appears where the reference has none, or the sizes differ.
inline double normalised_error(std::span<const float> got, std::span<const float> ref) {
  if (got.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  double diff = 0.0;
  double scale = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i]) && std::isnan(got[i]))
      continue;
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i]))
      return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(double{got[i]} - double{ref[i]}));
    scale = std::max(scale, std::abs(double{ref[i]}));
  }
  return diff / std::max(scale, 1e-30);
}

/// Asserts `normalised_error(got, ref) <= budget`, printing both (also on
/// success, so a run records the errors measured).
inline ::testing::AssertionResult within(std::span<const float> got, std::span<const float> ref,
                                         double budget) {
  const double err = normalised_error(got, ref);
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::cout << "[ error    ] " << (test != nullptr ? test->name() : "?") << ": " << err
            << " (budget " << budget << ")\n";
  if (err <= budget)
    return ::testing::AssertionSuccess() << "normalised error " << err;
  return ::testing::AssertionFailure()
         << "normalised error " << err << " exceeds the budget " << budget;
}

/// Waits for the device and expects no error from any earlier launch.
inline void expect_device_ok() {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

/// The bytes of `v`, for byte-exact comparisons.
template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<std::uint8_t> out(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace mstar::test::gpu
