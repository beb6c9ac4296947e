#include "kernels/device.hpp"

#include <cstdlib>
#include <gtest/gtest.h>
#include <string>

namespace mstar::kernels {
namespace {

TEST(query_cuda_devices, answers_with_devices_or_a_reason) {
  const auto report = query_cuda_devices();
#ifdef MSTAR_HAVE_CUDA
  EXPECT_TRUE(report.compiled);
#else
  EXPECT_FALSE(report.compiled);
#endif
  if (report.devices.empty()) {
    EXPECT_FALSE(report.reason.empty());
    // The device scripts set MSTAR_REQUIRE_GPU: there, no device is a failure.
    if (mstar::kernels::gpu_required()) {
      GTEST_FAIL() << "no CUDA device here (MSTAR_REQUIRE_GPU is set): " << report.reason;
    }
    GTEST_SKIP() << "no CUDA device here: " << report.reason;
  }
  for (const auto& d : report.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory_bytes, 0u);
    EXPECT_GE(d.compute_major, 7) << "sm_90 binaries need a recent GPU";
  }
}

}  // namespace
}  // namespace mstar::kernels
