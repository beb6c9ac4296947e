// Linear layers through cuBLAS (kernels/cuda/math.hpp) against the CPU's
// BLAS sgemm (kernels/math.hpp): f32, and bf16 inputs with f32 accumulation
// (the reference multiplies the same bf16-rounded values in f32).
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/attention.hpp"
#include "kernels/conv.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/recurrent.hpp"
#include "kernels/cuda/sampling.hpp"
#include "kernels/kv_geometry.hpp"
#include "kernels/math.hpp"
#include "tests/gpu/gemv_fold_harness.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;
using test_gemv::bias_or_none;
using test_gemv::rounded_to_bf16;

struct shape {
  std::int64_t rows, inner, cols;
  bool bias;
};
// One row with K a multiple of 8 takes the GEMV kernel (kernels/cuda/gemv.cu;
// 1001 features leave a warp one row); the others take cuBLAS.
constexpr shape shapes[] = {{1, 1024, 3000, false}, {64, 512, 768, true},  {7, 33, 65, true},
                            {1, 2048, 1001, true},  {1, 4096, 257, false}, {8, 1032, 130, true},
                            {5, 8, 64, false}};

// One bf16 product of `shapes`: x and w drawn (in that order, then the
// bias) and rounded to bf16, the CPU's f32 product of the rounded values,
// and the device copies with the launch's operands.
struct bf16_case {
  std::vector<float> x, w, b, ref;
  test::gpu::device_vector<std::uint16_t> d_x, d_w;
  test::gpu::device_vector<float> d_b;

  bf16_case(test::random_tensors& rng, const shape& s)
      : x(rng.floats(static_cast<std::size_t>(s.rows * s.inner))),
        w(rng.floats(static_cast<std::size_t>(s.cols * s.inner))),
        b(rng.floats(static_cast<std::size_t>(s.cols))),
        ref(static_cast<std::size_t>(s.rows * s.cols)),
        d_x(upload(rounded_to_bf16(x))),
        d_w(upload(rounded_to_bf16(w))),
        d_b(upload(b)) {
    const auto bv = bias_or_none(b.data(), s.bias, s.cols);
    EXPECT_TRUE(linear({contiguous(x.data(), std::array{s.rows, s.inner}),
                        contiguous(w.data(), std::array{s.cols, s.inner}), bv,
                        contiguous(ref.data(), std::array{s.rows, s.cols})}));
  }
  [[nodiscard]] cuda::linear_bf16_params params(const shape& s) const {
    const auto dbv = bias_or_none(d_b.data(), s.bias, s.cols);
    return {contiguous<const std::uint16_t>(d_x.data(), std::array{s.rows, s.inner}),
            contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner}), dbv};
  }
};

// One random RMS-form product on the device: the f32 row (drawn in [lo,
// hi)), its norm weight, bf16 weights and a bias, drawn in that order, and
// the operands of `rms_norm_linear_bf16` over them (no output set).
struct rms_case {
  test::gpu::device_vector<float> d_h, d_nw;
  test::gpu::device_vector<std::uint16_t> d_w;
  test::gpu::device_vector<float> d_b;
  cuda::rms_norm_linear_bf16_params p;

  rms_case(test::random_tensors& rng, std::int64_t inner, std::int64_t cols, bool bias,
           float lo = -1.0F, float hi = 1.0F)
      : d_h(upload(rng.floats(static_cast<std::size_t>(inner), lo, hi))),
        d_nw(upload(rng.floats(static_cast<std::size_t>(inner)))),
        d_w(upload(bf16_weights(rng, inner, cols))),
        d_b(upload(rng.floats(static_cast<std::size_t>(cols)))) {
    p.x = contiguous<const float>(d_h.data(), std::array<std::int64_t, 2>{1, inner});
    p.norm_weight = contiguous<const float>(d_nw.data(), std::array{inner});
    p.eps = 1e-5F;
    p.weight = contiguous<const std::uint16_t>(d_w.data(), std::array{cols, inner});
    p.bias = bias_or_none(d_b.data(), bias, cols);
  }

 private:
  static std::vector<std::uint16_t> bf16_weights(test::random_tensors& rng, std::int64_t inner,
                                                 std::int64_t cols) {
    auto w = rng.floats(static_cast<std::size_t>(cols * inner));
    return rounded_to_bf16(w);
  }
};

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
    const auto bv = bias_or_none(b.data(), s.bias, s.cols);
    ASSERT_TRUE(linear({contiguous(x.data(), std::array{s.rows, s.inner}),
                        contiguous(w.data(), std::array{s.cols, s.inner}), bv,
                        contiguous(ref.data(), std::array{s.rows, s.cols})}));
    const auto d_x = upload(x);
    const auto d_w = upload(w);
    const auto d_b = upload(b);
    auto d_out = poisoned<float>(ref.size());
    const auto dbv = bias_or_none(d_b.data(), s.bias, s.cols);
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
    const bf16_case c{rng, s};
    const auto& ref = c.ref;
    auto p = c.params(s);
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

// Accumulating (a residual taking a projection): the GEMV gives exactly the
// plain product then `add`; cuBLAS (beta 1) the CPU's sum within budget.
TEST(gpu_linear, bf16_linear_accumulates_onto_its_f32_output) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(303);
  for (const auto& s : shapes) {
    SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.inner) + "x" +
                 std::to_string(s.cols));
    const bf16_case c{rng, s};
    const auto residual = rng.floats(static_cast<std::size_t>(s.rows * s.cols));
    auto ref = c.ref;
    for (std::size_t i = 0; i < ref.size(); ++i)
      ref[i] += residual[i];
    auto p = c.params(s);
    // The two launches: the product, then residual + product.
    auto d_plain = poisoned<float>(ref.size());
    auto d_two = upload(residual);
    p.out_f32 = contiguous(d_plain.data(), std::array{s.rows, s.cols});
    ASSERT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
    const auto two = contiguous(d_two.data(), std::array{s.rows, s.cols});
    ASSERT_EQ(
        cuda::add({two, contiguous<const float>(d_plain.data(), std::array{s.rows, s.cols}), two},
                  nullptr),
        cudaSuccess);
    auto d_acc = upload(residual);
    p.out_f32 = contiguous(d_acc.data(), std::array{s.rows, s.cols});
    p.accumulate = true;
    ASSERT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
    const auto acc = d_acc.download();
    EXPECT_TRUE(within(acc, ref, budget::bf16_in_f32_out));
    if (s.rows == 1 && s.inner % 8 == 0) {
      const auto two_out = d_two.download();
      EXPECT_EQ(acc, two_out) << "the GEMV's accumulation is not add's";
      // The residual loaded right after the wait (gemv_residual_early), at
      // every launch shape: still add's bits.
      const bool before = cuda::gemv_residual_early();
      cuda::set_gemv_residual_early(true);
      for (int v = 0; v < cuda::gemv_variants; ++v) {
        SCOPED_TRACE("early residual, gemv variant " + std::to_string(v));
        auto d_early = upload(residual);
        auto d_late = upload(residual);
        p.gemv_variant = v;
        p.out_f32 = contiguous(d_early.data(), std::array{s.rows, s.cols});
        ASSERT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
        cuda::set_gemv_residual_early(false);
        p.out_f32 = contiguous(d_late.data(), std::array{s.rows, s.cols});
        ASSERT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
        cuda::set_gemv_residual_early(true);
        EXPECT_EQ(d_early.download(), d_late.download());
      }
      cuda::set_gemv_residual_early(before);
      p.gemv_variant = -1;
    }
    // A bf16 output cannot accumulate.
    auto d_bf16 = poisoned<std::uint16_t>(ref.size());
    p.out_f32 = {};
    p.out_bf16 = contiguous(d_bf16.data(), std::array{s.rows, s.cols});
    EXPECT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaErrorInvalidValue);
  }
}

