// The SSD scan on the GPU (kernels/cuda/recurrent.hpp) against the CPU
// reference (kernels/ssd.hpp): outputs and the whole state block after the
// step, by normalised error. Rows cover empty rows, short rows, fresh and
// resumed slots, and a skipped row (slot -1), each on its own slot. Every
// launch shape of the decode step (kernels/cuda/ssd_update.cu's table) is
// checked the same way. The causal conv's tests are in gpu_conv_test.cpp.
#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/math.hpp"
#include "kernels/cuda/recurrent.hpp"
#include "kernels/math.hpp"
#include "kernels/ssd.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::normalised_error;
using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

// Row lengths, slots (distinct, -1 skips) and resume flags of one batch.
const std::vector<std::int32_t> lengths{5, 0, 1, 2, 17, 64, 3};
const std::vector<std::int32_t> slots{4, 1, 6, -1, 0, 2, 5};
const std::vector<std::uint8_t> resume{1, 1, 0, 1, 1, 0, 1};
constexpr std::int32_t max_slots = 8;

std::vector<std::int32_t> cumulative(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> cu{0};
  for (const auto n : lens)
    cu.push_back(cu.back() + n);
  return cu;
}

struct ssd_geometry {
  std::int32_t heads, head_dim, state_size, groups;
};

// Nemotron-H-like (P 64, N 128), a small one, and one whose block is padded
// to whole warps with an N that is not a power of two.
constexpr ssd_geometry ssd_geometries[] = {{8, 64, 128, 2}, {4, 8, 16, 2}, {3, 5, 24, 1}};

TEST(gpu_recurrent, ssd_scan_and_update_match_outputs_and_state) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(502);
  for (const auto& g : ssd_geometries) {
    SCOPED_TRACE("H " + std::to_string(g.heads) + " P " + std::to_string(g.head_dim) + " N " +
                 std::to_string(g.state_size));
    const auto h = static_cast<std::size_t>(g.heads);
    const auto dt_bias = rng.floats(h, -1.0F, 1.0F);
    const auto a_log = rng.floats(h, -1.0F, 1.5F);
    const auto skip = rng.floats(h);
    const auto d_dt_bias = upload(dt_bias);
    const auto d_a_log = upload(a_log);
    const auto d_skip = upload(skip);
    const ssd_weights w{dt_bias.data(), a_log.data(), skip.data(), g.heads, g.head_dim,
                        g.state_size,   g.groups,     1e-3F,       10.0F};
    ssd_weights dw = w;
    dw.dt_bias = d_dt_bias.data();
    dw.A_log = d_a_log.data();
    dw.D = d_skip.data();

    // Token-major [x | B | C | dt] rows, read through strides as the model does.
    const std::int64_t xw = std::int64_t{g.heads} * g.head_dim;
    const std::int64_t bcw = std::int64_t{g.groups} * g.state_size;
    const std::int64_t row = xw + 2 * bcw + g.heads + 3;
    const auto cu = cumulative(lengths);
    const auto packed = rng.floats(static_cast<std::size_t>(cu.back() * row), -2.0F, 2.0F);
    const auto d_packed = upload(packed);
    auto inputs = [&](const float* base) {
      return ssd_inputs{base, base + xw + 2 * bcw, base + xw, base + xw + bcw, row, row, row};
    };
    const std::size_t state_elems = static_cast<std::size_t>(max_slots) * h *
                                    static_cast<std::size_t>(g.head_dim * g.state_size);
    auto state = rng.floats(state_elems);
    auto d_state = upload(state);
    const auto d_cu = upload(cu);
    const auto d_slots = upload(slots);
    const auto d_resume = upload(resume);
    const std::size_t y_elems = static_cast<std::size_t>(cu.back() * xw);

    std::vector<float> ref(y_elems);
    ssd_scan_varlen({w, inputs(packed.data()), ref.data(), cu, state.data(), slots, resume});
    auto d_y = poisoned<float>(y_elems);
    ASSERT_EQ(cuda::ssd_scan_varlen({dw, inputs(d_packed.data()), d_y.data(), d_cu.span(),
                                     d_state.data(), d_slots.span(), d_resume.span()},
                                    nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(d_y.download(), ref, budget::recurrent)) << "scan output";
    EXPECT_TRUE(within(d_state.download(), state, budget::recurrent)) << "scan state";

    // Decode: one token per row, trusting the slots, then with flags.
    const auto batch = static_cast<std::int32_t>(slots.size());
    for (const bool flags : {false, true}) {
      const auto step_in = rng.floats(static_cast<std::size_t>(batch * row), -2.0F, 2.0F);
      const auto d_step_in = upload(step_in);
      std::vector<float> ref1(static_cast<std::size_t>(batch * xw));
      const std::span<const std::uint8_t> has =
          flags ? std::span{resume} : std::span<const std::uint8_t>{};
      ssd_update({w, inputs(step_in.data()), ref1.data(), batch, state.data(), slots, has});
      auto d_y1 = poisoned<float>(ref1.size());
      ASSERT_EQ(cuda::ssd_update(
                    {dw, inputs(d_step_in.data()), d_y1.data(), batch, d_state.data(),
                     d_slots.span(), flags ? d_resume.span() : std::span<const std::uint8_t>{}},
                    nullptr),
                cudaSuccess);
      EXPECT_TRUE(within(d_y1.download(), ref1, budget::recurrent)) << "update output";
      EXPECT_TRUE(within(d_state.download(), state, budget::recurrent)) << "update state";
    }
  }
}

