// Encoder launchers (kernels/cuda/encoder.hpp: LayerNorm, GELU, the weighted
// gather, the 2D rope, segment attention) against the CPU reference
// (kernels/encoder.hpp) by normalised error: fresh random inputs, outputs
// poisoned with NaN, the vision tower's strided q / k / v layout.
#include <gtest/gtest.h>

#include "kernels/encoder.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

TEST(gpu_encoder, layer_norm_with_and_without_bias_matches_the_cpu_in_place_too) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(501);
  for (const std::int64_t hidden : {16, 72, 1152, 1500}) {
    SCOPED_TRACE("hidden " + std::to_string(hidden));
    const std::int64_t rows = 37;
    auto x = rng.floats(static_cast<std::size_t>(rows * hidden), -3.0F, 5.0F);
    const auto w = rng.floats(static_cast<std::size_t>(hidden));
    const auto b = rng.floats(static_cast<std::size_t>(hidden));
    for (const bool with_bias : {true, false}) {
      std::vector<float> ref(x.size());
      ASSERT_TRUE(layer_norm({matrix<const float>(x.data(), rows, hidden), vector(w.data(), hidden),
                              with_bias ? vector(b.data(), hidden) : view<const float, 1>{},
                              matrix(ref.data(), rows, hidden), 1e-6F}));
      const auto dx = upload(x);
      const auto dw = upload(w);
      const auto db = upload(b);
      auto out = poisoned<float>(x.size());
      const auto bias = with_bias ? vector<const float>(db.data(), hidden) : view<const float, 1>{};
      ASSERT_EQ(cuda::layer_norm({matrix<const float>(dx.data(), rows, hidden),
                                  vector<const float>(dw.data(), hidden), bias,
                                  matrix(out.data(), rows, hidden), 1e-6F},
                                 nullptr),
                cudaSuccess);
      EXPECT_TRUE(within(out.download(), ref, budget::f32_reduction));
      // In place: out the same elements as x.
      ASSERT_EQ(cuda::layer_norm({matrix<const float>(dx.data(), rows, hidden),
                                  vector<const float>(dw.data(), hidden), bias,
                                  matrix(dx.data(), rows, hidden), 1e-6F},
                                 nullptr),
                cudaSuccess);
      EXPECT_TRUE(within(dx.download(), ref, budget::f32_reduction));
    }
  }
}

TEST(gpu_encoder, gelu_both_forms_match_the_cpu) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(502);
  const std::int64_t rows = 29, cols = 301;
  const auto x = rng.floats(static_cast<std::size_t>(rows * cols), -6.0F, 6.0F);
  for (const auto form : {gelu_form::tanh, gelu_form::erf}) {
    std::vector<float> ref(x.size());
    ASSERT_TRUE(gelu({matrix(x.data(), rows, cols), matrix(ref.data(), rows, cols), form}));
    const auto dx = upload(x);
    auto out = poisoned<float>(x.size());
    ASSERT_EQ(cuda::gelu({matrix<const float>(dx.data(), rows, cols),
                          matrix(out.data(), rows, cols), form},
                         nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(out.download(), ref, budget::f32_elementwise));
  }
}

