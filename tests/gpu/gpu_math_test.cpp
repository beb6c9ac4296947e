// Dense math launchers (kernels/cuda/math.hpp) against the CPU reference
// (kernels/math.hpp) by normalised error: fresh random inputs, outputs
// poisoned with NaN, strided and broadcast views where the params allow.
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

// Each float's bf16 bits by the CPU's rule (`float_to_bf16_bits`).
std::vector<std::uint16_t> bf16_of(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = float_to_bf16_bits(v[i]);
  return out;
}

std::vector<float> floats_of(const std::vector<std::uint16_t>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = bf16_bits_to_float(v[i]);
  return out;
}

TEST(gpu_math, embedding_gathers_rows_and_poisons_out_of_range_ids) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(201);
  const std::int64_t vocab = 300, hidden = 96, tokens = 50;
  const auto table = rng.floats(static_cast<std::size_t>(vocab * hidden));
  const auto ids =
      rng.ints(static_cast<std::size_t>(tokens), 0, static_cast<std::int32_t>(vocab) - 1);
  std::vector<float> ref(static_cast<std::size_t>(tokens * hidden));
  ASSERT_TRUE(embedding({vector(ids.data(), tokens), matrix(table.data(), vocab, hidden),
                         matrix(ref.data(), tokens, hidden)}));
  const auto d_table = upload(table);
  auto d_ids = upload(ids);
  auto d_out = poisoned<float>(ref.size());
  ASSERT_EQ(cuda::embedding({vector<const std::int32_t>(d_ids.data(), tokens),
                             matrix<const float>(d_table.data(), vocab, hidden),
                             matrix(d_out.data(), tokens, hidden)},
                            nullptr),
            cudaSuccess);
  EXPECT_TRUE(within(d_out.download(), ref, budget::f32_elementwise));

  const std::int32_t bad = static_cast<std::int32_t>(vocab);  // one past the end
  ASSERT_EQ(cudaMemcpy(d_ids.data() + 3, &bad, sizeof bad, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cuda::embedding({vector<const std::int32_t>(d_ids.data(), tokens),
                             matrix<const float>(d_table.data(), vocab, hidden),
                             matrix(d_out.data(), tokens, hidden)},
                            nullptr),
            cudaSuccess);
  const auto got = d_out.download();
  for (std::int64_t h = 0; h < hidden; ++h)
    EXPECT_TRUE(std::isnan(got[static_cast<std::size_t>(3 * hidden + h)]));
}

TEST(gpu_math, rms_norm_matches_on_strided_rows_and_in_place) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(202);
  const std::int64_t tokens = 33, hidden = 1000, stride = 1024;
  const auto x = rng.floats(static_cast<std::size_t>(tokens * stride), -3.0F, 3.0F);
  const auto w = rng.floats(static_cast<std::size_t>(hidden));
  const view<const float, 2> xv{x.data(), {tokens, hidden}, {stride, 1}};
  std::vector<float> ref(static_cast<std::size_t>(tokens * hidden));
  ASSERT_TRUE(rms_norm({xv, vector(w.data(), hidden), matrix(ref.data(), tokens, hidden), 1e-5F}));
  auto d_x = upload(x);
  const auto d_w = upload(w);
  auto d_out = poisoned<float>(ref.size());
  const view<const float, 2> dxv{d_x.data(), {tokens, hidden}, {stride, 1}};
  ASSERT_EQ(cuda::rms_norm({dxv, vector<const float>(d_w.data(), hidden),
                            matrix(d_out.data(), tokens, hidden), 1e-5F},
                           nullptr),
            cudaSuccess);
  EXPECT_TRUE(within(d_out.download(), ref, budget::f32_reduction));
  // In place: out is the same strided elements as x.
  const view<float, 2> inplace{d_x.data(), {tokens, hidden}, {stride, 1}};
  ASSERT_EQ(cuda::rms_norm({dxv, vector<const float>(d_w.data(), hidden), inplace, 1e-5F}, nullptr),
            cudaSuccess);
  const auto back = d_x.download();
  std::vector<float> got;
  for (std::int64_t t = 0; t < tokens; ++t)
    got.insert(got.end(), back.begin() + t * stride, back.begin() + t * stride + hidden);
  EXPECT_TRUE(within(got, ref, budget::f32_reduction));
}