// A decode step's rows over a pool of `pool` slots: row r on slot (5 r + 4)
// mod pool, skipped (-1) where (r + offset) mod 5 is 1, starting fresh
// where (r + offset) mod 4 is 2.
struct decode_row_plan {
  std::vector<std::int32_t> slots;
  std::vector<std::uint8_t> resume;
};
decode_row_plan decode_rows(std::int32_t batch, int offset, std::int32_t pool) {
  decode_row_plan plan{std::vector<std::int32_t>(static_cast<std::size_t>(batch)),
                       std::vector<std::uint8_t>(static_cast<std::size_t>(batch))};
  for (std::int32_t r = 0; r < batch; ++r) {
    const auto i = static_cast<std::size_t>(r);
    plan.slots[i] = (r + offset) % 5 == 1 ? -1 : (5 * r + 4) % pool;
    plan.resume[i] = (r + offset) % 4 == 2 ? 0 : 1;
  }
  return plan;
}

// One decode step of `batch` rows through the CPU reference once, then
// through every launch shape of `cuda::ssd_update_variant` (the default,
// -1, too) from the same state: outputs and the whole state block. Row r's
// slot is (5 r + 4) mod (batch + 3) (distinct, out of order, spare slots
// left alone); it is skipped (-1) when (r + offset) % 5 == 1 and starts from
// zeros when (r + offset) % 4 == 2 (with `flags`; without them every slot is
// trusted). `aligned`: [x | B | C | dt] rows padded to a multiple of 4
// floats, so B and C load 16 bytes at a time, with D; else 3 spare floats
// (4-byte loads) and no D.
void expect_every_update_variant_matches(test::random_tensors& rng, const ssd_geometry& g,
                                         std::int32_t batch, int offset, bool flags, bool aligned) {
  const auto h = static_cast<std::size_t>(g.heads);
  const auto dt_bias = rng.floats(h, -1.0F, 1.0F);
  const auto a_log = rng.floats(h, -1.0F, 1.5F);
  const auto skip = rng.floats(h);
  const auto d_dt_bias = upload(dt_bias);
  const auto d_a_log = upload(a_log);
  const auto d_skip = upload(skip);
  const ssd_weights w{dt_bias.data(), a_log.data(), aligned ? skip.data() : nullptr,
                      g.heads,        g.head_dim,   g.state_size,
                      g.groups,       1e-3F,        10.0F};
  ssd_weights dw = w;
  dw.dt_bias = d_dt_bias.data();
  dw.A_log = d_a_log.data();
  dw.D = aligned ? d_skip.data() : nullptr;
  const std::int64_t xw = std::int64_t{g.heads} * g.head_dim;
  const std::int64_t bcw = std::int64_t{g.groups} * g.state_size;
  const std::int64_t spare = xw + 2 * bcw + g.heads + 3;
  const std::int64_t row = aligned ? (spare + 3) / 4 * 4 : spare;
  const auto packed = rng.floats(static_cast<std::size_t>(batch * row), -2.0F, 2.0F);
  const auto d_packed = upload(packed);
  auto inputs = [&](const float* base) {
    return ssd_inputs{base, base + xw + 2 * bcw, base + xw, base + xw + bcw, row, row, row};
  };
  const std::int32_t pool = batch + 3;
  const auto [row_slots, row_resume] = decode_rows(batch, offset, pool);
  const std::span<const std::uint8_t> has =
      flags ? std::span<const std::uint8_t>{row_resume} : std::span<const std::uint8_t>{};
  const auto state = rng.floats(
      static_cast<std::size_t>(pool) * h * static_cast<std::size_t>(g.head_dim * g.state_size),
      -0.5F, 0.5F);
  auto ref_state = state;
  std::vector<float> ref(static_cast<std::size_t>(batch * xw));
  ssd_update({w, inputs(packed.data()), ref.data(), batch, ref_state.data(), row_slots, has});
  const auto d_slots = upload(row_slots);
  const auto d_resume = upload(row_resume);
  double worst_out = 0.0;
  double worst_state = 0.0;
  for (int variant = -1; variant < cuda::ssd_update_variants; ++variant) {
    SCOPED_TRACE("update variant " + std::to_string(variant));
    auto d_state = upload(state);
    auto d_y = poisoned<float>(ref.size());
    ASSERT_EQ(cuda::ssd_update_variant(
                  {dw, inputs(d_packed.data()), d_y.data(), batch, d_state.data(), d_slots.span(),
                   flags ? d_resume.span() : std::span<const std::uint8_t>{}},
                  variant, nullptr),
              cudaSuccess);
    const auto y_got = d_y.download();
    const auto state_got = d_state.download();
    const double out_err = normalised_error(y_got, ref);
    const double state_err = normalised_error(state_got, ref_state);
    // Slots and states read before the chained wait (state_settled): the
    // same bits.
    auto d_state_early = upload(state);
    auto d_y_early = poisoned<float>(ref.size());
    ssd_update_params early{dw,
                            inputs(d_packed.data()),
                            d_y_early.data(),
                            batch,
                            d_state_early.data(),
                            d_slots.span(),
                            flags ? d_resume.span() : std::span<const std::uint8_t>{}};
    early.state_settled = true;
    ASSERT_EQ(cuda::ssd_update_variant(early, variant, nullptr), cudaSuccess);
    const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    EXPECT_TRUE(same_bits(d_y_early.download(), y_got)) << "settled: output";
    EXPECT_TRUE(same_bits(d_state_early.download(), state_got)) << "settled: state";
    EXPECT_LE(out_err, budget::recurrent) << "output";
    EXPECT_LE(state_err, budget::recurrent) << "state";
    worst_out = std::max(worst_out, out_err);
    worst_state = std::max(worst_state, state_err);
  }
  std::cout << "[ error    ] H " << g.heads << " P " << g.head_dim << " N " << g.state_size << " G "
            << g.groups << ", " << batch << " rows (offset " << offset << ")"
            << (flags ? ", flags" : "") << (aligned ? ", 16-byte rows" : ", 4-byte rows")
            << ": worst output " << worst_out << ", state " << worst_state << " over "
            << cuda::ssd_update_variants + 1 << " shapes\n";
}

