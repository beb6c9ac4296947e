// The gated delta rule's decode launch shapes on the GPU
// (kernels/cuda/delta_rule.cu's decode table, each forced through
// `cuda::gated_delta_rule_decode_variant`) against the CPU reference: every
// shape, the default choice too, on K 128 (the shapes' own case), K 16 / 64
// / 256 (the dispatch's other lane counts) and K 96 with V 40 (the
// reduced-register shapes fall back to the default there), at 1, 16 and 64
// rows with carried, fresh and missing slots in a shuffled pool, and rows of
// 0-3 tokens under the decode hint: outputs and the whole state block.
#include <algorithm>
#include <gtest/gtest.h>

#include "kernels/delta_rule.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::normalised_error;
using test::gpu::poisoned;
using test::gpu::upload;
namespace budget = test::gpu::budget;

struct decode_shape_case {
  std::int32_t hk, hv, k, v;
  std::int64_t extra_columns;  // qkv_stride beyond the packed width
};

// A step's rows: their token counts; row r's slot is shuffled in a pool of
// rows + 3, skipped (-1) when (r + offset) % 9 == 4, fresh when
// (r + offset) % 5 == 2.
struct decode_rows_case {
  std::vector<std::int32_t> lengths;
  int offset;
  const char* what;
};

// One step through the CPU reference once, then through every decode shape
// from the same state: the largest normalised errors of outputs and state.
void expect_every_variant_matches(test::random_tensors& rng, const decode_shape_case& shape,
                                  const decode_rows_case& rows_case) {
  const auto& lengths = rows_case.lengths;
  const auto rows = static_cast<std::int32_t>(lengths.size());
  const std::int64_t stride =
      2 * std::int64_t{shape.hk} * shape.k + std::int64_t{shape.hv} * shape.v + shape.extra_columns;
  const std::int32_t max_slots = rows + 3;
  std::vector<std::int32_t> slots(lengths.size());
  std::vector<std::uint8_t> resume(lengths.size());
  std::vector<std::int32_t> cu{0};
  for (std::int32_t r = 0; r < rows; ++r) {
    const auto i = static_cast<std::size_t>(r);
    slots[i] = (r + rows_case.offset) % 9 == 4 ? -1 : (r * 7 + 3) % max_slots;
    resume[i] = (r + rows_case.offset) % 5 == 2 ? 0 : 1;
    cu.push_back(cu.back() + lengths[i]);
  }
  const auto T = static_cast<std::size_t>(cu.back());
  const auto a_log = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
  const auto dt_bias = rng.floats(static_cast<std::size_t>(shape.hv), -1.0F, 1.0F);
  const auto state =
      rng.floats(static_cast<std::size_t>(std::int64_t{max_slots} * shape.hv * shape.v * shape.k),
                 -0.5F, 0.5F);
  const auto qkv = rng.floats(T * static_cast<std::size_t>(stride), -1.0F, 1.0F);
  const auto ab = rng.floats(T * 2 * static_cast<std::size_t>(shape.hv), -3.0F, 3.0F);
  auto ref_state = state;
  std::vector<float> ref(T * static_cast<std::size_t>(shape.hv * shape.v));
  gated_delta_rule_varlen(
      {{a_log.data(), dt_bias.data(), shape.hk, shape.hv, shape.k, shape.v, 0.0F},
       {qkv.data(), stride, ab.data(), ab.data() + shape.hv, 2 * shape.hv},
       ref.data(),
       cu,
       ref_state.data(),
       slots,
       resume,
       true});
  const auto d_alog = upload(a_log);
  const auto d_dt = upload(dt_bias);
  const auto d_qkv = upload(qkv);
  const auto d_ab = upload(ab);
  const auto d_cu = upload(cu);
  const auto d_slots = upload(slots);
  const auto d_resume = upload(resume);
  double worst_out = 0.0;
  double worst_state = 0.0;
  for (int variant = -1; variant < cuda::gated_delta_decode_variants; ++variant) {
    SCOPED_TRACE("decode variant " + std::to_string(variant));
    auto d_state = upload(state);
    auto d_out = poisoned<float>(ref.size());
    ASSERT_EQ(cuda::gated_delta_rule_decode_variant(
                  {{d_alog.data(), d_dt.data(), shape.hk, shape.hv, shape.k, shape.v, 0.0F},
                   {d_qkv.data(), stride, d_ab.data(), d_ab.data() + shape.hv, 2 * shape.hv},
                   d_out.data(),
                   d_cu.span(),
                   d_state.data(),
                   d_slots.span(),
                   d_resume.span(),
                   true},
                  variant, nullptr),
              cudaSuccess);
    const double out_err = normalised_error(d_out.download(), ref);
    const double state_err = normalised_error(d_state.download(), ref_state);
    EXPECT_LE(out_err, budget::recurrent) << "output";
    EXPECT_LE(state_err, budget::recurrent) << "state";
    worst_out = std::max(worst_out, out_err);
    worst_state = std::max(worst_state, state_err);
  }
  std::cout << "[ error    ] K " << shape.k << " V " << shape.v << ", " << rows_case.what
            << ": worst output " << worst_out << ", state " << worst_state << " over "
            << cuda::gated_delta_decode_variants + 1 << " shapes (budget " << budget::recurrent
            << ")\n";
}

TEST(gpu_delta_rule, every_decode_variant_matches_outputs_and_state) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(1611);
  const std::vector<decode_rows_case> cases{
      {{1}, 0, "1 row carried"},
      {{1}, 2, "1 row fresh"},
      {{1}, 4, "1 row without a slot"},
      {std::vector<std::int32_t>(16, 1), 0, "16 rows"},
      {std::vector<std::int32_t>(64, 1), 1, "64 rows"},
      {{2, 1, 0, 3, 1, 2}, 0, "rows of 0-3 tokens"},
  };
  for (const auto shape :
       {decode_shape_case{2, 4, 128, 128, 4}, decode_shape_case{1, 2, 16, 128, 0},
        decode_shape_case{1, 2, 64, 64, 0}, decode_shape_case{2, 2, 256, 64, 8},
        decode_shape_case{1, 2, 96, 40, 4}}) {
    SCOPED_TRACE("HK " + std::to_string(shape.hk) + " HV " + std::to_string(shape.hv) + " K " +
                 std::to_string(shape.k) + " V " + std::to_string(shape.v));
    for (const auto& c : cases) {
      SCOPED_TRACE(c.what);
      expect_every_variant_matches(rng, shape, c);
    }
  }
}

TEST(gpu_delta_rule, refuses_decode_variants_outside_the_table) {
  MSTAR_REQUIRE_GPU();
  gated_delta_rule_params p;
  p.w = {nullptr, nullptr, 1, 1, 128, 128, 0.0F};
  EXPECT_EQ(cuda::gated_delta_rule_decode_variant(p, -2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::gated_delta_rule_decode_variant(p, cuda::gated_delta_decode_variants, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace mstar::kernels