// Groups of 128..1024 contiguous channels take the warp kernel (a float4 a
// lane, V = group / 128 of them); 64, and a gate whose rows start off a
// 16-byte boundary, take the block kernel. Both against the CPU.
TEST(gpu_math, gated_rms_norm_matches_per_group_with_and_without_gate) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(203);
  const std::int64_t tokens = 17;
  for (const std::int64_t channels : {std::int64_t{512}, std::int64_t{2048}}) {
    // The gate is a column slice of a wider matrix, as Nemotron-H's z is of
    // the in-projection's output: `shift` floats in, rows `wide` apart.
    const std::int64_t wide = channels + 12;
    const auto x = rng.floats(static_cast<std::size_t>(tokens * channels), -2.0F, 2.0F);
    const auto zw = rng.floats(static_cast<std::size_t>(tokens * wide), -4.0F, 4.0F);
    const auto w = rng.floats(static_cast<std::size_t>(channels));
    const auto d_x = upload(x);
    const auto d_z = upload(zw);
    const auto d_w = upload(w);
    for (const std::int64_t group : {std::int64_t{0}, std::int64_t{1024}, std::int64_t{256},
                                     std::int64_t{128}, std::int64_t{64}}) {
      if (group > channels)
        continue;  // groups divide the channels
      for (const std::int64_t shift : {std::int64_t{-1}, std::int64_t{4}, std::int64_t{1}}) {
        const bool gated = shift >= 0;
        SCOPED_TRACE("channels " + std::to_string(channels) + " group_size " +
                     std::to_string(group) + (gated ? " gate at +" + std::to_string(shift) : ""));
        const view<const float, 2> z_host =
            gated ? view<const float, 2>{zw.data() + shift, {tokens, channels}, {wide, 1}}
                  : view<const float, 2>{};
        const view<const float, 2> z_dev =
            gated ? view<const float, 2>{d_z.data() + shift, {tokens, channels}, {wide, 1}}
                  : view<const float, 2>{};
        std::vector<float> ref(x.size());
        ASSERT_TRUE(
            gated_rms_norm({matrix(x.data(), tokens, channels), z_host, vector(w.data(), channels),
                            matrix(ref.data(), tokens, channels), group, 1e-6F}));
        auto d_out = poisoned<float>(ref.size());
        ASSERT_EQ(cuda::gated_rms_norm({matrix<const float>(d_x.data(), tokens, channels), z_dev,
                                        vector<const float>(d_w.data(), channels),
                                        matrix(d_out.data(), tokens, channels), group, 1e-6F},
                                       nullptr),
                  cudaSuccess);
        EXPECT_TRUE(within(d_out.download(), ref, budget::f32_reduction));
      }
    }
  }
}

