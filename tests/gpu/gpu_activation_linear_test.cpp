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
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

// `x` rounded to bf16 in place, and its bits.
std::vector<std::uint16_t> round_to_bf16_bits(std::vector<float>& x) {
  std::vector<std::uint16_t> bits(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = bf16_bits_to_float(bits[i] = float_to_bf16_bits(x[i]));
  return bits;
}

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

// (K, N, bias): MLP down projections (K the intermediate size), attention's
// o_proj, a last block half empty (N 1001), the widest shared row, K 8.
struct fold_shape {
  std::int64_t inner, cols;
  bool bias;
};
constexpr fold_shape fold_shapes[] = {{4096, 1024, false},
                                      {1024, 1001, true},
                                      {3072, 2048, false},
                                      {16384, 96, false},
                                      {8, 64, true}};

TEST(gpu_linear, activation_linear_equals_activate_then_the_product_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(306);
  for (const auto& s : fold_shapes) {
    for (const auto& c : fold_cases) {
      SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols) + " " + c.name);
      const std::array<std::int64_t, 2> row{1, s.inner};
      const std::array<std::int64_t, 2> out_row{1, s.cols};
      // [gate | up]: half the values negative, so relu2 clips some.
      const auto gu = rng.floats(static_cast<std::size_t>(2 * s.inner), -4.0F, 4.0F);
      auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
      const auto b = rng.floats(static_cast<std::size_t>(s.cols));
      const auto residual = rng.floats(static_cast<std::size_t>(s.cols));
      const auto wh = round_to_bf16_bits(w);
      // CPU: the activation (or the row as it is), rounded to bf16, then the product.
      std::vector<float> in(gu.begin(), gu.begin() + s.inner);
      if (c.fn) {
        activation_params a{contiguous<const float>(gu.data(), row), contiguous(in.data(), row)};
        a.fn = *c.fn;
        if (c.up)
          a.up = contiguous<const float>(gu.data() + s.inner, row);
        ASSERT_TRUE(activate(a));
      }
      (void)round_to_bf16_bits(in);
      std::vector<float> ref(static_cast<std::size_t>(s.cols));
      const view<const float, 1> bv =
          s.bias ? contiguous(b.data(), std::array{s.cols}) : view<const float, 1>{};
      ASSERT_TRUE(linear({contiguous<const float>(in.data(), row),
                          contiguous<const float>(w.data(), std::array{s.cols, s.inner}), bv,
                          contiguous(ref.data(), out_row)}));

      const auto d_gu = upload(gu);
      const auto d_w = upload(wh);
      const auto d_b = upload(b);
      const view<const float, 1> dbv =
          s.bias ? contiguous<const float>(d_b.data(), std::array{s.cols}) : view<const float, 1>{};
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
      for (const int form : {0, 1, 2}) {  // f32, bf16, f32 accumulating
        // Every launch shape of the GEMV (-1: the default) gives the same bits.
        for (int v = -1; v < cuda::gemv_variants; ++v) {
          SCOPED_TRACE("form " + std::to_string(form) + " gemv variant " + std::to_string(v));
          auto d_two = form == 2 ? upload(residual) : poisoned<float>(ref.size());
          auto d_one = form == 2 ? upload(residual) : poisoned<float>(ref.size());
          auto d_two16 = poisoned<std::uint16_t>(ref.size());
          auto d_one16 = poisoned<std::uint16_t>(ref.size());
          two.accumulate = one.accumulate = form == 2;
          two.gemv_variant = one.gemv_variant = v;
          two.out_f32 = form == 1 ? view<float, 2>{} : contiguous(d_two.data(), out_row);
          one.out_f32 = form == 1 ? view<float, 2>{} : contiguous(d_one.data(), out_row);
          two.out_bf16 = form == 1 ? contiguous(d_two16.data(), out_row) : view<std::uint16_t, 2>{};
          one.out_bf16 = form == 1 ? contiguous(d_one16.data(), out_row) : view<std::uint16_t, 2>{};
          ASSERT_TRUE(cuda::activation_linear_bf16_fits(one));
          ASSERT_EQ(cuda::linear_bf16(*blas, two, nullptr), cudaSuccess);
          ASSERT_EQ(cuda::activation_linear_bf16(one, nullptr), cudaSuccess);
          if (form == 1) {
            EXPECT_EQ(d_one16.download(), d_two16.download());
            continue;
          }
          const auto got = d_one.download();
          EXPECT_EQ(got, d_two.download());
          auto want = ref;
          for (std::size_t i = 0; i < want.size() && form == 2; ++i)
            want[i] += residual[i];
          EXPECT_TRUE(within(got, want, budget::bf16_in_f32_out));
        }
      }
      EXPECT_EQ(d_gu.download(), gu) << "the input row is read only";
    }
  }
}

// Shapes the activation form does not take (activate's quad form would not
// take them either, or the row is past the shared-memory row) are refused
// before any launch.
TEST(gpu_linear, activation_linear_refuses_what_it_does_not_take) {
  MSTAR_REQUIRE_GPU();
  auto d = poisoned<float>(40000);
  auto d16 = poisoned<std::uint16_t>(40000);
  auto out = poisoned<float>(4);  // apart from the inputs the taken cases read
  auto out16 = poisoned<std::uint16_t>(4);
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
    p.x = contiguous<const float>(d.data() + c.x_shift, std::array{c.rows, c.k});
    if (c.fn)
      p.fn = activation::relu2;
    if (c.up)
      p.up = contiguous<const float>(d.data() + c.up_shift, std::array{c.rows, c.k});
    p.weight = contiguous<const std::uint16_t>(d16.data(), std::array<std::int64_t, 2>{2, c.k});
    if (c.accumulate_bf16)
      p.out_bf16 = contiguous(out16.data(), std::array<std::int64_t, 2>{c.rows, 2});
    else
      p.out_f32 = contiguous(out.data(), std::array<std::int64_t, 2>{c.rows, 2});
    p.accumulate = c.accumulate_bf16;
    EXPECT_EQ(cuda::activation_linear_bf16_fits(p), c.want == cudaSuccess);
    EXPECT_EQ(cuda::activation_linear_bf16(p, nullptr), c.want);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace mstar::kernels