// Every launch shape of the one-row GEMV (gemv_shape.hpp's table) on
// products whose tails the split shapes cut unevenly: K 8 (one piece: one
// lane of one warp has work), K of 129 and 1,025 pieces (a piece over a
// whole number of warps' strides), odd N (a last block's warps past the
// last feature), and the 0.56B's
// narrow out_proj and MLP down projection. Each entry gives the same bits
// run to run and the CPU's product within the bf16 budget; entries of one
// split (warps a feature) the same bits as each other, since each lane
// walks its pieces and the warps' sums meet in the same order; entries of
// different splits add in different orders and are tied only by the
// budget. The default (-1) gives gemv_variant_for's entry's bits.
TEST(gpu_linear, every_gemv_shape_is_deterministic_and_equal_within_its_split) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(307);
  constexpr shape awkward[] = {
      {1, 8, 3, false},       {1, 1032, 130, true},  {1, 8200, 17, false},   {1, 2048, 1001, true},
      {1, 4096, 2048, false}, {1, 8192, 2048, true}, {1, 2048, 10304, false}};
  for (const auto& s : awkward) {
    SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols));
    const bf16_case c{rng, s};
    auto p = c.params(s);
    const auto run = [&](int v) {
      auto d_out = poisoned<float>(c.ref.size());
      p.out_f32 = contiguous(d_out.data(), std::array{s.rows, s.cols});
      p.gemv_variant = v;
      EXPECT_EQ(cuda::linear_bf16(*blas, p, nullptr), cudaSuccess);
      return d_out.download();
    };
    const auto by_default = run(-1);
    const int picked = cuda::gemv_variant_for(-1, s.cols, s.inner);
    std::array<std::vector<float>, 33> by_split;  // the first entry's output of each split
    for (int v = 0; v < cuda::gemv_variants; ++v) {
      SCOPED_TRACE("gemv variant " + std::to_string(v));
      const auto got = run(v);
      EXPECT_EQ(run(v), got) << "not the same bits run to run";
      EXPECT_TRUE(within(got, c.ref, budget::bf16_in_f32_out));
      auto& same_split = by_split.at(static_cast<std::size_t>(cuda::gemv_shapes[v].split));
      if (same_split.empty())
        same_split = got;
      EXPECT_EQ(got, same_split) << "not the bits of the first entry of split "
                                 << cuda::gemv_shapes[v].split;
      if (v == picked) {
        EXPECT_EQ(got, by_default) << "the default is not gemv_variant_for's entry";
      }
    }
  }
}