TEST(gpu_recurrent, every_ssd_update_variant_matches_outputs_and_state) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(504);
  // The table's own shapes (P 64 / 128 with N 128, the 0.6B layer's 64
  // heads in 8 groups, N 64, P 16: a multiple of some shapes' rows a block
  // only) and shapes no entry but 0 takes (N 16, 24, 256; P 5, 8).
  constexpr ssd_geometry shapes[] = {{8, 64, 128, 2}, {4, 128, 128, 2}, {64, 64, 128, 8},
                                     {4, 32, 64, 2},  {2, 16, 64, 1},   {4, 8, 16, 2},
                                     {3, 5, 24, 1},   {2, 64, 256, 1}};
  // (rows, offset): one row carried, fresh and skipped; 3 rows with one
  // skipped and one fresh; 64 rows.
  constexpr std::pair<std::int32_t, int> batches[] = {{1, 0}, {1, 2}, {1, 1}, {3, 0}, {64, 0}};
  for (const auto& g : shapes) {
    for (const auto& [batch, offset] : batches) {
      for (const bool flags : {true, false}) {
        for (const bool aligned : {true, false}) {
          SCOPED_TRACE("H " + std::to_string(g.heads) + " P " + std::to_string(g.head_dim) + " N " +
                       std::to_string(g.state_size) + ", " + std::to_string(batch) +
                       " rows, offset " + std::to_string(offset) + (flags ? ", flags" : "") +
                       (aligned ? ", 16-byte rows" : ", 4-byte rows"));
          expect_every_update_variant_matches(rng, g, batch, offset, flags, aligned);
        }
      }
    }
  }
}

