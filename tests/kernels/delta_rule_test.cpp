// The gated delta rule over slot-addressed state (kernels/delta_rule.hpp): a
// one-dimensional case worked by hand; a varlen batch equals each row alone;
// prefill then decode equals one longer prefill; grouped value heads equal
// repeated key heads; has_state, -1 rows and untouched slots; the gated norm.
#include "kernels/delta_rule.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <random>
#include <vector>

#include "tests/support/random.hpp"

namespace mstar::kernels {
namespace {

using floats = std::vector<float>;
using ints = std::vector<std::int32_t>;
using flags = std::vector<std::uint8_t>;

using test::random_floats;

struct setup {
  std::int32_t hk = 2, hv = 4, k = 3, v = 5, slots = 5;
  floats a_log, dt_bias;
  explicit setup(std::mt19937& rng)
      : a_log(random_floats(static_cast<std::size_t>(hv), rng, 0.7F)),
        dt_bias(random_floats(static_cast<std::size_t>(hv), rng, 0.5F)) {}
  [[nodiscard]] gated_delta_weights weights() const {
    return {a_log.data(), dt_bias.data(), hk, hv, k, v, 0.0F};
  }
  [[nodiscard]] std::size_t width() const { return static_cast<std::size_t>(2 * hk * k + hv * v); }
  [[nodiscard]] std::size_t slot_elems() const { return static_cast<std::size_t>(hv * v * k); }
  [[nodiscard]] std::size_t out_elems() const { return static_cast<std::size_t>(hv * v); }
};

struct batch {
  floats qkv, a, b;
  batch(const setup& s, std::size_t t, std::mt19937& rng)
      : qkv(random_floats(t * s.width(), rng)),
        a(random_floats(t * static_cast<std::size_t>(s.hv), rng)),
        b(random_floats(t * static_cast<std::size_t>(s.hv), rng)) {}
};

// Runs `rows` (cu) of `in` on `state`, returning the outputs.
floats run(const setup& s, const batch& in, const ints& cu, floats& state, const ints& slot,
           const flags& has, std::size_t token0 = 0) {
  const auto tokens = static_cast<std::size_t>(cu.back());
  floats out(tokens * s.out_elems(), -7.0F);
  const auto hv = static_cast<std::size_t>(s.hv);
  gated_delta_rule_varlen({s.weights(),
                           {in.qkv.data() + token0 * s.width(), 0, in.a.data() + token0 * hv,
                            in.b.data() + token0 * hv, 0},
                           out.data(),
                           cu,
                           state.data(),
                           slot,
                           has});
  return out;
}

float max_diff(const floats& a, const floats& b) {
  float m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(gated_delta_rule, matches_a_one_dimensional_case_worked_by_hand) {
  // HK = HV = K = V = 1: q and k normalise to +-1/sqrt(1 + 1e-6/x^2).
  const float a_log = std::log(0.5F), dt_bias = 0.25F;
  const gated_delta_weights w{&a_log, &dt_bias, 1, 1, 1, 1, 0.0F};
  const floats qkv = {2.0F, -3.0F, 4.0F, 1.0F, 1.0F, -2.0F};  // two tokens: q, k, v
  const floats a = {0.1F, -0.3F}, b = {0.4F, 1.2F};
  floats state = {0.5F};  // slot 0 carries 0.5
  floats out(2);
  const ints cu = {0, 2}, slot = {0};
  const flags has = {1};
  gated_delta_rule_varlen(
      {w, {qkv.data(), 0, a.data(), b.data(), 0}, out.data(), cu, state.data(), slot, has});
  double s = 0.5;
  double expect[2];
  for (int t = 0; t < 2; ++t) {
    const double q = qkv[3 * t] / std::sqrt(double(qkv[3 * t]) * qkv[3 * t] + 1e-6);
    const double k = qkv[3 * t + 1] / std::sqrt(double(qkv[3 * t + 1]) * qkv[3 * t + 1] + 1e-6);
    const double g = -0.5 * std::log1p(std::exp(double(a[t]) + 0.25));
    const double beta = 1.0 / (1.0 + std::exp(-double(b[t])));
    s *= std::exp(g);
    s += beta * (qkv[3 * t + 2] - s * k) * k;
    expect[t] = s * q;  // scale 1/sqrt(K) = 1
  }
  EXPECT_NEAR(out[0], expect[0], 1e-6);
  EXPECT_NEAR(out[1], expect[1], 1e-6);
  EXPECT_NEAR(state[0], s, 1e-6);
}

TEST(gated_delta_rule, a_batch_equals_each_row_alone_and_prefill_then_decode) {
  std::mt19937 rng(11);
  const setup s(rng);
  const batch in(s, 9, rng);
  const ints cu = {0, 4, 9}, slot = {3, 1};
  const flags fresh = {0, 0};
  floats pool(s.slot_elems() * static_cast<std::size_t>(s.slots), 9.0F);  // garbage: ignored
  const floats together = run(s, in, cu, pool, slot, fresh);
  for (std::size_t r = 0; r < 2; ++r) {
    floats alone_pool(pool.size(), 0.0F);
    const auto t0 = static_cast<std::size_t>(cu[r]);
    const ints one = {0, cu[r + 1] - cu[r]};
    const floats alone = run(s, in, one, alone_pool, {slot[r]}, {0}, t0);
    const floats part(
        together.begin() + static_cast<long>(t0 * s.out_elems()),
        together.begin() + static_cast<long>(cu[r + 1]) * static_cast<long>(s.out_elems()));
    EXPECT_EQ(max_diff(alone, part), 0.0F) << "row " << r;
    // Prefill of all but the last token, then one decode step from the slot.
    floats split_pool(pool.size(), 0.0F);
    const ints head = {0, one[1] - 1};
    const floats first = run(s, in, head, split_pool, {slot[r]}, {0}, t0);
    const floats last =
        run(s, in, {0, 1}, split_pool, {slot[r]}, {1}, t0 + static_cast<std::size_t>(head[1]));
    floats joined = first;
    joined.insert(joined.end(), last.begin(), last.end());
    EXPECT_LT(max_diff(joined, alone), 1e-6F) << "row " << r;
    const auto off = static_cast<long>(static_cast<std::size_t>(slot[r]) * s.slot_elems());
    EXPECT_LT(max_diff(floats(split_pool.begin() + off,
                              split_pool.begin() + off + static_cast<long>(s.slot_elems())),
                       floats(pool.begin() + off,
                              pool.begin() + off + static_cast<long>(s.slot_elems()))),
              1e-6F);
  }
}

TEST(gated_delta_rule, grouped_value_heads_read_their_key_head) {
  std::mt19937 rng(5);
  setup grouped(rng);  // HK 2, HV 4: value heads 0, 1 read key head 0; 2, 3 read 1
  setup repeated = grouped;
  repeated.hk = 4;
  const batch in(grouped, 3, rng);
  batch wide = in;
  wide.qkv.clear();
  const auto kk = static_cast<std::size_t>(grouped.k);
  for (std::size_t t = 0; t < 3; ++t) {
    const float* row = in.qkv.data() + t * grouped.width();
    for (int part = 0; part < 2; ++part) {  // q then k, each key head twice
      for (std::size_t h = 0; h < 4; ++h) {
        const float* src = row + static_cast<std::size_t>(part) * 2 * kk + (h / 2) * kk;
        wide.qkv.insert(wide.qkv.end(), src, src + kk);
      }
    }
    const float* v = row + 4 * kk;
    wide.qkv.insert(wide.qkv.end(), v, v + grouped.out_elems());
  }
  floats p1(grouped.slot_elems() * 5, 0.0F), p2 = p1;
  const floats a = run(grouped, in, {0, 3}, p1, {2}, {0});
  const floats b = run(repeated, wide, {0, 3}, p2, {2}, {0});
  EXPECT_EQ(max_diff(a, b), 0.0F);
  EXPECT_EQ(max_diff(p1, p2), 0.0F);
}

TEST(gated_delta_rule, skips_minus_one_rows_and_leaves_other_slots_alone) {
  std::mt19937 rng(3);
  const setup s(rng);
  const batch in(s, 5, rng);
  floats pool = random_floats(s.slot_elems() * 5, rng);
  const floats before = pool;
  const floats out = run(s, in, {0, 2, 5}, pool, {-1, 4}, {1, 1});
  for (std::size_t i = 0; i < 2 * s.out_elems(); ++i)
    ASSERT_EQ(out[i], 0.0F) << "the -1 row outputs zeros";
  for (std::size_t i = 0; i < 4 * s.slot_elems(); ++i)
    ASSERT_EQ(pool[i], before[i]) << "slots 0-3 are untouched";
  EXPECT_GT(max_diff(pool, before), 0.0F) << "slot 4 moved";
}

TEST(head_gated_rms_norm, normalises_each_head_then_gates_with_silu) {
  const floats x = {3.0F, 4.0F, 1.0F, 0.0F};  // two heads of two
  const floats gate = {0.0F, 1.0F, -1.0F, 2.0F};
  const floats weight = {2.0F, 0.5F};
  floats out(4);
  head_gated_rms_norm(
      {x.data(), gate.data(), 0, weight.data(), out.data(), nullptr, 1, 2, 2, 0.0F});
  const auto silu = [](float z) { return z / (1.0F + std::exp(-z)); };
  const float r0 = std::sqrt((9.0F + 16.0F) / 2.0F), r1 = std::sqrt(0.5F);
  EXPECT_NEAR(out[0], 3.0F / r0 * 2.0F * silu(0.0F), 1e-6);
  EXPECT_NEAR(out[1], 4.0F / r0 * 0.5F * silu(1.0F), 1e-6);
  EXPECT_NEAR(out[2], 1.0F / r1 * 2.0F * silu(-1.0F), 1e-6);
  EXPECT_NEAR(out[3], 0.0F, 1e-6);
}

}  // namespace
}  // namespace mstar::kernels
