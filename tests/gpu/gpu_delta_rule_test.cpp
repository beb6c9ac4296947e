// Qwen3.5's kernels on the GPU (kernels/cuda/delta_rule.hpp) against the CPU
// reference (kernels/delta_rule.hpp, kernels::mrope): the gated delta rule's
// outputs and whole state block after a prefill step and a decode step, the
// chunked prefill path (the workspace overload) on rows around and past the
// 64-token chunk, the head-gated norm and the output gate in f32 and bf16,
// and M-RoPE.
#include <algorithm>
#include <gtest/gtest.h>

#include "core/dtype.hpp"
#include "kernels/delta_rule.hpp"
#include "kernels/math.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

std::vector<std::int32_t> rule_cumulative(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> cu{0};
  for (const auto n : lens)
    cu.push_back(cu.back() + n);
  return cu;
}

std::vector<float> rule_floats_of(const std::vector<std::uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i)
    out[i] = bf16_bits_to_float(bits[i]);
  return out;
}

struct rule_shape {
  std::int32_t hk, hv, k, v;
  std::int64_t extra_columns;  // qkv_stride beyond the packed width
};

TEST(gpu_delta_rule, prefill_then_decode_match_outputs_and_state) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1601);
  // Rows: empty, shorter than a chunk, longer than one, a skipped row (-1),
  // fresh and resumed slots, each on its own slot.
  const std::vector<std::int32_t> lengths{5, 0, 1, 2, 17, 130, 3};
  const std::vector<std::int32_t> slots{4, 1, 6, -1, 0, 2, 5};
  const std::vector<std::uint8_t> resume{1, 1, 0, 1, 1, 0, 1};
  constexpr std::int64_t max_slots = 8;
  for (const auto shape :
       {rule_shape{2, 4, 128, 128, 4}, rule_shape{1, 2, 64, 40, 0}, rule_shape{2, 2, 256, 64, 8}}) {
    SCOPED_TRACE("HK " + std::to_string(shape.hk) + " HV " + std::to_string(shape.hv) + " K " +
                 std::to_string(shape.k) + " V " + std::to_string(shape.v));
    const std::int64_t packed =
        2 * std::int64_t{shape.hk} * shape.k + std::int64_t{shape.hv} * shape.v;
    const std::int64_t stride = packed + shape.extra_columns;
    const auto a_log = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
    const auto dt_bias = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
    const auto d_alog = upload(a_log);
    const auto d_dt = upload(dt_bias);
    const gated_delta_weights w{a_log.data(), dt_bias.data(), shape.hk, shape.hv,
                                shape.k,      shape.v,        0.0F};
    const gated_delta_weights dw{d_alog.data(), d_dt.data(), shape.hk, shape.hv,
                                 shape.k,       shape.v,     0.0F};
    const std::size_t state_elems =
        static_cast<std::size_t>(max_slots * shape.hv * shape.v * shape.k);
    auto state = rng.floats(state_elems, -0.5F, 0.5F);
    auto d_state = upload(state);
    const auto d_slots = upload(slots);
    const auto d_resume = upload(resume);
    // `decode` is the kernel's hint (no prefetch, two value rows a thread);
    // either path gives any row lengths.
    const auto run = [&](const std::vector<std::int32_t>& cu, const char* what, bool decode) {
      SCOPED_TRACE(std::string{what} + (decode ? ", decode kernel" : ", prefill kernel"));
      const auto T = static_cast<std::size_t>(cu.back());
      const auto qkv = rng.floats(T * static_cast<std::size_t>(stride), -1.0F, 1.0F);
      // a and b side by side in one buffer, as the model's projection has them.
      const auto ab = rng.floats(T * 2 * static_cast<std::size_t>(shape.hv), -3.0F, 3.0F);
      const auto d_qkv = upload(qkv);
      const auto d_ab = upload(ab);
      const auto d_cu = upload(cu);
      std::vector<float> ref(T * static_cast<std::size_t>(shape.hv * shape.v));
      gated_delta_rule_varlen({w,
                               {qkv.data(), stride, ab.data(), ab.data() + shape.hv, 2 * shape.hv},
                               ref.data(),
                               cu,
                               state.data(),
                               slots,
                               resume,
                               decode});
      auto d_out = poisoned<float>(ref.size());
      ASSERT_EQ(cuda::gated_delta_rule_varlen(
                    {dw,
                     {d_qkv.data(), stride, d_ab.data(), d_ab.data() + shape.hv, 2 * shape.hv},
                     d_out.data(),
                     d_cu.span(),
                     d_state.data(),
                     d_slots.span(),
                     d_resume.span(),
                     decode},
                    nullptr),
                cudaSuccess);
      EXPECT_TRUE(within(d_out.download(), ref, budget::recurrent)) << "output";
      EXPECT_TRUE(within(d_state.download(), state, budget::recurrent)) << "state";
    };
    const auto ones = rule_cumulative(std::vector<std::int32_t>(lengths.size(), 1));
    for (const bool decode : {false, true}) {
      run(rule_cumulative(lengths), "prefill", decode);
      run(ones, "decode", decode);
    }
  }
}