// The decode step's own shape alone (the 0.56B's 64 heads in 8 groups):
// every launch shape with the slots and states read before the chained
// wait (state_settled) and after it, the same bits (the helper's check),
// rows carried, fresh and skipped. A quick run of what the test above
// covers at every shape.
TEST(gpu_recurrent, ssd_update_reading_settled_states_early_gives_the_same_bits) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(505);
  for (const auto& [batch, offset] : {std::pair{1, 0}, std::pair{1, 2}, std::pair{3, 0}}) {
    SCOPED_TRACE(std::to_string(batch) + " rows, offset " + std::to_string(offset));
    expect_every_update_variant_matches(rng, {64, 64, 128, 8}, batch, offset, true, true);
  }
}

// The gated-norm fold (cuda::ssd_update_gated_norm): one launch gives the
// update's output and state and gated_rms_norm's bf16 row of that output
// bit for bit, as ssd_update then gated_rms_norm give them, twice over;
// rows carried, fresh and skipped (slot -1: zeros normed); N 128 and 64,
// one to eight heads a norm group (a cluster); and what it refuses.
void expect_gated_norm_fold_matches(test::random_tensors& rng, const ssd_geometry& g,
                                    std::int64_t group, std::int32_t batch, int offset) {
  const auto h = static_cast<std::size_t>(g.heads);
  const auto dt_bias = upload(rng.floats(h, -1.0F, 1.0F));
  const auto a_log = upload(rng.floats(h, -1.0F, 1.5F));
  const auto skip = upload(rng.floats(h));
  const ssd_weights dw{dt_bias.data(), a_log.data(), skip.data(), g.heads, g.head_dim,
                       g.state_size,   g.groups,     1e-3F,       10.0F};
  const std::int64_t xw = std::int64_t{g.heads} * g.head_dim;
  const std::int64_t bcw = std::int64_t{g.groups} * g.state_size;
  // [z | x | B | C | dt] rows padded to 4 floats, as the model's in_proj output.
  const std::int64_t row = (2 * xw + 2 * bcw + g.heads + 3) / 4 * 4;
  const auto packed = upload(rng.floats(static_cast<std::size_t>(batch * row), -2.0F, 2.0F));
  const float* z = packed.data();
  const float* xbc = packed.data() + xw;
  const ssd_inputs in{xbc, xbc + xw + 2 * bcw, xbc + xw, xbc + xw + bcw, row, row, row};
  const std::int32_t pool = batch + 3;
  const auto [row_slots, row_resume] = decode_rows(batch, offset, pool);
  const auto d_slots = upload(row_slots);
  const auto d_resume = upload(row_resume);
  const auto state = rng.floats(
      static_cast<std::size_t>(pool) * h * static_cast<std::size_t>(g.head_dim * g.state_size),
      -0.5F, 0.5F);
  const auto norm_w = upload(rng.floats(static_cast<std::size_t>(xw), 0.5F, 1.5F));
  constexpr float eps = 1e-5F;
  const auto n = static_cast<std::size_t>(batch * xw);
  const auto same = [](const auto& a, const auto& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
  };
  // Unfolded: the update, then gated_rms_norm of its output into bf16.
  auto plain_state = upload(state);
  auto plain_y = poisoned<float>(n);
  auto plain_out = poisoned<std::uint16_t>(n);
  const ssd_update_params plain{
      dw, in, plain_y.data(), batch, plain_state.data(), d_slots.span(), d_resume.span()};
  ASSERT_EQ(cuda::ssd_update(plain, nullptr), cudaSuccess);
  gated_rms_norm_params norm{matrix(static_cast<const float*>(plain_y.data()), batch, xw),
                             view<const float, 2>{z, {batch, xw}, {row, 1}},
                             vector(static_cast<const float*>(norm_w.data()), xw),
                             {},
                             group,
                             eps};
  norm.out_bf16 = matrix(plain_out.data(), batch, xw);
  ASSERT_EQ(cuda::gated_rms_norm(norm, nullptr), cudaSuccess);
  const auto want_y = plain_y.download();
  const auto want_state = plain_state.download();
  const auto want_out = plain_out.download();
  for (int launch = 0; launch < 2; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    auto d_state = upload(state);
    auto d_y = poisoned<float>(n);
    auto d_out = poisoned<std::uint16_t>(n);
    const ssd_update_params p{
        dw, in, d_y.data(), batch, d_state.data(), d_slots.span(), d_resume.span()};
    const cuda::ssd_gated_norm_fold f{z, row, norm_w.data(), eps, group, d_out.data()};
    ASSERT_TRUE(cuda::ssd_update_gated_norm_fits(p, f));
    ASSERT_EQ(cuda::ssd_update_gated_norm(p, f, nullptr), cudaSuccess);
    EXPECT_TRUE(same(d_y.download(), want_y)) << "output";
    EXPECT_TRUE(same(d_state.download(), want_state)) << "state";
    EXPECT_TRUE(same(d_out.download(), want_out)) << "normed bf16 row";
    // What the fold refuses: a group it has no form for or that does not
    // divide H * P, no gate, an unaligned output.
    auto refused = f;
    refused.group = 384;
    EXPECT_FALSE(cuda::ssd_update_gated_norm_fits(p, refused)) << "group " << refused.group;
    refused = f;
    refused.gate = nullptr;
    EXPECT_FALSE(cuda::ssd_update_gated_norm_fits(p, refused)) << "gate";
    refused = f;
    refused.out_bf16 = d_out.data() + 1;
    EXPECT_FALSE(cuda::ssd_update_gated_norm_fits(p, refused)) << "unaligned output";
    EXPECT_EQ(cuda::ssd_update_gated_norm(p, refused, nullptr), cudaErrorInvalidValue);
  }
}