TEST(gpu_encoder, weighted_gather_add_adds_the_taps_and_poisons_bad_indices) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(503);
  const std::int64_t table_rows = 49, hidden = 80, tokens = 61, taps = 4;
  const auto table = rng.floats(static_cast<std::size_t>(table_rows * hidden));
  auto index = rng.ints(static_cast<std::size_t>(tokens * taps), 0,
                        static_cast<std::int32_t>(table_rows) - 1);
  const auto weight = rng.floats(static_cast<std::size_t>(tokens * taps), 0.0F, 1.0F);
  const auto base = rng.floats(static_cast<std::size_t>(tokens * hidden));
  auto ref = base;
  ASSERT_TRUE(weighted_gather_add(
      {matrix(table.data(), table_rows, hidden), matrix(index.data(), tokens, taps),
       matrix(weight.data(), tokens, taps), matrix(ref.data(), tokens, hidden)}));
  const auto dt = upload(table);
  auto di = upload(index);
  const auto dw = upload(weight);
  auto out = upload(base);
  const auto launch = [&dt, &di, &dw, &out] {
    return cuda::weighted_gather_add(
        {matrix<const float>(dt.data(), table_rows, hidden),
         matrix<const std::int32_t>(di.data(), tokens, taps),
         matrix<const float>(dw.data(), tokens, taps), matrix(out.data(), tokens, hidden)},
        nullptr);
  };
  ASSERT_EQ(launch(), cudaSuccess);
  EXPECT_TRUE(within(out.download(), ref, budget::f32_elementwise));
  const std::int32_t bad = static_cast<std::int32_t>(table_rows);
  ASSERT_EQ(cudaMemcpy(di.data() + 4 * 5 + 2, &bad, sizeof bad, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(launch(), cudaSuccess);
  const auto got = out.download();
  EXPECT_TRUE(std::isnan(got[static_cast<std::size_t>(5 * hidden)]));
  EXPECT_FALSE(std::isnan(got[static_cast<std::size_t>(4 * hidden)]));
}

TEST(gpu_encoder, axial_rope_rotates_the_qkv_layout_as_the_cpu) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(504);
  for (const std::int64_t dim : {8, 72, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(dim));
    const std::int64_t tokens = 45, heads = 3, hid = heads * dim;
    // q inside a [tokens, 3, heads, dim] qkv buffer, as the tower holds it.
    const auto qkv = rng.floats(static_cast<std::size_t>(tokens * 3 * hid));
    const auto pos = rng.ints(static_cast<std::size_t>(tokens * 2), 0, 600);
    std::vector<float> freq(static_cast<std::size_t>(dim / 4));
    for (std::size_t i = 0; i < freq.size(); ++i)
      freq[i] = std::pow(10000.0F, -static_cast<float>(2 * i) / static_cast<float>(dim / 2));
    auto ref = qkv;
    ASSERT_TRUE(axial_rope({{ref.data() + hid, {tokens, heads, dim}, {3 * hid, dim, 1}},
                            matrix(pos.data(), tokens, 2),
                            vector(freq.data(), dim / 4)}));
    auto d = upload(qkv);
    const auto dp = upload(pos);
    const auto df = upload(freq);
    ASSERT_EQ(cuda::axial_rope({{d.data() + hid, {tokens, heads, dim}, {3 * hid, dim, 1}},
                                matrix<const std::int32_t>(dp.data(), tokens, 2),
                                vector<const float>(df.data(), dim / 4)},
                               nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(d.download(), ref, budget::f32_reduction));
  }
}

// Segments of uneven lengths (1 token, a tile boundary, past several tiles,
// an empty one), head_dim across the kernel's four widths, q / k / v read
// from one packed qkv buffer.
TEST(gpu_encoder, segment_attention_attends_within_each_segment_as_the_cpu) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(505);
  const std::vector<std::int32_t> cu{0, 1, 33, 33, 100, 164, 171};
  const std::int64_t tokens = cu.back();
  for (const std::int64_t dim : {8, 16, 40, 64, 72, 128, 256}) {
    SCOPED_TRACE("head_dim " + std::to_string(dim));
    const std::int64_t heads = 3, hid = heads * dim;
    const auto qkv = rng.floats(static_cast<std::size_t>(tokens * 3 * hid), -2.0F, 2.0F);
    const auto part = [tokens, hid, heads, dim](float* base, std::int64_t which) {
      return view<const float, 3>{base + which * hid, {tokens, heads, dim}, {3 * hid, dim, 1}};
    };
    auto host = qkv;
    std::vector<float> ref(static_cast<std::size_t>(tokens * hid));
    ASSERT_TRUE(segment_attention({part(host.data(), 0), part(host.data(), 1), part(host.data(), 2),
                                   cu, contiguous<float, 3>(ref.data(), {tokens, heads, dim})}));
    const auto d = upload(qkv);
    const auto dcu = upload(cu);
    auto out = poisoned<float>(ref.size());
    const std::span<const std::int32_t> segments{dcu.data(), cu.size()};
    ASSERT_EQ(
        cuda::segment_attention({part(d.data(), 0), part(d.data(), 1), part(d.data(), 2), segments,
                                 contiguous<float, 3>(out.data(), {tokens, heads, dim})},
                                nullptr),
        cudaSuccess);
    EXPECT_TRUE(within(out.download(), ref, budget::attention));
  }
}

TEST(gpu_encoder, segment_attention_refuses_scores_scratch_and_wide_heads) {
  MSTAR_REQUIRE_GPU();
  auto q = poisoned<float>(4 * 2 * 264);
  auto cu = upload(std::vector<std::int32_t>{0, 4});
  auto out = poisoned<float>(q.size());
  const std::span<const std::int32_t> segments{cu.data(), 2};
  const auto wide = contiguous<const float, 3>(q.data(), {4, 2, 264});
  EXPECT_EQ(
      cuda::segment_attention(
          {wide, wide, wide, segments, contiguous<float, 3>(out.data(), {4, 2, 264})}, nullptr),
      cudaErrorInvalidValue);
  const auto narrow = contiguous<const float, 3>(q.data(), {4, 2, 64});
  std::vector<float> scratch(16);
  EXPECT_EQ(cuda::segment_attention({narrow, narrow, narrow, segments,
                                     contiguous<float, 3>(out.data(), {4, 2, 64}), 0.0F, scratch},
                                    nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace mstar::kernels