// A decode step of many rows (the kernel's launch shape changes with the row
// count: streaming state loads from 32 rows), slots shuffled, some skipped,
// some fresh: outputs and the whole state block.
TEST(gpu_delta_rule, wide_decode_steps_match_outputs_and_state) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1607);
  for (const int rows : {31, 40, 72}) {
    for (const auto shape : {rule_shape{2, 4, 128, 128, 0}, rule_shape{1, 2, 64, 64, 4}}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " K " + std::to_string(shape.k));
      const std::int64_t stride = 2 * std::int64_t{shape.hk} * shape.k +
                                  std::int64_t{shape.hv} * shape.v + shape.extra_columns;
      const std::int64_t max_slots = rows + 3;
      std::vector<std::int32_t> slots(static_cast<std::size_t>(rows));
      std::vector<std::uint8_t> resume(slots.size());
      for (int r = 0; r < rows; ++r) {
        slots[static_cast<std::size_t>(r)] =
            r % 9 == 4 ? -1 : static_cast<std::int32_t>((r * 7 + 3) % max_slots);
        resume[static_cast<std::size_t>(r)] = r % 5 == 2 ? 0 : 1;
      }
      const auto a_log = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
      const auto dt_bias = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
      const auto d_alog = upload(a_log);
      const auto d_dt = upload(dt_bias);
      auto state = rng.floats(static_cast<std::size_t>(max_slots * shape.hv * shape.v * shape.k),
                              -0.5F, 0.5F);
      auto d_state = upload(state);
      const auto cu = rule_cumulative(std::vector<std::int32_t>(slots.size(), 1));
      const auto qkv = rng.floats(static_cast<std::size_t>(rows * stride), -1.0F, 1.0F);
      const auto ab = rng.floats(static_cast<std::size_t>(rows * 2 * shape.hv), -3.0F, 3.0F);
      const auto d_qkv = upload(qkv);
      const auto d_ab = upload(ab);
      const auto d_cu = upload(cu);
      const auto d_slots = upload(slots);
      const auto d_resume = upload(resume);
      std::vector<float> ref(static_cast<std::size_t>(rows * shape.hv * shape.v));
      gated_delta_rule_varlen(
          {{a_log.data(), dt_bias.data(), shape.hk, shape.hv, shape.k, shape.v, 0.0F},
           {qkv.data(), stride, ab.data(), ab.data() + shape.hv, 2 * shape.hv},
           ref.data(),
           cu,
           state.data(),
           slots,
           resume,
           true});
      auto d_out = poisoned<float>(ref.size());
      ASSERT_EQ(cuda::gated_delta_rule_varlen(
                    {{d_alog.data(), d_dt.data(), shape.hk, shape.hv, shape.k, shape.v, 0.0F},
                     {d_qkv.data(), stride, d_ab.data(), d_ab.data() + shape.hv, 2 * shape.hv},
                     d_out.data(),
                     d_cu.span(),
                     d_state.data(),
                     d_slots.span(),
                     d_resume.span(),
                     true},
                    nullptr),
                cudaSuccess);
      EXPECT_TRUE(within(d_out.download(), ref, budget::recurrent)) << "output";
      EXPECT_TRUE(within(d_state.download(), state, budget::recurrent)) << "state";
    }
  }
}