// The batch-1 decode fold: RMS norm and product in one kernel equal
// add_rms_norm (bf16 output) then linear_bf16 bit for bit, every output
// form, and the CPU's norm then product within budget.
TEST(gpu_linear, rms_norm_linear_equals_the_norm_then_the_product_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(304);
  // (K, N, bias): a hidden size and its widest projection, an LM head, a
  // last block half empty (N 1001), K not a multiple of 256, K 8.
  struct norm_shape {
    std::int64_t inner, cols;
    bool bias;
  };
  constexpr norm_shape norm_shapes[] = {{2048, 10304, false}, {2048, 32000, false},
                                        {4096, 1001, true},   {1032, 130, true},
                                        {8, 64, false},       {16384, 96, false}};
  const float eps = 1e-5F;
  for (const auto& s : norm_shapes) {
    SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols));
    const auto h = rng.floats(static_cast<std::size_t>(s.inner));
    const auto nw = rng.floats(static_cast<std::size_t>(s.inner));
    auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
    const auto b = rng.floats(static_cast<std::size_t>(s.cols));
    const auto residual = rng.floats(static_cast<std::size_t>(s.cols));
    const auto wh = rounded_to_bf16(w);
    // CPU: the norm, rounded to bf16, then the product.
    std::vector<float> normed(h.size());
    ASSERT_TRUE(
        rms_norm({contiguous(h.data(), std::array<std::int64_t, 2>{1, s.inner}),
                  contiguous(nw.data(), std::array{s.inner}),
                  contiguous(normed.data(), std::array<std::int64_t, 2>{1, s.inner}), eps}));
    (void)rounded_to_bf16(normed);
    std::vector<float> ref(static_cast<std::size_t>(s.cols));
    const auto bv = bias_or_none(b.data(), s.bias, s.cols);
    ASSERT_TRUE(linear({contiguous(normed.data(), std::array<std::int64_t, 2>{1, s.inner}),
                        contiguous(w.data(), std::array{s.cols, s.inner}), bv,
                        contiguous(ref.data(), std::array<std::int64_t, 2>{1, s.cols})}));

    const auto d_h = upload(h);
    const auto d_nw = upload(nw);
    const auto d_w = upload(wh);
    const auto d_b = upload(b);
    const auto dbv = bias_or_none(d_b.data(), s.bias, s.cols);
    const auto wv = contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner});
    const std::array<std::int64_t, 2> row{1, s.inner};
    const std::array<std::int64_t, 2> out_row{1, s.cols};
    // Two launches: add_rms_norm into bf16, then the product (the GEMV).
    auto d_h2 = upload(h);
    auto d_x16 = poisoned<std::uint16_t>(static_cast<std::size_t>(s.inner));
    add_rms_norm_params n;
    n.residual = contiguous(d_h2.data(), row);
    n.weight = contiguous<const float>(d_nw.data(), std::array{s.inner});
    n.out_bf16 = contiguous(d_x16.data(), row);
    n.eps = eps;
    ASSERT_EQ(cuda::add_rms_norm(n, nullptr), cudaSuccess);
    cuda::linear_bf16_params two{contiguous<const std::uint16_t>(d_x16.data(), row), wv, dbv};
    cuda::rms_norm_linear_bf16_params one;
    one.x = contiguous<const float>(d_h.data(), row);
    one.norm_weight = contiguous<const float>(d_nw.data(), std::array{s.inner});
    one.eps = eps;
    one.weight = wv;
    one.bias = dbv;
    for (const int form : {0, 1, 2}) {  // f32, bf16, f32 accumulating
      SCOPED_TRACE(form);
      auto d_two = form == 2 ? upload(residual) : poisoned<float>(ref.size());
      auto d_one = form == 2 ? upload(residual) : poisoned<float>(ref.size());
      auto d_two16 = poisoned<std::uint16_t>(ref.size());
      auto d_one16 = poisoned<std::uint16_t>(ref.size());
      two.accumulate = one.accumulate = form == 2;
      if (form == 1) {
        two.out_f32 = one.out_f32 = {};
        two.out_bf16 = contiguous(d_two16.data(), out_row);
        one.out_bf16 = contiguous(d_one16.data(), out_row);
      } else {
        two.out_bf16 = one.out_bf16 = {};
        two.out_f32 = contiguous(d_two.data(), out_row);
        one.out_f32 = contiguous(d_one.data(), out_row);
      }
      ASSERT_EQ(cuda::linear_bf16(*blas, two, nullptr), cudaSuccess);
      ASSERT_EQ(cuda::rms_norm_linear_bf16(one, nullptr), cudaSuccess);
      if (form == 1) {
        EXPECT_EQ(d_one16.download(), d_two16.download());
        continue;
      }
      const auto got = d_one.download();
      EXPECT_EQ(got, d_two.download());
      // Every launch shape of the GEMV, the fold and the plain GEMV at the
      // same entry bit for bit. Entries of one split (warps a feature,
      // gemv_shape.hpp) walk each lane's pieces and add the warps' sums in
      // the same order, so they give the same bits; entries of another
      // split add in another order and meet the CPU's product only within
      // the budget. The default takes gemv_variant_for's entry.
      const int picked = cuda::gemv_variant_for(-1, s.cols, s.inner);
      std::array<std::vector<float>, 33> by_split;  // the first entry's output of each split
      for (int v = 0; v < cuda::gemv_variants && form == 0; ++v) {
        SCOPED_TRACE("gemv variant " + std::to_string(v));
        auto d_v = poisoned<float>(ref.size());
        auto d_plain = poisoned<float>(ref.size());
        one.out_f32 = contiguous(d_v.data(), out_row);
        two.out_f32 = contiguous(d_plain.data(), out_row);
        one.gemv_variant = two.gemv_variant = v;
        ASSERT_EQ(cuda::rms_norm_linear_bf16(one, nullptr), cudaSuccess);
        ASSERT_EQ(cuda::linear_bf16(*blas, two, nullptr), cudaSuccess);
        const auto at_v = d_v.download();
        EXPECT_EQ(d_plain.download(), at_v);
        auto& same_split = by_split.at(static_cast<std::size_t>(cuda::gemv_shapes[v].split));
        if (same_split.empty())
          same_split = at_v;
        EXPECT_EQ(at_v, same_split);
        if (v == picked) {
          EXPECT_EQ(at_v, got) << "the default is not gemv_variant_for's entry";
        }
        EXPECT_TRUE(within(at_v, ref, budget::bf16_in_f32_out));
        one.gemv_variant = two.gemv_variant = -1;
      }
      auto want = ref;
      if (form == 2) {
        for (std::size_t i = 0; i < want.size(); ++i)
          want[i] += residual[i];
      }
      EXPECT_TRUE(within(got, want, budget::bf16_in_f32_out));
    }
    EXPECT_EQ(d_h.download(), h) << "the norm's input is read only";
  }
  // Two rows, K past the shared-memory row, K not a multiple of 8: refused.
  auto d = poisoned<float>(40000);
  auto d16 = poisoned<std::uint16_t>(40000);
  cuda::rms_norm_linear_bf16_params bad;
  const auto with_k = [&](std::int64_t rows, std::int64_t k) {
    bad.x = contiguous<const float>(d.data(), std::array{rows, k});
    bad.norm_weight = contiguous<const float>(d.data(), std::array{k});
    bad.weight = contiguous<const std::uint16_t>(d16.data(), std::array<std::int64_t, 2>{2, k});
    bad.out_f32 = contiguous(d.data(), std::array<std::int64_t, 2>{rows, 2});
    return cuda::rms_norm_linear_bf16(bad, nullptr);
  };
  EXPECT_EQ(with_k(2, 64), cudaErrorInvalidValue);
  EXPECT_EQ(with_k(1, 16392), cudaErrorInvalidValue);
  EXPECT_EQ(with_k(1, 12), cudaErrorInvalidValue);
  EXPECT_EQ(with_k(1, 64), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Mamba-2's in_proj at batch 1 with its conv step folded in
// (conv_step_fold): one kernel equals rms_norm_linear_bf16 then
// causal_conv_update on the xBC features bit for bit (the product, the
// conv's outputs, every slot's window), at every launch shape, for a row
// that resumes, one that starts fresh, one with no has_state flags and one
// whose slot is -1; and the CPU's conv of the product within budget.
TEST(gpu_linear, rms_norm_linear_with_the_conv_step_equals_the_two_launches_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(307);
  struct conv_shape {
    std::int64_t inner, cols, first;
    std::int32_t channels, width;
    bool bias, silu;
  };
  // The 0.56B's in_proj (xBC: features 4,096 .. 10,239 of 10,304); a run at
  // an odd feature (the two-launch conv then takes its one-channel form);
  // widths 3 and 2, a run up to the last feature, no SiLU.
  constexpr conv_shape conv_shapes[] = {{2048, 10304, 4096, 6144, 4, true, true},
                                        {64, 203, 37, 101, 3, false, true},
                                        {256, 130, 2, 128, 2, true, false}};
  constexpr std::int32_t slots_total = 3;
  const float eps = 1e-5F;
  for (const auto& s : conv_shapes) {
    SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols) + " conv at " +
                 std::to_string(s.first) + " W " + std::to_string(s.width));
    const auto h = rng.floats(static_cast<std::size_t>(s.inner));
    const auto nw = rng.floats(static_cast<std::size_t>(s.inner));
    auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
    const auto b = rng.floats(static_cast<std::size_t>(s.cols));
    const auto cw = rng.floats(static_cast<std::size_t>(s.channels * s.width));
    const auto cb = rng.floats(static_cast<std::size_t>(s.channels));
    const auto state0 =
        rng.floats(static_cast<std::size_t>(slots_total * s.channels * (s.width - 1)));
    const auto d_h = upload(h);
    const auto d_nw = upload(nw);
    const auto d_w = upload(rounded_to_bf16(w));
    const auto d_b = upload(b);
    const auto d_cw = upload(cw);
    const auto d_cb = upload(cb);
    const std::array<std::int64_t, 2> out_row{1, s.cols};
    cuda::rms_norm_linear_bf16_params base;
    base.x = contiguous<const float>(d_h.data(), std::array<std::int64_t, 2>{1, s.inner});
    base.norm_weight = contiguous<const float>(d_nw.data(), std::array{s.inner});
    base.eps = eps;
    base.weight = contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner});
    base.bias = bias_or_none(d_b.data(), true, s.cols);
    const conv_weights dev_w{d_cw.data(), s.bias ? d_cb.data() : nullptr, s.channels, s.width,
                             s.silu};
    const conv_weights host_w{cw.data(), s.bias ? cb.data() : nullptr, s.channels, s.width, s.silu};
    struct row_case {
      std::int32_t slot;
      std::uint8_t has;
      bool flags;
    };
    constexpr row_case rows[] = {{2, 1, true}, {1, 0, true}, {0, 1, false}, {-1, 1, true}};
    for (const auto& rc : rows) {
      SCOPED_TRACE("slot " + std::to_string(rc.slot) + " has " + std::to_string(rc.has) +
                   (rc.flags ? "" : " (no flags)"));
      const std::vector<std::int32_t> slot{rc.slot};
      const std::vector<std::uint8_t> has{rc.has};
      const auto d_slot = upload(slot);
      const auto d_has = upload(has);
      const auto has_span = rc.flags ? d_has.span() : std::span<const std::uint8_t>{};
      for (int v = -1; v < cuda::gemv_variants; ++v) {
        SCOPED_TRACE("gemv variant " + std::to_string(v));
        auto d_out2 = poisoned<float>(static_cast<std::size_t>(s.cols));
        auto d_conv2 = poisoned<float>(static_cast<std::size_t>(s.channels));
        auto d_state2 = upload(state0);
        auto two = base;
        two.gemv_variant = v;
        two.out_f32 = contiguous(d_out2.data(), out_row);
        ASSERT_EQ(cuda::rms_norm_linear_bf16(two, nullptr), cudaSuccess);
        ASSERT_EQ(cuda::causal_conv_update({dev_w, d_out2.data() + s.first, s.cols, d_conv2.data(),
                                            1, d_state2.data(), d_slot.span(), has_span},
                                           nullptr),
                  cudaSuccess);
        auto d_out1 = poisoned<float>(static_cast<std::size_t>(s.cols));
        auto d_conv1 = poisoned<float>(static_cast<std::size_t>(s.channels));
        auto d_state1 = upload(state0);
        auto one = base;
        one.gemv_variant = v;
        one.out_f32 = contiguous(d_out1.data(), out_row);
        one.conv = cuda::conv_step_fold{dev_w,           s.first,       d_conv1.data(),
                                        d_state1.data(), d_slot.span(), has_span};
        ASSERT_EQ(cuda::rms_norm_linear_bf16(one, nullptr), cudaSuccess);
        const auto product = d_out1.download();
        const auto conv_out = d_conv1.download();
        const auto state = d_state1.download();
        EXPECT_EQ(product, d_out2.download()) << "the product";
        EXPECT_EQ(conv_out, d_conv2.download()) << "the conv's outputs";
        EXPECT_EQ(state, d_state2.download()) << "the slots' windows";
        if (v != -1)
          continue;
        // The CPU's conv step over the product's xBC features.
        auto host_state = state0;
        std::vector<float> ref(static_cast<std::size_t>(s.channels));
        causal_conv_update(
            {host_w, product.data() + s.first, s.cols, ref.data(), 1, host_state.data(), slot,
             rc.flags ? std::span<const std::uint8_t>{has} : std::span<const std::uint8_t>{}});
        EXPECT_TRUE(within(conv_out, ref, budget::recurrent)) << "against the CPU's conv";
        EXPECT_EQ(state, host_state) << "the CPU's windows";
      }
    }
  }
}

