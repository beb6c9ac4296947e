// Linear layers through cuBLAS (kernels/cuda/math.hpp) against the CPU's
// BLAS sgemm (kernels/math.hpp): f32, and bf16 inputs with f32 accumulation
// (the reference multiplies the same bf16-rounded values in f32).
#include <gtest/gtest.h>

#include "core/dtype.hpp"
#include "kernels/math.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

struct shape {
  std::int64_t rows, inner, cols;
  bool bias;
};
// One row with K a multiple of 8 takes the GEMV kernel (kernels/cuda/gemv.cu;
// 1001 features leave a warp one row); the others take cuBLAS.
constexpr shape shapes[] = {{1, 1024, 3000, false}, {64, 512, 768, true},  {7, 33, 65, true},
                            {1, 2048, 1001, true},  {1, 4096, 257, false}, {8, 1032, 130, true},
                            {5, 8, 64, false}};

TEST(gpu_linear, f32_linear_matches_sgemm_with_and_without_bias) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(301);
  for (const auto& s : shapes) {
    SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.inner) + "x" +
                 std::to_string(s.cols));
    const auto x = rng.floats(static_cast<std::size_t>(s.rows * s.inner));
    const auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
    const auto b = rng.floats(static_cast<std::size_t>(s.cols));
    std::vector<float> ref(static_cast<std::size_t>(s.rows * s.cols));
    const view<const float, 1> bv =
        s.bias ? contiguous(b.data(), std::array{s.cols}) : view<const float, 1>{};
    ASSERT_TRUE(linear({contiguous(x.data(), std::array{s.rows, s.inner}),
                        contiguous(w.data(), std::array{s.cols, s.inner}), bv,
                        contiguous(ref.data(), std::array{s.rows, s.cols})}));
    const auto d_x = upload(x);
    const auto d_w = upload(w);
    const auto d_b = upload(b);
    auto d_out = poisoned<float>(ref.size());
    const view<const float, 1> dbv =
        s.bias ? contiguous<const float>(d_b.data(), std::array{s.cols}) : view<const float, 1>{};
    ASSERT_EQ(cuda::linear(*blas,
                           {contiguous<const float>(d_x.data(), std::array{s.rows, s.inner}),
                            contiguous<const float>(d_w.data(), std::array{s.cols, s.inner}), dbv,
                            contiguous(d_out.data(), std::array{s.rows, s.cols})},
                           nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(d_out.download(), ref, budget::f32_gemm));
  }
}

TEST(gpu_linear, bf16_linear_accumulates_in_f32_to_f32_and_bf16_outputs) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(302);
  for (const auto& s : shapes) {
    SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.inner) + "x" +
                 std::to_string(s.cols));
    auto x = rng.floats(static_cast<std::size_t>(s.rows * s.inner));
    auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
    const auto b = rng.floats(static_cast<std::size_t>(s.cols));
    std::vector<std::uint16_t> xh(x.size());
    std::vector<std::uint16_t> wh(w.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = bf16_bits_to_float(xh[i] = float_to_bf16_bits(x[i]));
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = bf16_bits_to_float(wh[i] = float_to_bf16_bits(w[i]));
    std::vector<float> ref(static_cast<std::size_t>(s.rows * s.cols));
    const view<const float, 1> bv =
        s.bias ? contiguous(b.data(), std::array{s.cols}) : view<const float, 1>{};
    ASSERT_TRUE(linear({contiguous(x.data(), std::array{s.rows, s.inner}),
                        contiguous(w.data(), std::array{s.cols, s.inner}), bv,
                        contiguous(ref.data(), std::array{s.rows, s.cols})}));
    const auto d_x = upload(xh);
    const auto d_w = upload(wh);
    const auto d_b = upload(b);
    const view<const float, 1> dbv =
        s.bias ? contiguous<const float>(d_b.data(), std::array{s.cols}) : view<const float, 1>{};
    cuda::linear_bf16_params p{
        contiguous<const std::uint16_t>(d_x.data(), std::array{s.rows, s.inner}),
        contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner}), dbv};
    auto d_f32 = poisoned<float>(ref.size());
    p.out_f32 = contiguous(d_f32.data(), std::array{s.rows, s.cols});
    ASSERT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
    EXPECT_TRUE(within(d_f32.download(), ref, budget::bf16_in_f32_out));

    auto d_bf16 = poisoned<std::uint16_t>(ref.size());
    auto d_wide = poisoned<float>(ref.size());
    p.out_f32 = {};
    p.out_bf16 = contiguous(d_bf16.data(), std::array{s.rows, s.cols});
    ASSERT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::from_bf16(d_bf16.data(), d_wide.data(), s.rows * s.cols, nullptr), cudaSuccess);
    EXPECT_TRUE(within(d_wide.download(), ref, budget::bf16_out));
  }
}

TEST(gpu_linear, mismatched_shapes_are_refused_before_any_launch) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto d = poisoned<float>(64);
  const auto x = contiguous<const float>(d.data(), std::array<std::int64_t, 2>{4, 4});
  const auto w = contiguous<const float>(d.data(), std::array<std::int64_t, 2>{4, 5});
  EXPECT_EQ(cuda::linear(*blas, {x, w, {}, contiguous(d.data(), std::array<std::int64_t, 2>{4, 4})},
                         nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace mstar::kernels