TEST(gpu_recurrent, ssd_update_with_the_gated_norm_fold_gives_both_launches_bits) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(606);
  struct fold_case {
    ssd_geometry g;
    std::int64_t group;
  };
  // The 0.56B's layer (64 heads of 64 in 8 norm groups), a group of two
  // heads, N 64 and every group size.
  for (const auto& [g, group] :
       {fold_case{{64, 64, 128, 8}, 512}, fold_case{{16, 64, 128, 8}, 128},
        fold_case{{8, 64, 128, 2}, 128}, fold_case{{8, 64, 128, 2}, 256},
        fold_case{{16, 32, 64, 4}, 128}, fold_case{{16, 32, 64, 4}, 256}}) {
    for (const auto& [batch, offset] : {std::pair{1, 0}, std::pair{1, 1}, std::pair{3, 0}}) {
      SCOPED_TRACE("H " + std::to_string(g.heads) + " P " + std::to_string(g.head_dim) + " N " +
                   std::to_string(g.state_size) + ", group " + std::to_string(group) + ", " +
                   std::to_string(batch) + " rows, offset " + std::to_string(offset));
      expect_gated_norm_fold_matches(rng, g, group, batch, offset);
    }
  }
}

// Groups of more heads than a portable cluster holds (the 8B's: 16 heads of
// 64 in groups of 1,024) keep the two launches.
TEST(gpu_recurrent, ssd_update_gated_norm_fold_refuses_groups_over_eight_heads) {
  MSTAR_REQUIRE_GPU();
  auto y = poisoned<float>(128 * 64);
  auto out = poisoned<std::uint16_t>(128 * 64);
  auto any = poisoned<float>(4 * 128 * 64);
  const std::vector<std::int32_t> host_slots{0};
  const auto d_slots = upload(host_slots);
  const ssd_weights w{any.data(), any.data(), nullptr, 128, 64, 128, 8};
  const ssd_update_params p{
      w,          {any.data(), any.data(), any.data(), any.data(), 8192, 8192, 8192},
      y.data(),   1,
      any.data(), d_slots.span(),
      {}};
  cuda::ssd_gated_norm_fold f{any.data(), 8192, any.data(), 1e-5F, 1024, out.data()};
  EXPECT_FALSE(cuda::ssd_update_gated_norm_fits(p, f));
  EXPECT_EQ(cuda::ssd_update_gated_norm(p, f, nullptr), cudaErrorInvalidValue);
  f.group = 512;  // eight heads: taken
  EXPECT_TRUE(cuda::ssd_update_gated_norm_fits(p, f));
}