// A batch-1 step's first layer looks its token up in the GEMV
// (embedding_fold): one kernel equals embedding then rms_norm_linear_bf16
// bit for bit (the product and the looked-up row), alone and with the conv
// fold, at every launch shape; an id outside the table gives what
// embedding gives, a row of NaN (and NaN products).
TEST(gpu_linear, rms_norm_linear_with_the_lookup_equals_embedding_then_the_product_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(311);
  struct lookup_shape {
    std::int64_t vocab, inner, cols;
  };
  constexpr lookup_shape lookup_shapes[] = {{300, 2048, 10304}, {17, 64, 203}};
  const float eps = 1e-5F;
  for (const auto& s : lookup_shapes) {
    SCOPED_TRACE(std::to_string(s.vocab) + " x " + std::to_string(s.inner) + " -> " +
                 std::to_string(s.cols));
    const auto table = rng.floats(static_cast<std::size_t>(s.vocab * s.inner), -2.0F, 2.0F);
    const auto nw = rng.floats(static_cast<std::size_t>(s.inner));
    auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
    const auto cw = rng.floats(static_cast<std::size_t>(64 * 4));
    const auto state0 = rng.floats(static_cast<std::size_t>(64 * 3));
    const auto d_table = upload(table);
    const auto d_nw = upload(nw);
    const auto d_w = upload(rounded_to_bf16(w));
    const auto d_cw = upload(cw);
    const std::vector<std::int32_t> slot{0};
    const auto d_slot = upload(slot);
    const std::array<std::int64_t, 2> row{1, s.inner};
    const std::array<std::int64_t, 2> out_row{1, s.cols};
    const auto table_v = contiguous<const float>(d_table.data(), std::array{s.vocab, s.inner});
    for (const std::int32_t id :
         {std::int32_t{0}, static_cast<std::int32_t>(s.vocab - 1), std::int32_t{5},
          std::int32_t{-1}, static_cast<std::int32_t>(s.vocab)}) {
      SCOPED_TRACE("id " + std::to_string(id));
      const auto d_id = upload(std::vector<std::int32_t>{id});
      for (const bool with_conv : {false, true}) {
        SCOPED_TRACE(with_conv ? "with the conv fold" : "alone");
        for (int v = -1; v < cuda::gemv_variants; ++v) {
          SCOPED_TRACE("gemv variant " + std::to_string(v));
          // Two launches: embedding into h, then the product of h.
          auto d_h2 = poisoned<float>(static_cast<std::size_t>(s.inner));
          auto d_out2 = poisoned<float>(static_cast<std::size_t>(s.cols));
          auto d_conv2 = poisoned<float>(64);
          auto d_state2 = upload(state0);
          ASSERT_EQ(cuda::embedding({contiguous<const std::int32_t>(d_id.data(), std::array{1L}),
                                     table_v, contiguous(d_h2.data(), row)},
                                    nullptr),
                    cudaSuccess);
          cuda::rms_norm_linear_bf16_params p;
          p.x = contiguous<const float>(d_h2.data(), row);
          p.norm_weight = contiguous<const float>(d_nw.data(), std::array{s.inner});
          p.eps = eps;
          p.weight = contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner});
          p.gemv_variant = v;
          p.out_f32 = contiguous(d_out2.data(), out_row);
          const conv_weights cwv{d_cw.data(), nullptr, 64, 4, true};
          if (with_conv)
            p.conv =
                cuda::conv_step_fold{cwv, 3, d_conv2.data(), d_state2.data(), d_slot.span(), {}};
          ASSERT_EQ(cuda::rms_norm_linear_bf16(p, nullptr), cudaSuccess);
          // One: the lookup folded in; x names only the shape (poisoned memory).
          auto d_h1 = poisoned<float>(static_cast<std::size_t>(s.inner));
          auto d_out1 = poisoned<float>(static_cast<std::size_t>(s.cols));
          auto d_conv1 = poisoned<float>(64);
          auto d_state1 = upload(state0);
          p.x = contiguous<const float>(d_h1.data(), row);
          p.out_f32 = contiguous(d_out1.data(), out_row);
          if (with_conv)
            p.conv =
                cuda::conv_step_fold{cwv, 3, d_conv1.data(), d_state1.data(), d_slot.span(), {}};
          p.embed = cuda::embedding_fold{
              contiguous<const std::int32_t>(d_id.data(), std::array{1L}), table_v, d_h1.data()};
          ASSERT_EQ(cuda::rms_norm_linear_bf16(p, nullptr), cudaSuccess);
          const auto h1 = d_h1.download();
          const auto out1 = d_out1.download();
          EXPECT_EQ(std::memcmp(h1.data(), d_h2.download().data(), h1.size() * sizeof(float)), 0)
              << "the looked-up row";
          EXPECT_EQ(std::memcmp(out1.data(), d_out2.download().data(), out1.size() * sizeof(float)),
                    0)
              << "the product";
          if (with_conv) {
            const auto c1 = d_conv1.download();
            EXPECT_EQ(std::memcmp(c1.data(), d_conv2.download().data(), c1.size() * sizeof(float)),
                      0)
                << "the conv's outputs";
            const auto st1 = d_state1.download();
            EXPECT_EQ(
                std::memcmp(st1.data(), d_state2.download().data(), st1.size() * sizeof(float)), 0)
                << "the window";
          }
          const bool bad = id < 0 || id >= s.vocab;
          EXPECT_EQ(std::isnan(h1[0]), bad);
          EXPECT_EQ(std::isnan(out1[0]), bad);
          if (!bad) {
            EXPECT_EQ(h1[1], table[static_cast<std::size_t>(id * s.inner + 1)]);
          }
        }
      }
    }
  }
}