// TF32 products in the chunked path: about 1e-3 of the largest value,
// whatever the row length (the decay bounds what earlier chunks leave).
constexpr double chunked_budget = 3e-3;

// One packed batch through the workspace overload against the CPU
// reference: every output and the whole state block.
void expect_chunked_batch_matches(test::random_tensors& rng, const rule_shape& shape,
                                  const std::vector<std::int32_t>& lengths,
                                  const std::vector<std::int32_t>& slots,
                                  const std::vector<std::uint8_t>& resume,
                                  std::int32_t chunked_from, double budget) {
  const std::int64_t stride =
      2 * std::int64_t{shape.hk} * shape.k + std::int64_t{shape.hv} * shape.v + shape.extra_columns;
  const std::int64_t max_slots = *std::max_element(slots.begin(), slots.end()) + 1;
  const auto a_log = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
  const auto dt_bias = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
  const auto d_alog = upload(a_log);
  const auto d_dt = upload(dt_bias);
  const gated_delta_weights w{a_log.data(), dt_bias.data(), shape.hk, shape.hv,
                              shape.k,      shape.v,        0.0F};
  const gated_delta_weights dw{d_alog.data(), d_dt.data(), shape.hk, shape.hv,
                               shape.k,       shape.v,     0.0F};
  auto state =
      rng.floats(static_cast<std::size_t>(max_slots * shape.hv * shape.v * shape.k), -0.5F, 0.5F);
  auto d_state = upload(state);
  const auto cu = rule_cumulative(lengths);
  const auto T = static_cast<std::size_t>(cu.back());
  const auto qkv = rng.floats(T * static_cast<std::size_t>(stride), -1.0F, 1.0F);
  const auto ab = rng.floats(T * 2 * static_cast<std::size_t>(shape.hv), -3.0F, 3.0F);
  const auto d_qkv = upload(qkv);
  const auto d_ab = upload(ab);
  const auto d_cu = upload(cu);
  const auto d_slots = upload(slots);
  const auto d_resume = upload(resume);
  std::vector<float> ref(T * static_cast<std::size_t>(shape.hv * shape.v));
  gated_delta_rule_varlen({w,
                           {qkv.data(), stride, ab.data(), ab.data() + shape.hv, 2 * shape.hv},
                           ref.data(),
                           cu,
                           state.data(),
                           slots,
                           resume});
  const std::size_t bytes = cuda::gated_delta_rule_workspace_bytes(
      dw, static_cast<std::int64_t>(T), static_cast<std::int64_t>(lengths.size()), chunked_from);
  auto workspace = poisoned<float>(bytes / sizeof(float) + 1);
  auto d_out = poisoned<float>(ref.size());
  ASSERT_EQ(cuda::gated_delta_rule_varlen(
                {dw,
                 {d_qkv.data(), stride, d_ab.data(), d_ab.data() + shape.hv, 2 * shape.hv},
                 d_out.data(),
                 d_cu.span(),
                 d_state.data(),
                 d_slots.span(),
                 d_resume.span()},
                {workspace.data(), bytes, static_cast<std::int64_t>(T), chunked_from}, nullptr),
            cudaSuccess);
  EXPECT_TRUE(within(d_out.download(), ref, budget)) << "output";
  EXPECT_TRUE(within(d_state.download(), state, budget)) << "state";
}