TEST(gpu_recurrent, ssd_update_variant_outside_the_table_is_refused) {
  MSTAR_REQUIRE_GPU();
  const ssd_update_params p{
      {nullptr, nullptr, nullptr, 8, 64, 128, 2}, {}, nullptr, 0, nullptr, {}, {}};
  EXPECT_EQ(cuda::ssd_update_variant(p, cuda::ssd_update_variants, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::ssd_update_variant(p, -2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::ssd_update_variant(p, -1, nullptr), cudaSuccess) << "an empty step";
}

// TF32 products in the chunked SSD path (a few 1e-4 of the largest value
// expected); the delta rule's chunked budget.
constexpr double ssd_chunked_budget = 3e-3;

// One packed batch through the workspace overload against the CPU
// reference: every output and the whole state block. Inputs as the model
// passes them: column slices of [x | B | C | dt | 3 spare] rows, or with
// `aligned` the rows padded to a multiple of 4 floats (as the model's and
// the bench's: the staged kernels then copy x, B and C 16 bytes at a time,
// else 4). A_log is drawn from [a_log_lo, a_log_hi).
void expect_ssd_chunked_matches(test::random_tensors& rng, const ssd_geometry& g,
                                const std::vector<std::int32_t>& row_lengths,
                                const std::vector<std::int32_t>& row_slots,
                                const std::vector<std::uint8_t>& row_resume,
                                std::int32_t chunked_from, double budget, bool aligned = false,
                                float a_log_lo = -1.0F, float a_log_hi = 1.5F) {
  const auto h = static_cast<std::size_t>(g.heads);
  const auto dt_bias = rng.floats(h, -1.0F, 1.0F);
  const auto a_log = rng.floats(h, a_log_lo, a_log_hi);
  const auto skip = rng.floats(h);
  const auto d_dt_bias = upload(dt_bias);
  const auto d_a_log = upload(a_log);
  const auto d_skip = upload(skip);
  const ssd_weights w{dt_bias.data(), a_log.data(), skip.data(), g.heads, g.head_dim,
                      g.state_size,   g.groups,     1e-3F,       10.0F};
  ssd_weights dw = w;
  dw.dt_bias = d_dt_bias.data();
  dw.A_log = d_a_log.data();
  dw.D = d_skip.data();
  const std::int64_t xw = std::int64_t{g.heads} * g.head_dim;
  const std::int64_t bcw = std::int64_t{g.groups} * g.state_size;
  const std::int64_t spare = xw + 2 * bcw + g.heads + 3;
  const std::int64_t row = aligned ? (spare + 3) / 4 * 4 : spare;
  const auto cu = cumulative(row_lengths);
  const auto T = static_cast<std::size_t>(cu.back());
  const auto packed = rng.floats(T * static_cast<std::size_t>(row), -2.0F, 2.0F);
  const auto d_packed = upload(packed);
  auto inputs = [&](const float* base) {
    return ssd_inputs{base, base + xw + 2 * bcw, base + xw, base + xw + bcw, row, row, row};
  };
  const std::int64_t n_slots = *std::max_element(row_slots.begin(), row_slots.end()) + 1;
  auto state = rng.floats(
      static_cast<std::size_t>(n_slots) * h * static_cast<std::size_t>(g.head_dim * g.state_size),
      -0.5F, 0.5F);
  auto d_state = upload(state);
  const auto d_cu = upload(cu);
  const auto d_slots = upload(row_slots);
  const auto d_resume = upload(row_resume);
  std::vector<float> ref(T * static_cast<std::size_t>(xw));
  ssd_scan_varlen({w, inputs(packed.data()), ref.data(), cu, state.data(), row_slots, row_resume});
  const std::size_t bytes =
      cuda::ssd_scan_workspace_bytes(dw, static_cast<std::int64_t>(T),
                                     static_cast<std::int64_t>(row_lengths.size()), chunked_from);
  auto workspace = poisoned<float>(bytes / sizeof(float) + 64);
  auto d_y = poisoned<float>(ref.size());
  ASSERT_EQ(cuda::ssd_scan_varlen(
                {dw, inputs(d_packed.data()), d_y.data(), d_cu.span(), d_state.data(),
                 d_slots.span(), d_resume.span()},
                {workspace.data(), bytes, static_cast<std::int64_t>(T), chunked_from}, nullptr),
            cudaSuccess);
  EXPECT_TRUE(within(d_y.download(), ref, budget)) << "output";
  EXPECT_TRUE(within(d_state.download(), state, budget)) << "state";
}

TEST(gpu_recurrent, ssd_chunked_scan_matches_alone_and_in_mixed_batches) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(503);
  // The Nemotron-H fixtures' shapes (the last two have no chunked path, so
  // the overload scans), N 64, and a 0.6B / 8B-like layer: 64 or 128 heads
  // of 64, state 128, 8 groups; head dims of two 64-column and three
  // 32-column slices, each at N 64 and 128 (the state walk's tiles of 64
  // and 32 rows at each of its widths: at N 128, 64 columns for one row,
  // 128 for the mixed batch).
  constexpr ssd_geometry shapes[] = {
      {8, 64, 128, 2},   {4, 8, 16, 2},    {3, 5, 24, 1},  {4, 32, 64, 2},  {64, 64, 128, 8},
      {128, 64, 128, 8}, {4, 128, 128, 2}, {2, 96, 64, 1}, {4, 96, 128, 2}, {2, 128, 64, 1}};
  for (const auto& g : shapes) {
    const bool chunked =
        cuda::ssd_scan_workspace_bytes(
            {nullptr, nullptr, nullptr, g.heads, g.head_dim, g.state_size, g.groups, 0.0F, 10.0F},
            1000, 1) != 0;
    const double budget = chunked ? ssd_chunked_budget : budget::recurrent;
    SCOPED_TRACE("H " + std::to_string(g.heads) + " P " + std::to_string(g.head_dim) + " N " +
                 std::to_string(g.state_size) + " G " + std::to_string(g.groups));
    // Each length alone, every row chunked, resumed and fresh (the CPU
    // reference's cost keeps the longest rows of the wide layers to the
    // mixed batch).
    const bool wide = g.heads >= 64;
    for (const std::int32_t len : {1, 63, 64, 65, 127, 128, 129, 200, 255, 257, 1000, 2048}) {
      if (wide && len > 257)
        continue;
      for (const std::uint8_t resumed : {1, 0}) {
        for (const bool aligned : {false, true}) {
          SCOPED_TRACE("one row of " + std::to_string(len) +
                       (resumed != 0 ? ", resumed" : ", fresh") +
                       (aligned ? ", 16-byte rows" : ", 4-byte rows"));
          expect_ssd_chunked_matches(rng, g, {len}, {1}, {resumed}, 1, budget, aligned);
        }
      }
    }
    // Mixed: fresh and resumed slots, an empty row, a skipped row (-1);
    // every row chunked, then the default threshold (short rows scanned).
    const std::vector<std::int32_t> lens{1, 63, 64, 0, 65, 200, 130, 1000, 2048, 7};
    const std::vector<std::int32_t> mixed_slots{4, 1, 6, 3, 7, 0, -1, 2, 8, 5};
    const std::vector<std::uint8_t> mixed_resume{1, 0, 1, 1, 1, 0, 1, 1, 0, 0};
    for (const std::int32_t from : {1, 0}) {
      for (const bool aligned : {false, true}) {
        SCOPED_TRACE("mixed batch, chunked from " + std::to_string(from) +
                     (aligned ? ", 16-byte rows" : ", 4-byte rows"));
        expect_ssd_chunked_matches(rng, g, lens, mixed_slots, mixed_resume, from, budget, aligned);
      }
    }
  }
}

// Slow decays (A_log in [-7, -5): about e^-0.5 over a chunk of 128
// tokens, where the test above decays by e^-100 or so): a state carries
// over whole chunks, so the walk in halves (MSTAR_SSD_VARIANT 3, 4, 6, by
// default one row of up to 128 heads) shows if chunk_output's fix-ups of
// the second half (+ gamma_c H, the slot from its end) are wrong; they
// vanish under fast decays. Every path runs it (the variant is chosen by
// the environment or by the shape).
TEST(gpu_recurrent, ssd_chunked_scan_matches_with_slow_decays) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(509);
  constexpr ssd_geometry shapes[] = {
      {8, 64, 128, 2}, {4, 32, 64, 2}, {4, 96, 128, 2}, {64, 64, 128, 8}, {128, 64, 128, 8}};
  for (const auto& g : shapes) {
    SCOPED_TRACE("H " + std::to_string(g.heads) + " P " + std::to_string(g.head_dim) + " N " +
                 std::to_string(g.state_size) + " G " + std::to_string(g.groups));
    const bool wide = g.heads >= 64;
    for (const std::int32_t len : {129, 300, 520, 1000, 2048}) {
      if (wide && len > 1000)
        continue;
      for (const std::uint8_t resumed : {1, 0}) {
        SCOPED_TRACE("one row of " + std::to_string(len) +
                     (resumed != 0 ? ", resumed" : ", fresh"));
        expect_ssd_chunked_matches(rng, g, {len}, {1}, {resumed}, 1, ssd_chunked_budget, true,
                                   -7.0F, -5.0F);
      }
    }
    if (!wide) {
      const std::vector<std::int32_t> lens{1000, 129, 0, 520, 64, 2048};
      const std::vector<std::int32_t> slow_slots{2, 0, 5, 1, 3, 4};
      const std::vector<std::uint8_t> slow_resume{1, 0, 1, 1, 0, 1};
      SCOPED_TRACE("mixed batch");
      expect_ssd_chunked_matches(rng, g, lens, slow_slots, slow_resume, 1, ssd_chunked_budget,
                                 false, -7.0F, -5.0F);
    }
  }
}

}  // namespace
}  // namespace mstar::kernels