// An MLP's up projection with its activation in the epilogue
// (out_activation): the bf16 output equals the f32 product then activate's
// bf16 output bit for bit, relu2 and silu, with and without a bias, at every
// launch shape (what it refuses: gpu_fold_rules, on the host).
TEST(gpu_linear, rms_norm_linear_with_the_activation_equals_the_product_then_activate_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(313);
  struct act_shape {
    std::int64_t inner, cols;
    bool bias;
  };
  // The 0.56B's MLP up projection (2,048 -> 8,192), a last block half empty.
  constexpr act_shape act_shapes[] = {{2048, 8192, false}, {64, 1001, true}};
  for (const auto& s : act_shapes) {
    SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols) + (s.bias ? " bias" : ""));
    const rms_case c(rng, s.inner, s.cols, s.bias);
    const auto& p = c.p;
    const std::array<std::int64_t, 2> out_row{1, s.cols};
    for (const auto fn : {activation::relu2, activation::silu}) {
      SCOPED_TRACE(fn == activation::relu2 ? "relu2" : "silu");
      for (int v = -1; v < cuda::gemv_variants; ++v) {
        SCOPED_TRACE("gemv variant " + std::to_string(v));
        // Two launches: the f32 product, then activate into bf16.
        auto d_f32 = poisoned<float>(static_cast<std::size_t>(s.cols));
        auto d_two = poisoned<std::uint16_t>(static_cast<std::size_t>(s.cols));
        auto two = p;
        two.gemv_variant = v;
        two.out_f32 = contiguous(d_f32.data(), out_row);
        ASSERT_EQ(cuda::rms_norm_linear_bf16(two, nullptr), cudaSuccess);
        activation_params a{contiguous<const float>(d_f32.data(), out_row),
                            {},
                            contiguous(d_two.data(), out_row),
                            fn};
        ASSERT_EQ(cuda::activate(a, nullptr), cudaSuccess);
        // One: the activation in the epilogue.
        auto d_one = poisoned<std::uint16_t>(static_cast<std::size_t>(s.cols));
        auto one = p;
        one.gemv_variant = v;
        one.out_bf16 = contiguous(d_one.data(), out_row);
        one.out_activation = fn;
        ASSERT_EQ(cuda::rms_norm_linear_bf16(one, nullptr), cudaSuccess);
        EXPECT_EQ(d_one.download(), d_two.download());
      }
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Chained launches under `wave` take, for a product whose rule-picked grid
// is more than one wave at K <= 2,048, an entry of the same bits whose grid
// is one wave (gemv.cu's one-wave pick, MSTAR_GEMV_WAVE_PICK): the 0.56B's
// MLP up (relu2 epilogue) and in_proj shapes, f32 and bf16 outputs, must
// give entry 5's bits exactly, chained or not.
TEST(gpu_linear, the_one_wave_pick_gives_the_rule_entrys_bits) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(317);
  const bool before = cuda::chained_launches();
  for (const std::int64_t cols : {std::int64_t{8192}, std::int64_t{10304}}) {
    SCOPED_TRACE("2048x" + std::to_string(cols));
    const rms_case c(rng, 2048, cols, false);
    const std::array<std::int64_t, 2> out_row{1, cols};
    const auto run = [&](int variant, bool chained, bool f32) {
      cuda::set_chained_launches(chained);
      auto p = c.p;
      p.gemv_variant = variant;
      auto d_f32 = poisoned<float>(static_cast<std::size_t>(cols));
      auto d_bf16 = poisoned<std::uint16_t>(static_cast<std::size_t>(cols));
      if (f32) {
        p.out_f32 = contiguous(d_f32.data(), out_row);
      } else {
        p.out_bf16 = contiguous(d_bf16.data(), out_row);
        p.out_activation = activation::relu2;
      }
      EXPECT_EQ(cuda::rms_norm_linear_bf16(p, nullptr), cudaSuccess);
      std::vector<std::uint32_t> bits;
      if (f32) {
        for (const float v : d_f32.download()) {
          std::uint32_t b = 0;
          std::memcpy(&b, &v, sizeof(b));
          bits.push_back(b);
        }
      } else {
        for (const std::uint16_t v : d_bf16.download())
          bits.push_back(v);
      }
      return bits;
    };
    for (const bool f32 : {true, false}) {
      SCOPED_TRACE(f32 ? "f32" : "bf16 relu2");
      const auto want = run(cuda::gemv_default_variant, false, f32);
      EXPECT_EQ(run(-1, true, f32), want) << "chained, the rule's entry";
      EXPECT_EQ(run(-1, false, f32), want) << "plain, the rule's entry";
      EXPECT_EQ(run(cuda::gemv_default_variant, true, f32), want) << "chained, entry 5";
    }
  }
  cuda::set_chained_launches(before);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The argmax fold's launch of `p` with `state` (16 bytes, zero): its output
// row must equal the unfolded launch's bit for bit, its draw must be what
// `argmax` of that row draws, and the state must be zero again after it.
// Returns the draw.
std::int32_t folded_draw(cuda::rms_norm_linear_bf16_params p, std::int64_t cols,
                         cuda::argmax_fold_state* state) {
  const std::array<std::int64_t, 2> out_row{1, cols};
  auto d_plain = poisoned<float>(static_cast<std::size_t>(cols));
  p.out_f32 = contiguous(d_plain.data(), out_row);
  EXPECT_EQ(cuda::rms_norm_linear_bf16(p, nullptr), cudaSuccess);
  auto d_want = poisoned<std::int32_t>(1);
  EXPECT_EQ(cuda::argmax(contiguous<const float>(d_plain.data(), out_row), d_want.data(), nullptr),
            cudaSuccess);
  auto d_out = poisoned<float>(static_cast<std::size_t>(cols));
  auto d_draw = poisoned<std::int32_t>(1);
  p.out_f32 = contiguous(d_out.data(), out_row);
  p.argmax = cuda::argmax_fold{d_draw.data(), state};
  EXPECT_EQ(cuda::rms_norm_linear_bf16(p, nullptr), cudaSuccess);
  const auto out = d_out.download();
  EXPECT_EQ(std::memcmp(out.data(), d_plain.download().data(), out.size() * sizeof(float)), 0)
      << "the product";
  const std::int32_t draw = d_draw.download()[0];
  EXPECT_EQ(draw, d_want.download()[0]) << "argmax of the product";
  cuda::argmax_fold_state left{1, 1, 0};
  EXPECT_EQ(cudaMemcpy(&left, state, sizeof(left), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(left.key, 0U) << "the key left for the next launch";
  EXPECT_EQ(left.done, 0U) << "the count left for the next launch";
  return draw;
}

// A batch-1 greedy step's LM head draws its token in the GEMV (argmax_fold):
// the output row is the plain launch's bit for bit and the draw is what
// `argmax` of it draws, at every launch shape, one state reused launch after
// launch. With zero weights the output is the bias exactly, which plants
// argmax's cases: ties to the lowest id, all zero, NaN or +inf anywhere
// (-1), no finite entry (-1), the extremes of the finite range.
TEST(gpu_linear, rms_norm_linear_with_the_argmax_draws_what_argmax_of_the_product_draws) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(317);
  auto d_state = upload(std::vector<std::uint64_t>{0, 0});
  auto* state = reinterpret_cast<cuda::argmax_fold_state*>(d_state.data());
  struct head_shape {
    std::int64_t inner, cols;
    bool bias;
  };
  // A 32,768-entry vocabulary over the 0.56B's width; a last block part empty.
  constexpr head_shape head_shapes[] = {{2048, 32768, false}, {64, 1001, true}};
  for (const auto& s : head_shapes) {
    SCOPED_TRACE(std::to_string(s.inner) + "x" + std::to_string(s.cols));
    rms_case c(rng, s.inner, s.cols, s.bias, -2.0F, 2.0F);
    auto& p = c.p;
    for (int v = -1; v < cuda::gemv_variants; ++v) {
      SCOPED_TRACE("gemv variant " + std::to_string(v));
      p.gemv_variant = v;
      const std::int32_t draw = folded_draw(p, s.cols, state);
      EXPECT_GE(draw, 0);
      EXPECT_LT(draw, s.cols);
    }
  }
  // Planted: zero weights, so every output is its bias.
  constexpr std::int64_t inner = 64;
  constexpr std::int64_t cols = 5000;
  const auto h = rng.floats(static_cast<std::size_t>(inner));
  const auto d_h = upload(h);
  const auto d_nw = upload(std::vector<float>(static_cast<std::size_t>(inner), 1.0F));
  const auto d_w = upload(std::vector<std::uint16_t>(static_cast<std::size_t>(cols * inner), 0));
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  struct planted {
    const char* what;
    float rest;
    std::vector<std::pair<std::int64_t, float>> at;
    std::int32_t draw;
  };
  const planted cases[] = {
      {"a tie: the lowest id", -1.0F, {{4000, 3.0F}, {17, 3.0F}, {4999, 2.0F}}, 17},
      {"all zero (0 + -0 is +0): the lowest id", -0.0F, {{9, 0.0F}}, 0},
      {"a NaN", 1.0F, {{2500, std::numeric_limits<float>::quiet_NaN()}}, -1},
      {"+inf", 1.0F, {{4999, inf}}, -1},
      {"no finite entry", -inf, {}, -1},
      {"one finite entry", -inf, {{321, -big}}, 321},
      {"the largest finite value", -big, {{77, big}, {78, big}}, 77},
      {"the last id", -5.0F, {{4999, -4.0F}}, 4999},
  };
  for (int v = -1; v < cuda::gemv_variants; ++v) {
    SCOPED_TRACE("gemv variant " + std::to_string(v));
    for (const auto& c : cases) {
      SCOPED_TRACE(c.what);
      std::vector<float> bias(static_cast<std::size_t>(cols), c.rest);
      for (const auto& [id, value] : c.at)
        bias[static_cast<std::size_t>(id)] = value;
      const auto d_b = upload(bias);
      cuda::rms_norm_linear_bf16_params p;
      p.x = contiguous<const float>(d_h.data(), std::array<std::int64_t, 2>{1, inner});
      p.norm_weight = contiguous<const float>(d_nw.data(), std::array{inner});
      p.weight = contiguous<const std::uint16_t>(d_w.data(), std::array{cols, inner});
      p.bias = contiguous<const float>(d_b.data(), std::array{cols});
      p.gemv_variant = v;
      EXPECT_EQ(folded_draw(p, cols, state), c.draw);
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A batch-1 decode step's fused q / k / v product stores the token's K and
// V in their page itself (kv_append_fold): one kernel equals the product
// then append_kv of its K and V rows bit for bit (the output row and every
// byte of the arena), bf16 and f32 arenas, either layer of the page, at
// every launch shape (what it refuses: gpu_fold_rules, on the host).
TEST(gpu_linear, rms_norm_linear_with_the_kv_append_equals_the_product_then_append_kv) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(331);
  // The 0.56B's attention at one token: 2,048 wide, 16 query heads and 8
  // kv heads of 128 (q 2,048, k and v 1,024 each), a bias on a second shape.
  struct qkv_shape {
    std::int64_t inner;
    std::int32_t q_heads, kv_heads, head_dim;
    bool bias;
  };
  constexpr qkv_shape qkv_shapes[] = {{2048, 16, 8, 128, false}, {64, 4, 2, 16, true}};
  constexpr std::int32_t pages = 4;
  const std::vector<std::int32_t> qo{0, 1}, indptr{0, 2}, indices{3, 1}, last{6}, dpage{1},
      doffset{5};
  const auto d_qo = upload(qo);
  const auto d_indptr = upload(indptr);
  const auto d_indices = upload(indices);
  const auto d_last = upload(last);
  const auto d_dpage = upload(dpage);
  const auto d_doffset = upload(doffset);
  const kv_page_table table{d_qo.span(),   d_indptr.span(), d_indices.span(),
                            d_last.span(), d_dpage.span(),  d_doffset.span()};
  for (const auto& s : qkv_shapes) {
    const std::int64_t e = std::int64_t{s.kv_heads} * s.head_dim;
    const std::int64_t first = std::int64_t{s.q_heads} * s.head_dim;
    const std::int64_t cols = first + 2 * e;
    SCOPED_TRACE(std::to_string(s.inner) + " -> " + std::to_string(cols));
    const rms_case c(rng, s.inner, cols, s.bias, -2.0F, 2.0F);
    const auto& p = c.p;
    const std::array<std::int64_t, 2> out_row{1, cols};
    for (const auto dtype : {mstar::dtype::bfloat16, mstar::dtype::float32}) {
      const kv_geometry g{16, 2, s.kv_heads, s.head_dim, dtype};
      const auto bytes = static_cast<std::size_t>(pages) * g.page_bytes();
      for (const std::int32_t layer : {0, 1}) {
        for (int v = -1; v < cuda::gemv_variants; ++v) {
          SCOPED_TRACE(std::string{dtype == mstar::dtype::bfloat16 ? "bf16" : "f32"} +
                       " arena, layer " + std::to_string(layer) + ", gemv variant " +
                       std::to_string(v));
          // Two launches: the product, then append_kv of its K and V.
          auto d_arena2 = poisoned<std::byte>(bytes, 0x5a);
          auto d_out2 = poisoned<float>(static_cast<std::size_t>(cols));
          auto two = p;
          two.gemv_variant = v;
          two.out_f32 = contiguous(d_out2.data(), out_row);
          ASSERT_EQ(cuda::rms_norm_linear_bf16(two, nullptr), cudaSuccess);
          ASSERT_EQ(cuda::append_kv({{d_arena2.data(), g},
                                     layer,
                                     table,
                                     d_out2.data() + first,
                                     d_out2.data() + first + e},
                                    nullptr),
                    cudaSuccess);
          // One: the append folded in.
          auto d_arena1 = poisoned<std::byte>(bytes, 0x5a);
          auto d_out1 = poisoned<float>(static_cast<std::size_t>(cols));
          auto one = two;
          one.out_f32 = contiguous(d_out1.data(), out_row);
          one.append = cuda::kv_append_fold{{d_arena1.data(), g}, layer, table, first};
          ASSERT_EQ(cuda::rms_norm_linear_bf16(one, nullptr), cudaSuccess);
          const auto out1 = d_out1.download();
          EXPECT_EQ(std::memcmp(out1.data(), d_out2.download().data(), out1.size() * sizeof(float)),
                    0)
              << "the product";
          const auto arena1 = d_arena1.download();
          const auto arena2 = d_arena2.download();
          EXPECT_EQ(std::memcmp(arena1.data(), arena2.data(), bytes), 0) << "the arena";
          // And the append wrote something: the token's first K element.
          const std::size_t at = g.slot_offset(1, static_cast<std::size_t>(layer), kv_half::key, 5);
          EXPECT_NE(
              std::memcmp(arena1.data() + at, poisoned<std::byte>(4, 0x5a).download().data(), 4),
              0);
        }
      }
    }
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Mamba-2's out_proj at batch 1: the gated norm and the product in one
// kernel equal gated_rms_norm (bf16 output, its warp form) then linear_bf16
// bit for bit, every output form and launch shape, the gate a strided view
// into a wider row as Nemotron-H's z is; and the CPU's within budget.
TEST(gpu_linear, gated_rms_norm_linear_equals_the_gated_norm_then_the_product_bit_for_bit) {
  MSTAR_REQUIRE_GPU();
  if (!cuda::gated_rms_norm_warp_form())
    GTEST_SKIP() << "MSTAR_GATED_NORM_WARP=0: gated_rms_norm takes its block form";
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(305);
  // (K, group, N, bias): the 0.56B's out_proj (groups of 512), the 8B's
  // (1024), groups of 128 and 256, a last block half empty (N 1001).
  struct gated_shape {
    std::int64_t inner, group, cols;
    bool bias;
  };
  constexpr gated_shape gated_shapes[] = {{4096, 512, 2048, false}, {4096, 512, 1001, true},
                                          {8192, 1024, 4096, true}, {1024, 128, 1001, true},
                                          {1024, 128, 2048, false}, {2048, 256, 4096, false}};
  const float eps = 1e-5F;
  for (const auto& s : gated_shapes) {
    SCOPED_TRACE(std::to_string(s.inner) + "/" + std::to_string(s.group) + "x" +
                 std::to_string(s.cols));
    const std::int64_t wide = 2 * s.inner + 72;  // z's row in the in_proj output
    const auto y = rng.floats(static_cast<std::size_t>(s.inner), -2.0F, 2.0F);
    const auto zw = rng.floats(static_cast<std::size_t>(wide), -4.0F, 4.0F);
    const auto nw = rng.floats(static_cast<std::size_t>(s.inner));
    auto w = rng.floats(static_cast<std::size_t>(s.cols * s.inner));
    const auto b = rng.floats(static_cast<std::size_t>(s.cols));
    const auto residual = rng.floats(static_cast<std::size_t>(s.cols));
    const auto wh = rounded_to_bf16(w);
    const std::array<std::int64_t, 2> row{1, s.inner};
    // CPU: the gated norm, rounded to bf16, then the product.
    std::vector<float> normed(y.size());
    ASSERT_TRUE(gated_rms_norm({contiguous(y.data(), row),
                                {zw.data(), row, {wide, 1}},
                                contiguous(nw.data(), std::array{s.inner}),
                                contiguous(normed.data(), row),
                                s.group,
                                eps}));
    (void)rounded_to_bf16(normed);
    const auto ref = test_gemv::cpu_row_product(normed, w, b, s.bias, s.inner, s.cols);

    const auto d_y = upload(y);
    const auto d_z = upload(zw);
    const auto d_nw = upload(nw);
    const auto d_w = upload(wh);
    const auto d_b = upload(b);
    const auto dbv = bias_or_none(d_b.data(), s.bias, s.cols);
    const view<const float, 2> zv{d_z.data(), row, {wide, 1}};
    // Two launches: gated_rms_norm into bf16, then the product (the GEMV).
    auto d_x16 = poisoned<std::uint16_t>(static_cast<std::size_t>(s.inner));
    gated_rms_norm_params g{contiguous<const float>(d_y.data(), row),
                            zv,
                            contiguous<const float>(d_nw.data(), std::array{s.inner}),
                            {},
                            s.group,
                            eps};
    g.out_bf16 = contiguous(d_x16.data(), row);
    ASSERT_EQ(cuda::gated_rms_norm(g, nullptr), cudaSuccess);
    cuda::linear_bf16_params two{
        contiguous<const std::uint16_t>(d_x16.data(), row),
        contiguous<const std::uint16_t>(d_w.data(), std::array{s.cols, s.inner}), dbv};
    cuda::gated_rms_norm_linear_bf16_params one;
    one.x = contiguous<const float>(d_y.data(), row);
    one.gate = zv;
    one.norm_weight = contiguous<const float>(d_nw.data(), std::array{s.inner});
    one.group_size = s.group;
    one.eps = eps;
    one.weight = two.weight;
    one.bias = dbv;
    test_gemv::expect_fold_equals_two_launches(*blas, two, one,
                                               cuda::gated_rms_norm_linear_bf16_fits,
                                               cuda::gated_rms_norm_linear_bf16, ref, residual);
    EXPECT_EQ(d_y.download(), y) << "y is read only";
    EXPECT_EQ(d_z.download(), zw) << "the gate is read only";
  }
}

// Shapes the gated GEMV does not take (gated_rms_norm's block form would
// norm them, so no fold equals it) are refused before any launch.
TEST(gpu_linear, gated_rms_norm_linear_refuses_what_the_warp_form_does_not_take) {
  MSTAR_REQUIRE_GPU();
  test_gemv::refusal_buffers buf;
  struct gated_case {
    std::int64_t rows, k, group, gate_shift, gate_stride;
    bool accumulate_bf16;
    cudaError_t want;
  };
  constexpr gated_case cases[] = {
      {1, 1024, 128, 0, 1024, false, cudaSuccess},               // taken
      {1, 1024, 0, 0, 1024, false, cudaSuccess},                 // one group of 1024
      {2, 1024, 128, 0, 1024, false, cudaErrorInvalidValue},     // two rows
      {1, 1536, 384, 0, 1536, false, cudaErrorInvalidValue},     // a group of 384
      {1, 1024, 64, 0, 1024, false, cudaErrorInvalidValue},      // a group of 64
      {1, 2048, 2048, 0, 2048, false, cudaErrorInvalidValue},    // a group past 1024
      {1, 1536, 1024, 0, 1536, false, cudaErrorInvalidValue},    // K not whole groups
      {1, 17408, 1024, 0, 17408, false, cudaErrorInvalidValue},  // K past the shared row
      {1, 1024, 128, 1, 1024, false, cudaErrorInvalidValue},     // gate off 16 bytes
      {1, 1024, 128, 0, 1026, false, cudaErrorInvalidValue},     // gate rows off float4s
      {1, 1024, 128, 0, 1024, true, cudaErrorInvalidValue},      // bf16 out accumulating
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("k " + std::to_string(c.k) + " group " + std::to_string(c.group) + " rows " +
                 std::to_string(c.rows) + " gate +" + std::to_string(c.gate_shift) + " stride " +
                 std::to_string(c.gate_stride));
    cuda::gated_rms_norm_linear_bf16_params p;
    p.x = contiguous<const float>(buf.in.data(), std::array{c.rows, c.k});
    p.gate = {buf.in.data() + c.gate_shift, {c.rows, c.k}, {c.gate_stride, 1}};
    p.norm_weight = contiguous<const float>(buf.in.data(), std::array{c.k});
    p.group_size = c.group;
    buf.set_weight_and_output(p, c.rows, c.k, c.accumulate_bf16);
    test_gemv::expect_taken_as(p, c.want, cuda::gated_rms_norm_linear_bf16_fits,
                               cuda::gated_rms_norm_linear_bf16);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
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
