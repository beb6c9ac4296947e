#pragma once

// What the GEMV fold tests share (gpu_linear_test.cpp's gated norm fold,
// gpu_activation_linear_test.cpp's activation fold): bf16 rounding on the
// host, the CPU's one-row product, the fold compared with the two launches
// it replaces in every output form and launch shape, and the refusal
// cases' buffers.
#include <array>
#include <cstdint>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/math.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels::test_gemv {

// bf16 bits of `x`, and `x` rounded to them in place.
inline std::vector<std::uint16_t> rounded_to_bf16(std::vector<float>& x) {
  std::vector<std::uint16_t> bits(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = bf16_bits_to_float(bits[i] = float_to_bf16_bits(x[i]));
  return bits;
}

// `b` [cols] where the case has a bias, else absent (host or device memory).
inline view<const float, 1> bias_or_none(const float* b, bool bias, std::int64_t cols) {
  return bias ? contiguous(b, std::array{cols}) : view<const float, 1>{};
}

// The CPU's `in [1, inner] * w^T (+ b)`: [1, cols], f32.
inline std::vector<float> cpu_row_product(const std::vector<float>& in, const std::vector<float>& w,
                                          const std::vector<float>& b, bool bias,
                                          std::int64_t inner, std::int64_t cols) {
  std::vector<float> ref(static_cast<std::size_t>(cols));
  EXPECT_TRUE(
      linear({contiguous(in.data(), std::array<std::int64_t, 2>{1, inner}),
              contiguous(w.data(), std::array{cols, inner}), bias_or_none(b.data(), bias, cols),
              contiguous(ref.data(), std::array<std::int64_t, 2>{1, cols})}));
  return ref;
}

// In every output form (f32, bf16, f32 accumulating onto `residual`) and
// every launch shape of the GEMV (-1: the default), the fold `one` (which
// `fits` takes and `launch` runs) writes what the product `two` after the
// separate launch writes, bit for bit, and the same bits when run again; in
// f32, the CPU's `ref` (plus the residual when accumulating) within the
// bf16 budget. Shapes of different splits (gemv_shape.hpp: warps a feature)
// add in different orders, so only the budget ties them to each other.
// `two.x` already holds the separate launch's bf16 row; both outputs are
// set here.
template <class Fold>
void expect_fold_equals_two_launches(const cuda::blas_handle& blas, cuda::linear_bf16_params two,
                                     Fold one, bool (*fits)(const Fold&),
                                     cudaError_t (*launch)(const Fold&, cudaStream_t),
                                     const std::vector<float>& ref,
                                     const std::vector<float>& residual) {
  using test::gpu::poisoned;
  using test::gpu::upload;
  const std::array<std::int64_t, 2> out_row{1, static_cast<std::int64_t>(ref.size())};
  for (const int form : {0, 1, 2}) {  // f32, bf16, f32 accumulating
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
      ASSERT_TRUE(fits(one));
      ASSERT_EQ(cuda::linear_bf16(blas, two, nullptr), cudaSuccess);
      ASSERT_EQ(launch(one, nullptr), cudaSuccess);
      if (form == 1) {
        EXPECT_EQ(d_one16.download(), d_two16.download());
        continue;
      }
      const auto got = d_one.download();
      EXPECT_EQ(got, d_two.download());
      if (form == 0) {  // run to run: the warps' sums meet in a fixed order
        auto d_again = poisoned<float>(ref.size());
        one.out_f32 = contiguous(d_again.data(), out_row);
        ASSERT_EQ(launch(one, nullptr), cudaSuccess);
        EXPECT_EQ(d_again.download(), got);
      }
      auto want = ref;
      for (std::size_t i = 0; i < want.size() && form == 2; ++i)
        want[i] += residual[i];
      EXPECT_TRUE(test::gpu::within(got, want, test::gpu::budget::bf16_in_f32_out));
    }
  }
}

// The refusal tests' memory: inputs wide enough for every case, outputs
// apart from the inputs the taken cases read.
struct refusal_buffers {
  test::gpu::device_vector<float> in = test::gpu::poisoned<float>(40000);
  test::gpu::device_vector<std::uint16_t> in16 = test::gpu::poisoned<std::uint16_t>(40000);
  test::gpu::device_vector<float> out = test::gpu::poisoned<float>(4);
  test::gpu::device_vector<std::uint16_t> out16 = test::gpu::poisoned<std::uint16_t>(4);

  // `p`'s weight, two outputs of K `k`, and its `rows` outputs: f32, or
  // bf16 accumulating (which no fold takes).
  template <class Fold>
  void set_weight_and_output(Fold& p, std::int64_t rows, std::int64_t k, bool accumulate_bf16) {
    p.weight = contiguous<const std::uint16_t>(in16.data(), std::array<std::int64_t, 2>{2, k});
    if (accumulate_bf16)
      p.out_bf16 = contiguous(out16.data(), std::array<std::int64_t, 2>{rows, 2});
    else
      p.out_f32 = contiguous(out.data(), std::array<std::int64_t, 2>{rows, 2});
    p.accumulate = accumulate_bf16;
  }
};

// `fits` says of `p` what `launch` does: taken (cudaSuccess) or refused
// before any launch.
template <class Fold>
void expect_taken_as(const Fold& p, cudaError_t want, bool (*fits)(const Fold&),
                     cudaError_t (*launch)(const Fold&, cudaStream_t)) {
  EXPECT_EQ(fits(p), want == cudaSuccess);
  EXPECT_EQ(launch(p, nullptr), want);
}

}  // namespace mstar::kernels::test_gemv