// The fused kernels' bf16 outputs are checked three ways: equal to the
// GPU's own f32 output rounded by the CPU's rule (the same value, the same
// rounding), equal whether or not the f32 output is written, and within the
// bf16 budget of the CPU reference. Their f32 outputs equal the unfused
// launchers' bit for bit (what keeps the float32 model's logits unchanged).
void add_rms_norm_case(test::random_tensors& rng, std::int64_t hidden) {
  SCOPED_TRACE("hidden " + std::to_string(hidden));
  const std::int64_t tokens = 33, stride = hidden + 24;
  const auto residual = rng.floats(static_cast<std::size_t>(tokens * stride), -3.0F, 3.0F);
  const auto delta = rng.floats(static_cast<std::size_t>(tokens * hidden), -2.0F, 2.0F);
  const auto w = rng.floats(static_cast<std::size_t>(hidden));
  const auto d_delta = upload(delta);
  const auto d_w = upload(w);
  const auto dwv = vector<const float>(d_w.data(), hidden);
  const auto strided = [&](float* data) {
    return view<float, 2>{data, {tokens, hidden}, {stride, 1}};
  };
  for (const bool with_delta : {true, false}) {
    SCOPED_TRACE(with_delta ? "with delta" : "without delta");
    auto ref_res = residual;
    std::vector<float> ref(static_cast<std::size_t>(tokens * hidden));
    ASSERT_TRUE(
        add_rms_norm({strided(ref_res.data()),
                      with_delta ? matrix(delta.data(), tokens, hidden) : view<const float, 2>{},
                      vector(w.data(), hidden),
                      matrix(ref.data(), tokens, hidden),
                      {},
                      1e-5F}));
    const view<const float, 2> ddv =
        with_delta ? matrix<const float>(d_delta.data(), tokens, hidden) : view<const float, 2>{};
    // Both outputs.
    auto d_res = upload(residual);
    auto d_out = poisoned<float>(ref.size());
    auto d_out16 = poisoned<std::uint16_t>(ref.size());
    ASSERT_EQ(
        cuda::add_rms_norm({strided(d_res.data()), ddv, dwv, matrix(d_out.data(), tokens, hidden),
                            matrix(d_out16.data(), tokens, hidden), 1e-5F},
                           nullptr),
        cudaSuccess);
    EXPECT_TRUE(within(d_res.download(), ref_res, budget::f32_elementwise));  // padding too
    const auto out = d_out.download();
    const auto out16 = d_out16.download();
    EXPECT_TRUE(within(out, ref, budget::f32_reduction));
    EXPECT_EQ(out16, bf16_of(out));
    EXPECT_TRUE(within(floats_of(out16), ref, budget::bf16_out));
    // bf16 alone: the same bits.
    auto d_res2 = upload(residual);
    auto d_alone = poisoned<std::uint16_t>(ref.size());
    ASSERT_EQ(
        cuda::add_rms_norm(
            {strided(d_res2.data()), ddv, dwv, {}, matrix(d_alone.data(), tokens, hidden), 1e-5F},
            nullptr),
        cudaSuccess);
    EXPECT_EQ(d_alone.download(), out16);
    EXPECT_EQ(d_res2.download(), d_res.download());
    // The unfused launchers: add, then rms_norm.
    auto d_res3 = upload(residual);
    auto d_unfused = poisoned<float>(ref.size());
    if (with_delta) {
      ASSERT_EQ(cuda::add({strided(d_res3.data()), ddv, strided(d_res3.data())}, nullptr),
                cudaSuccess);
    }
    ASSERT_EQ(cuda::rms_norm(
                  {strided(d_res3.data()), dwv, matrix(d_unfused.data(), tokens, hidden), 1e-5F},
                  nullptr),
              cudaSuccess);
    EXPECT_EQ(d_unfused.download(), out);
    // In place, out the residual itself (the model's final norm after the
    // last-token gather).
    auto d_res4 = upload(residual);
    ASSERT_EQ(cuda::add_rms_norm(
                  {strided(d_res4.data()), ddv, dwv, strided(d_res4.data()), {}, 1e-5F}, nullptr),
              cudaSuccess);
    const auto back = d_res4.download();
    std::vector<float> got;
    for (std::int64_t t = 0; t < tokens; ++t)
      got.insert(got.end(), back.begin() + t * stride, back.begin() + t * stride + hidden);
    EXPECT_EQ(got, out);
  }
}

TEST(gpu_math, add_rms_norm_matches_add_then_norm_with_f32_and_bf16_outputs) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(208);
  // Rows of at most 4 / 8 / 16 columns a thread (held in registers) and wider
  // (the loop form).
  for (const std::int64_t hidden : {1000, 2048, 4000, 5000})
    add_rms_norm_case(rng, hidden);
}