TEST(gpu_delta_rule, chunked_prefill_matches_alone_and_in_mixed_batches) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1604);
  // K 128 with two value heads per key head and padded qkv rows, K 64 with
  // V 64; K 64 with V 40 has no chunked path, so the overload scans.
  for (const auto shape :
       {rule_shape{2, 4, 128, 128, 4}, rule_shape{2, 2, 64, 64, 0}, rule_shape{1, 2, 64, 40, 0}}) {
    const bool chunked =
        cuda::gated_delta_rule_workspace_bytes(
            {nullptr, nullptr, shape.hk, shape.hv, shape.k, shape.v, 0.0F}, 1000, 1) != 0;
    const double budget = chunked ? chunked_budget : budget::recurrent;
    SCOPED_TRACE("HK " + std::to_string(shape.hk) + " HV " + std::to_string(shape.hv) + " K " +
                 std::to_string(shape.k) + " V " + std::to_string(shape.v));
    // Each length alone, resumed from a random state, every row chunked.
    for (const std::int32_t len : {1, 63, 64, 65, 200, 1000}) {
      SCOPED_TRACE("one row of " + std::to_string(len));
      expect_chunked_batch_matches(rng, shape, {len}, {1}, {1}, 1, budget);
    }
    // Mixed: fresh and resumed slots, an empty row, a skipped row (-1);
    // every row chunked, then the default threshold (short rows scanned).
    const std::vector<std::int32_t> lengths{1, 63, 64, 0, 65, 200, 130, 1000, 7};
    const std::vector<std::int32_t> slots{4, 1, 6, 3, 7, 0, -1, 2, 5};
    const std::vector<std::uint8_t> resume{1, 0, 1, 1, 1, 0, 1, 1, 0};
    for (const std::int32_t from : {1, 0}) {
      SCOPED_TRACE("mixed batch, chunked from " + std::to_string(from));
      expect_chunked_batch_matches(rng, shape, lengths, slots, resume, from, budget);
    }
  }
}

// The walk stages each chunk's operands two chunks ahead when its blocks
// (V / 32 per value head and chunked row) fit one an SM, else one chunk
// ahead. With 32 value heads: one row of V 128 is 128 blocks (two stages on
// the H200's 132 SMs), three rows 384 (one stage); at V 64, 64 and 192.
TEST(gpu_delta_rule, chunked_prefill_matches_staged_one_and_two_chunks_ahead) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1605);
  for (const auto shape : {rule_shape{4, 32, 128, 128, 0}, rule_shape{8, 32, 64, 64, 0}}) {
    SCOPED_TRACE("HK " + std::to_string(shape.hk) + " HV " + std::to_string(shape.hv) + " K " +
                 std::to_string(shape.k) + " V " + std::to_string(shape.v));
    for (const std::int32_t len : {1, 65, 200}) {
      SCOPED_TRACE("one row of " + std::to_string(len));
      expect_chunked_batch_matches(rng, shape, {len}, {1}, {1}, 1, chunked_budget);
    }
    SCOPED_TRACE("three rows");
    expect_chunked_batch_matches(rng, shape, {200, 1, 130}, {2, 0, 1}, {1, 0, 1}, 1,
                                 chunked_budget);
  }
}

TEST(gpu_delta_rule, refuses_shapes_it_does_not_take) {
  MSTAR_REQUIRE_GPU();
  const std::vector<std::int32_t> cu{0, 1};
  const std::vector<std::int32_t> slot{0};
  const std::vector<std::uint8_t> has{0};
  const auto d_cu = upload(cu);
  const auto d_slot = upload(slot);
  const auto d_has = upload(has);
  auto d_state = poisoned<float>(4 * 512 * 512);
  auto d_x = poisoned<float>(4096);
  for (const auto& w : {gated_delta_weights{nullptr, nullptr, 2, 3, 64, 64, 0.0F},
                        gated_delta_weights{nullptr, nullptr, 1, 1, 512, 64, 0.0F},
                        gated_delta_weights{nullptr, nullptr, 1, 1, 66, 64, 0.0F}}) {
    EXPECT_EQ(cuda::gated_delta_rule_varlen({w,
                                             {d_x.data(), 0, d_x.data(), d_x.data(), 0},
                                             d_x.data(),
                                             d_cu.span(),
                                             d_state.data(),
                                             d_slot.span(),
                                             d_has.span()},
                                            nullptr),
              cudaErrorInvalidValue);
  }
}

