// The GEMV's activation form (kernels/cuda/math.hpp's activation_linear_bf16:
// an f32 row activated, or only rounded, into the product's bf16 input)
// against the two launches it replaces, activate (or to_bf16) then
// linear_bf16, bit for bit; and against the CPU's activation then sgemm of
// the rounded values within the bf16 budget.
#include <gtest/gtest.h>
#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "kernels/math.hpp"
#include "tests/gpu/gemv_fold_harness.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test_gemv::bias_or_none;
using test_gemv::rounded_to_bf16;

// What the fold replaces: no function (attention's output rounded), relu2
// (Nemotron-H's MLP), silu, and silu times an up row (Qwen3.5's SwiGLU, up
// a view into the same gate_up row).
struct fold_case {
  std::optional<activation> fn;
  bool up;
  const char* name;
};
constexpr fold_case fold_cases[] = {{std::nullopt, false, "rounded only"},
                                    {activation::relu2, false, "relu2"},
                                    {activation::silu, false, "silu"},
                                    {activation::silu, true, "silu times up"}};

// (K, N, bias): MLP down projections (K the intermediate size; 8192 x 2048
// the 0.56B Nemotron-H's, a narrow product the split shapes take), attention's
// o_proj, a last block half empty (N 1001), the widest shared row, K 8.
struct fold_shape {
  std::int64_t inner, cols;
  bool bias;
};
constexpr fold_shape fold_shapes[] = {{4096, 1024, false}, {1024, 1001, true}, {3072, 2048, false},
                                      {8192, 2048, false}, {16384, 96, false}, {8, 64, true}};

TEST(gpu_linear, activation_linear_equals_activate_then_the_product_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(306);
  for (const auto& s : fold_shapes) {
    for (const auto& c : fold_cases) {
      SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols) + " " + c.name);
      const std::array<std::int64_t, 2> row{1, s.inner};
      // [gate | up]: half the values negative, so relu2 clips some.
      const auto gu = rng.floats(static_cast<std::size_t>(2 * s.inner), -4.0F, 4.0F);
      auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
      const auto b = rng.floats(static_cast<std::size_t>(s.cols));
      const auto residual = rng.floats(static_cast<std::size_t>(s.cols));
      const auto wh = rounded_to_bf16(w);
      // CPU: the activation (or the row as it is), rounded to bf16, then the product.
      std::vector<float> in(gu.begin(), gu.begin() + s.inner);
      if (c.fn) {
        activation_params a{contiguous<const float>(gu.data(), row), contiguous(in.data(), row)};
        a.fn = *c.fn;
        if (c.up)
          a.up = contiguous<const float>(gu.data() + s.inner, row);
        ASSERT_TRUE(activate(a));
      }
      (void)rounded_to_bf16(in);
      const auto ref = test_gemv::cpu_row_product(in, w, b, s.bias, s.inner, s.cols);

      const auto d_gu = upload(gu);
      const auto d_w = upload(wh);
      const auto d_b = upload(b);
      const auto dbv = bias_or_none(d_b.data(), s.bias, s.cols);
      const auto x = contiguous<const float>(d_gu.data(), row);
      const auto up = contiguous<const float>(d_gu.data() + s.inner, row);
      // Two launches: activate (or to_bf16) into bf16, then the product (the GEMV).
      auto d_x16 = poisoned<std::uint16_t>(static_cast<std::size_t>(s.inner));
      if (c.fn) {
        activation_params a{x, {}, contiguous(d_x16.data(), row), *c.fn};
        if (c.up)
          a.up = up;
        ASSERT_EQ(cuda::activate(a, nullptr), cudaSuccess);
      } else {
        ASSERT_EQ(cuda::to_bf16(x.data, d_x16.data(), s.inner, nullptr), cudaSuccess);
      }
      cuda::linear_bf16_params two{
          contiguous<const std::uint16_t>(d_x16.data(), row),
          contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner}), dbv};
      cuda::activation_linear_bf16_params one;
      one.x = x;
      one.fn = c.fn;
      if (c.up)
        one.up = up;
      one.weight = two.weight;
      one.bias = dbv;
      test_gemv::expect_fold_equals_two_launches(*blas, two, one, cuda::activation_linear_bf16_fits,
                                                 cuda::activation_linear_bf16, ref, residual);
      EXPECT_EQ(d_gu.download(), gu) << "the input row is read only";
    }
  }
}

// Shapes the activation form does not take (activate's quad form would not
// take them either, or the row is past the shared-memory row) are refused
// before any launch.
TEST(gpu_linear, activation_linear_refuses_what_it_does_not_take) {
  MSTAR_REQUIRE_GPU();
  test_gemv::refusal_buffers buf;
  struct refused_case {
    std::int64_t rows, k, x_shift, up_shift;
    bool fn, up, accumulate_bf16;
    cudaError_t want;
    const char* name;
  };
  constexpr refused_case cases[] = {
      {1, 1024, 0, 1024, true, true, false, cudaSuccess, "taken"},
      {1, 1024, 0, 0, false, false, false, cudaSuccess, "rounded only"},
      {2, 1024, 0, 0, true, false, false, cudaErrorInvalidValue, "two rows"},
      {1, 1028, 0, 0, true, false, false, cudaErrorInvalidValue, "K not a multiple of 8"},
      {1, 17408, 0, 0, true, false, false, cudaErrorInvalidValue, "K past the shared row"},
      {1, 1024, 1, 0, true, false, false, cudaErrorInvalidValue, "x off 16 bytes"},
      {1, 1024, 0, 1026, true, true, false, cudaErrorInvalidValue, "up off 16 bytes"},
      {1, 1024, 0, 1024, false, true, false, cudaErrorInvalidValue, "up without a function"},
      {1, 1024, 0, 0, true, false, true, cudaErrorInvalidValue, "bf16 out accumulating"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    cuda::activation_linear_bf16_params p;
    p.x = contiguous<const float>(buf.in.data() + c.x_shift, std::array{c.rows, c.k});
    if (c.fn)
      p.fn = activation::relu2;
    if (c.up)
      p.up = contiguous<const float>(buf.in.data() + c.up_shift, std::array{c.rows, c.k});
    buf.set_weight_and_output(p, c.rows, c.k, c.accumulate_bf16);
    test_gemv::expect_taken_as(p, c.want, cuda::activation_linear_bf16_fits,
                               cuda::activation_linear_bf16);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace mstar::kernels