TEST(gpu_math, fused_launchers_refuse_no_output_and_a_self_overlapping_residual) {
  MSTAR_REQUIRE_GPU();
  auto d_x = poisoned<float>(64);
  auto d_w = poisoned<float>(8);
  auto d_out = poisoned<float>(64);
  const auto xv = matrix(d_x.data(), 8, 8);
  const auto wv = vector<const float>(d_w.data(), 8);
  const auto ov = matrix(d_out.data(), 8, 8);
  EXPECT_EQ(cuda::add_rms_norm({xv, {}, wv}, nullptr), cudaErrorInvalidValue);
  const view<float, 2> shared{d_x.data(), {8, 8}, {0, 1}};  // every row the same elements
  EXPECT_EQ(cuda::add_rms_norm({shared, {}, wv, ov}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::activate({xv, {}, {}, activation::silu}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::gated_rms_norm({xv, {}, wv, {}, 0, 1e-6F}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(gpu_math, activate_writes_f32_and_bf16_outputs_like_silu_and_relu2) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(209);
  const std::int64_t rows = 70, cols = 333;
  const auto x = rng.floats(static_cast<std::size_t>(rows * cols), -8.0F, 8.0F);
  const auto d_x = upload(x);
  const auto dxv = matrix<const float>(d_x.data(), rows, cols);
  for (const auto fn : {activation::silu, activation::relu2}) {
    SCOPED_TRACE(fn == activation::silu ? "silu" : "relu2");
    std::vector<float> ref(x.size());
    ASSERT_TRUE(activate({matrix(x.data(), rows, cols), matrix(ref.data(), rows, cols), {}, fn}));
    auto d_out = poisoned<float>(x.size());
    auto d_out16 = poisoned<std::uint16_t>(x.size());
    ASSERT_EQ(cuda::activate(
                  {dxv, matrix(d_out.data(), rows, cols), matrix(d_out16.data(), rows, cols), fn},
                  nullptr),
              cudaSuccess);
    const auto out = d_out.download();
    const auto out16 = d_out16.download();
    EXPECT_TRUE(within(out, ref, budget::f32_elementwise));
    EXPECT_EQ(out16, bf16_of(out));
    EXPECT_TRUE(within(floats_of(out16), ref, budget::bf16_out));
    auto d_alone = poisoned<std::uint16_t>(x.size());
    ASSERT_EQ(cuda::activate({dxv, {}, matrix(d_alone.data(), rows, cols), fn}, nullptr),
              cudaSuccess);
    EXPECT_EQ(d_alone.download(), out16);
    // In place equals the unfused launcher's output.
    auto d_in_place = upload(x);
    const auto iv = matrix(d_in_place.data(), rows, cols);
    ASSERT_EQ(cuda::activate({iv, iv, {}, fn}, nullptr), cudaSuccess);
    auto d_unfused = poisoned<float>(x.size());
    const auto uv = matrix(d_unfused.data(), rows, cols);
    ASSERT_EQ(
        fn == activation::silu ? cuda::silu({dxv, uv}, nullptr) : cuda::relu2({dxv, uv}, nullptr),
        cudaSuccess);
    EXPECT_EQ(d_in_place.download(), out);
    EXPECT_EQ(d_unfused.download(), out);
  }
}

// SwiGLU from a packed [gate | up] row as the MLPs have it: four columns a
// thread (336 columns) and one (333), f32 and bf16, equal to silu then mul.
TEST(gpu_math, activate_with_up_equals_activation_then_mul) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(211);
  for (const std::int64_t cols : {336, 333}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const std::int64_t rows = 37;
    const auto gu = rng.floats(static_cast<std::size_t>(rows * 2 * cols), -6.0F, 6.0F);
    const view<const float, 2> gate{gu.data(), {rows, cols}, {2 * cols, 1}};
    const view<const float, 2> up{gu.data() + cols, {rows, cols}, {2 * cols, 1}};
    std::vector<float> ref(static_cast<std::size_t>(rows * cols));
    activation_params cp;
    cp.x = gate;
    cp.up = up;
    cp.out = matrix(ref.data(), rows, cols);
    ASSERT_TRUE(activate(cp));
    const auto d_gu = upload(gu);
    const view<const float, 2> dg{d_gu.data(), {rows, cols}, {2 * cols, 1}};
    const view<const float, 2> du{d_gu.data() + cols, {rows, cols}, {2 * cols, 1}};
    auto d_out = poisoned<float>(ref.size());
    auto d_out16 = poisoned<std::uint16_t>(ref.size());
    activation_params p;
    p.x = dg;
    p.up = du;
    p.out = matrix(d_out.data(), rows, cols);
    p.out_bf16 = matrix(d_out16.data(), rows, cols);
    ASSERT_EQ(cuda::activate(p, nullptr), cudaSuccess);
    const auto out = d_out.download();
    EXPECT_TRUE(within(out, ref, budget::f32_elementwise));
    EXPECT_EQ(d_out16.download(), bf16_of(out));
    // The unfused pair: silu into a buffer, then the product.
    auto d_act = poisoned<float>(ref.size());
    auto d_prod = poisoned<float>(ref.size());
    const auto av = matrix(d_act.data(), rows, cols);
    ASSERT_EQ(cuda::silu({dg, av}, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::mul({av, du, matrix(d_prod.data(), rows, cols)}, nullptr), cudaSuccess);
    EXPECT_EQ(d_prod.download(), out);
  }
}

TEST(gpu_math, gated_rms_norm_writes_a_bf16_output_alone_or_beside_f32) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(210);
  const std::int64_t tokens = 17, channels = 512;
  const auto x = rng.floats(static_cast<std::size_t>(tokens * channels), -2.0F, 2.0F);
  const auto z = rng.floats(x.size(), -4.0F, 4.0F);
  const auto w = rng.floats(static_cast<std::size_t>(channels));
  const auto d_x = upload(x);
  const auto d_z = upload(z);
  const auto d_w = upload(w);
  for (const std::int64_t group : {std::int64_t{0}, std::int64_t{64}}) {
    SCOPED_TRACE("group_size " + std::to_string(group));
    std::vector<float> ref(x.size());
    ASSERT_TRUE(gated_rms_norm({matrix(x.data(), tokens, channels),
                                matrix(z.data(), tokens, channels), vector(w.data(), channels),
                                matrix(ref.data(), tokens, channels), group, 1e-6F}));
    gated_rms_norm_params p{matrix<const float>(d_x.data(), tokens, channels),
                            matrix<const float>(d_z.data(), tokens, channels),
                            vector<const float>(d_w.data(), channels),
                            {},
                            group,
                            1e-6F};
    auto d_out = poisoned<float>(ref.size());
    auto d_out16 = poisoned<std::uint16_t>(ref.size());
    p.out = matrix(d_out.data(), tokens, channels);
    p.out_bf16 = matrix(d_out16.data(), tokens, channels);
    ASSERT_EQ(cuda::gated_rms_norm(p, nullptr), cudaSuccess);
    const auto out = d_out.download();
    const auto out16 = d_out16.download();
    EXPECT_TRUE(within(out, ref, budget::f32_reduction));
    EXPECT_EQ(out16, bf16_of(out));
    EXPECT_TRUE(within(floats_of(out16), ref, budget::bf16_out));
    auto d_alone = poisoned<std::uint16_t>(ref.size());
    p.out = {};
    p.out_bf16 = matrix(d_alone.data(), tokens, channels);
    ASSERT_EQ(cuda::gated_rms_norm(p, nullptr), cudaSuccess);
    EXPECT_EQ(d_alone.download(), out16);
  }
}

TEST(gpu_math, activations_and_binary_ops_match_including_a_broadcast_bias_row) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(204);
  const std::int64_t rows = 70, cols = 333;
  const auto a = rng.floats(static_cast<std::size_t>(rows * cols), -8.0F, 8.0F);
  const auto b = rng.floats(static_cast<std::size_t>(rows * cols), -8.0F, 8.0F);
  const auto d_a = upload(a);
  const auto d_b = upload(b);
  const auto av = matrix(a.data(), rows, cols);
  const auto dav = matrix<const float>(d_a.data(), rows, cols);
  using unary_cpu = result<void> (*)(const unary_params&);
  using unary_gpu = cudaError_t (*)(const unary_params&, cudaStream_t);
  const std::pair<unary_cpu, unary_gpu> unary[] = {{silu, cuda::silu}, {relu2, cuda::relu2}};
  for (const auto& [cpu, gpu] : unary) {
    std::vector<float> ref(a.size());
    ASSERT_TRUE(cpu({av, matrix(ref.data(), rows, cols)}));
    auto d_out = poisoned<float>(ref.size());
    ASSERT_EQ(gpu({dav, matrix(d_out.data(), rows, cols)}, nullptr), cudaSuccess);
    EXPECT_TRUE(within(d_out.download(), ref, budget::f32_elementwise));
  }
  using binary_cpu = result<void> (*)(const binary_params&);
  using binary_gpu = cudaError_t (*)(const binary_params&, cudaStream_t);
  const std::pair<binary_cpu, binary_gpu> binary[] = {{add, cuda::add}, {mul, cuda::mul}};
  for (const auto& [cpu, gpu] : binary) {
    for (const bool broadcast : {false, true}) {
      // Broadcast: b is its first row repeated through a zero row stride.
      const view<const float, 2> bv{b.data(), {rows, cols}, {broadcast ? 0 : cols, 1}};
      const view<const float, 2> dbv{d_b.data(), {rows, cols}, {broadcast ? 0 : cols, 1}};
      std::vector<float> ref(a.size());
      ASSERT_TRUE(cpu({av, bv, matrix(ref.data(), rows, cols)}));
      auto d_out = poisoned<float>(ref.size());
      ASSERT_EQ(gpu({dav, dbv, matrix(d_out.data(), rows, cols)}, nullptr), cudaSuccess);
      EXPECT_TRUE(within(d_out.download(), ref, budget::f32_elementwise));
    }
  }
}

TEST(gpu_math, softmax_matches_and_zeroes_rows_without_a_finite_score) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(205);
  const std::int64_t rows = 40, cols = 5000;
  auto x = rng.floats(static_cast<std::size_t>(rows * cols), -20.0F, 20.0F);
  const float inf = std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < cols; ++i) {
    x[static_cast<std::size_t>(7 * cols + i)] = -inf;  // row 7: all masked
    if (i % 3 == 0)
      x[static_cast<std::size_t>(8 * cols + i)] = -inf;  // row 8: partly masked
  }
  std::vector<float> ref(x.size());
  ASSERT_TRUE(softmax({matrix(x.data(), rows, cols), matrix(ref.data(), rows, cols)}));
  const auto d_x = upload(x);
  auto d_out = poisoned<float>(ref.size());
  ASSERT_EQ(
      cuda::softmax({matrix<const float>(d_x.data(), rows, cols), matrix(d_out.data(), rows, cols)},
                    nullptr),
      cudaSuccess);
  EXPECT_TRUE(within(d_out.download(), ref, budget::f32_reduction));
}

