// The CUDA runtime owners (kernels/cuda/runtime.hpp): buffers, streams,
// events, the cuBLAS handle, and how a cudaError_t becomes a project error.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_support.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels::cuda {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;

TEST(gpu_runtime, cuda_error_names_the_call_and_the_code) {
  MSTAR_REQUIRE_GPU();
  const mstar::error err = cuda_error(cudaErrorInvalidValue, "cudaMemcpy(weights)");
  EXPECT_EQ(err.code(), errc::invalid_argument);
  EXPECT_TRUE(test::contains(err.message(), "cudaMemcpy(weights)"));
  EXPECT_TRUE(test::contains(err.message(), "cudaErrorInvalidValue"));
  EXPECT_EQ(cuda_error(cudaErrorMemoryAllocation, "x").code(), errc::out_of_range);
  EXPECT_EQ(cuda_error(cudaErrorNoDevice, "x").code(), errc::unsupported);
  EXPECT_TRUE(check(cudaSuccess, "x").has_value());
  EXPECT_FALSE(check(cudaErrorLaunchFailure, "x").has_value());
}

TEST(gpu_runtime, device_buffer_round_trips_bytes_and_moves_ownership) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(11);
  const std::vector<float> host = rng.floats(1000);
  auto d = upload(host);
  EXPECT_EQ(d.download(), host);
  device_buffer moved = std::move(d.buffer);
  EXPECT_EQ(d.buffer.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
  EXPECT_EQ(moved.size(), host.size() * sizeof(float));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(moved.data()) % 256, 0U);
  auto empty = device_buffer::make(0);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->data(), nullptr);
}

TEST(gpu_runtime, an_impossible_allocation_is_an_error_not_a_crash) {
  MSTAR_REQUIRE_GPU();
  auto huge = device_buffer::make(std::size_t{1} << 60);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code(), errc::out_of_range);
  EXPECT_TRUE(test::contains(huge.error().message(), "cudaMalloc"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // nothing sticky left behind
}

TEST(gpu_runtime, stream_and_events_order_and_time_a_copy) {
  MSTAR_REQUIRE_GPU();
  auto s = stream::make();
  auto start = event::make();
  auto stop = event::make();
  ASSERT_TRUE(s && start && stop);
  auto rng = test::gpu::seeded(12);
  const std::vector<float> host = rng.floats(1 << 20);
  auto src = upload(host);
  auto dst = poisoned<float>(host.size());
  ASSERT_TRUE(start->record(s->get()));
  ASSERT_EQ(
      cudaMemcpyAsync(dst.data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, s->get()),
      cudaSuccess);
  ASSERT_TRUE(stop->record(s->get()));
  ASSERT_TRUE(stop->synchronize());
  const auto ms = event::elapsed_ms(*start, *stop);
  ASSERT_TRUE(ms.has_value());
  EXPECT_GE(*ms, 0.0F);
  ASSERT_TRUE(s->synchronize());
  EXPECT_EQ(dst.download(), host);
}

TEST(gpu_runtime, blas_handle_owns_a_workspace_and_moves) {
  MSTAR_REQUIRE_GPU();
  auto blas = blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  EXPECT_NE(blas->get(), nullptr);
  blas_handle moved = std::move(blas).value();
  EXPECT_NE(moved.get(), nullptr);
}

}  // namespace
}  // namespace mstar::kernels::cuda