TEST(gpu_delta_rule, head_gated_norm_and_output_gate_match_in_f32_and_bf16) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1602);
  const std::int64_t T = 37;
  const std::int32_t H = 6, D = 128;
  const std::int64_t n = T * H * D;
  const std::int64_t gate_stride = H * D + 12;
  const auto x = rng.floats(static_cast<std::size_t>(n), -2.0F, 2.0F);
  const auto z = rng.floats(static_cast<std::size_t>(T * gate_stride), -4.0F, 4.0F);
  const auto weight = rng.floats(static_cast<std::size_t>(D), 0.5F, 1.5F);
  const auto d_z = upload(z);
  const auto d_w = upload(weight);
  {
    std::vector<float> ref(x.size());
    std::vector<std::uint16_t> ref16(x.size());
    head_gated_rms_norm(
        {x.data(), z.data(), gate_stride, weight.data(), ref.data(), ref16.data(), T, H, D, 1e-6F});
    auto d_x = upload(x);  // in place, as the model runs it
    auto d16 = test::gpu::poisoned<std::uint16_t>(x.size());
    ASSERT_EQ(cuda::head_gated_rms_norm({d_x.data(), d_z.data(), gate_stride, d_w.data(),
                                         d_x.data(), d16.data(), T, H, D, 1e-6F},
                                        nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(d_x.download(), ref, budget::f32_reduction)) << "norm f32";
    EXPECT_TRUE(within(rule_floats_of(d16.download()), rule_floats_of(ref16), budget::bf16_out))
        << "norm bf16";
  }
  {
    // The gate as gated attention's q projection holds it: per head D query
    // then D gate columns.
    const auto g = rng.floats(static_cast<std::size_t>(T * H * 2 * D), -4.0F, 4.0F);
    const auto d_g = upload(g);
    std::vector<float> ref(x.size());
    std::vector<std::uint16_t> ref16(x.size());
    output_gate({x.data(), g.data() + D, H * 2 * D, 2 * D, ref.data(), ref16.data(), T, H, D});
    const auto d_x = upload(x);
    auto d_out = poisoned<float>(x.size());
    auto d16 = test::gpu::poisoned<std::uint16_t>(x.size());
    ASSERT_EQ(cuda::output_gate(
                  {d_x.data(), d_g.data() + D, H * 2 * D, 2 * D, d_out.data(), d16.data(), T, H, D},
                  nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(d_out.download(), ref, budget::f32_elementwise)) << "gate f32";
    EXPECT_TRUE(within(rule_floats_of(d16.download()), rule_floats_of(ref16), budget::bf16_out))
        << "gate bf16";
  }
}

TEST(gpu_delta_rule, mrope_matches_on_partial_interleaved_sections) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1603);
  const std::int64_t T = 29, H = 3, D = 256, half = 32;  // rotary 64 of 256, as Qwen3.5
  const auto x = rng.floats(static_cast<std::size_t>(T * H * D), -2.0F, 2.0F);
  const auto pos = rng.ints(static_cast<std::size_t>(3 * T), 0, 40000);
  std::vector<float> freq(half);
  for (std::int64_t i = 0; i < half; ++i)
    freq[static_cast<std::size_t>(i)] = 1.0F / std::pow(1e7F, static_cast<float>(2 * i) / 64.0F);
  auto ref = x;
  mrope_params rp{{ref.data(), {T, H, D}, {H * D, D, 1}},
                  {pos.data(), {3, T}, {T, 1}},
                  {freq.data(), {half}, {1}},
                  {11, 11, 10}};
  ASSERT_TRUE(mrope(rp));
  auto d_x = upload(x);
  const auto d_pos = upload(pos);
  const auto d_freq = upload(freq);
  mrope_params dp{{d_x.data(), {T, H, D}, {H * D, D, 1}},
                  {d_pos.data(), {3, T}, {T, 1}},
                  {d_freq.data(), {half}, {1}},
                  {11, 11, 10}};
  ASSERT_EQ(cuda::mrope(dp, nullptr), cudaSuccess);
  EXPECT_TRUE(within(d_x.download(), ref, budget::f32_reduction));
}

}  // namespace
}  // namespace mstar::kernels