TEST(gpu_math, rope_matches_both_pairings_partial_rotation_and_given_frequencies) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(206);
  const std::int64_t tokens = 29, heads = 6, head_dim = 64;
  const auto x = rng.floats(static_cast<std::size_t>(tokens * heads * head_dim));
  const auto positions = rng.ints(static_cast<std::size_t>(tokens), 0, 100000);
  const auto freqs = rng.floats(16, 0.0F, 1.0F);
  const auto d_pos = upload(positions);
  const auto d_freqs = upload(freqs);
  for (const auto style : {rope_style::half_split, rope_style::interleaved}) {
    for (const std::int64_t rotary : {std::int64_t{0}, std::int64_t{32}}) {
      for (const bool given : {false, true}) {
        if (given && rotary != 32)
          continue;
        SCOPED_TRACE("rotary " + std::to_string(rotary) + (given ? " given freqs" : ""));
        std::vector<float> ref = x;
        const view<const float, 1> fv = given ? vector(freqs.data(), 16) : view<const float, 1>{};
        ASSERT_TRUE(rope({contiguous(ref.data(), std::array{tokens, heads, head_dim}),
                          vector(positions.data(), tokens), fv, 5e5F, rotary, style}));
        auto d_x = upload(x);
        const view<const float, 1> dfv =
            given ? vector<const float>(d_freqs.data(), 16) : view<const float, 1>{};
        ASSERT_EQ(
            cuda::rope({contiguous(d_x.data(), std::array{tokens, heads, head_dim}),
                        vector<const std::int32_t>(d_pos.data(), tokens), dfv, 5e5F, rotary, style},
                       nullptr),
            cudaSuccess);
        EXPECT_TRUE(within(d_x.download(), ref, budget::f32_reduction));
      }
    }
  }
}

TEST(gpu_math, bf16_conversion_rounds_like_the_cpu_arena) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(207);
  auto x = rng.floats(4099, -1e4F, 1e4F);
  x[0] = 1.0F + 0x1.0p-8F;  // a tie: rounds to even
  x[1] = -0.0F;
  const std::vector<std::uint16_t> ref = bf16_of(x);
  const auto d_x = upload(x);
  auto d_h = poisoned<std::uint16_t>(x.size());
  auto d_back = poisoned<float>(x.size());
  const auto n = static_cast<std::int64_t>(x.size());
  ASSERT_EQ(cuda::to_bf16(d_x.data(), d_h.data(), n, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::from_bf16(d_h.data(), d_back.data(), n, nullptr), cudaSuccess);
  EXPECT_EQ(d_h.download(), ref);
  const auto back = d_back.download();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(ref[i]) << 16;
    float f = 0.0F;
    std::memcpy(&f, &bits, sizeof f);
    ASSERT_EQ(back[i], f) << "at " << i;
  }
}

}  // namespace
}  // namespace mstar::kernels
