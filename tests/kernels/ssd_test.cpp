// Mamba-2 SSD scan over slot-addressed state (kernels/ssd.hpp): a varlen
// batch equals each row alone and a naive recurrence; prefill then decode
// equals one longer prefill; has_state, -1 rows and untouched slots; the dt
// clamp after softplus; strided inputs; values from transformers' torch code.
#include "kernels/ssd.hpp"

#include <cmath>
#include <fstream>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/support/random.hpp"

namespace mstar::kernels {
namespace {

using floats = std::vector<float>;
using ints = std::vector<std::int32_t>;
using flags = std::vector<std::uint8_t>;

using test::random_floats;

// Weights, geometry and a token batch's inputs, dense.
struct ssd_setup {
  std::int32_t h = 4, p = 3, n = 5, g = 2, max_slots = 6;
  floats dt_bias, a_log, d_skip;
  float dt_min = 0.01f, dt_max = 2.0f;

  explicit ssd_setup(std::mt19937& rng) {
    dt_bias = random_floats(static_cast<std::size_t>(h), rng, 0.5f);
    a_log = random_floats(static_cast<std::size_t>(h), rng, 0.7f);
    d_skip = random_floats(static_cast<std::size_t>(h), rng);
  }
  [[nodiscard]] ssd_weights weights() const {
    return {dt_bias.data(), a_log.data(), d_skip.data(), h, p, n, g, dt_min, dt_max};
  }
  [[nodiscard]] std::size_t x_elems() const { return static_cast<std::size_t>(h * p); }
  [[nodiscard]] std::size_t bc_elems() const { return static_cast<std::size_t>(g * n); }
  [[nodiscard]] std::size_t slot_elems() const { return static_cast<std::size_t>(h * p * n); }
  [[nodiscard]] std::size_t pool_elems() const {
    return static_cast<std::size_t>(max_slots) * slot_elems();
  }
};

struct tokens {
  floats x, dt, b, c;
  tokens(const ssd_setup& s, std::size_t t, std::mt19937& rng)
      : x(random_floats(t * s.x_elems(), rng)),
        dt(random_floats(t * static_cast<std::size_t>(s.h), rng, 2.5f)),  // spans both clamps
        b(random_floats(t * s.bc_elems(), rng)),
        c(random_floats(t * s.bc_elems(), rng)) {}
  tokens() = default;
  [[nodiscard]] ssd_inputs at(const ssd_setup& s, std::size_t t) const {
    return {x.data() + t * s.x_elems(), dt.data() + t * static_cast<std::size_t>(s.h),
            b.data() + t * s.bc_elems(), c.data() + t * s.bc_elems()};
  }
};

void run_varlen(const ssd_setup& s, const tokens& in, floats& y, const ints& cu, floats& state,
                const ints& slots, const flags& has, std::size_t first = 0) {
  ssd_scan_varlen({s.weights(), in.at(s, first), y.data(), cu, state.data(), slots, has});
}

void run_update(const ssd_setup& s, const tokens& in, std::size_t first, float* y,
                std::int32_t batch, floats& state, const ints& slots, const flags& has = {}) {
  ssd_update({s.weights(), in.at(s, first), y, batch, state.data(), slots, has});
}

// The recurrence written out in double, one token at a time.
void naive_scan(const ssd_setup& s, const tokens& in, std::size_t begin, std::size_t end,
                const float* init, float* y, float* final_state) {
  std::vector<double> st(s.slot_elems(), 0.0);
  if (init != nullptr)
    st.assign(init, init + s.slot_elems());
  const auto hpg = static_cast<std::size_t>(s.h / s.g);
  const auto np = static_cast<std::size_t>(s.p);
  const auto nn = static_cast<std::size_t>(s.n);
  for (std::size_t t = begin; t < end; ++t) {
    for (std::size_t h = 0; h < static_cast<std::size_t>(s.h); ++h) {
      const double raw = double{in.dt[t * static_cast<std::size_t>(s.h) + h]} + s.dt_bias[h];
      double dt = raw > 20.0 ? raw : std::log1p(std::exp(raw));
      dt = std::min(std::max(dt, double{s.dt_min}), double{s.dt_max});
      const double decay = std::exp(-dt * std::exp(double{s.a_log[h]}));
      const std::size_t g = h / hpg;
      for (std::size_t p = 0; p < np; ++p) {
        const double x = in.x[t * s.x_elems() + h * np + p];
        double out = s.d_skip[h] * x;
        for (std::size_t n = 0; n < nn; ++n) {
          double& v = st[(h * np + p) * nn + n];
          v = decay * v + dt * in.b[t * s.bc_elems() + g * nn + n] * x;
          out += v * in.c[t * s.bc_elems() + g * nn + n];
        }
        y[(t - begin) * s.x_elems() + h * np + p] = static_cast<float>(out);
      }
    }
  }
  for (std::size_t i = 0; i < st.size(); ++i)
    final_state[i] = static_cast<float>(st[i]);
}

void expect_close_rel(const float* got, const float* want, std::size_t n, float rel) {
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::max(1.0f, std::abs(want[i]))) << "element " << i;
  }
}

void expect_slot_unchanged(const ssd_setup& s, const floats& now, const floats& before,
                           std::int32_t slot) {
  const std::size_t at = static_cast<std::size_t>(slot) * s.slot_elems();
  for (std::size_t i = 0; i < s.slot_elems(); ++i) {
    ASSERT_EQ(now[at + i], before[at + i]) << "slot " << slot << " element " << i;
  }
}

TEST(ssd_scan_varlen, batch_equals_each_row_alone_and_a_naive_recurrence) {
  const std::uint32_t seed = 21;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ssd_setup s(rng);
  const ints cu{0, 4, 5, 5, 11, 14};  // lengths 4, 1, 0, 6, 3
  const ints slots{3, -1, 2, 5, 0};
  const flags has{1, 1, 1, 0, 1};
  const tokens in(s, 14, rng);
  const floats initial = random_floats(s.pool_elems(), rng);
  floats state = initial;
  floats y(14 * s.x_elems(), std::numeric_limits<float>::quiet_NaN());
  run_varlen(s, in, y, cu, state, slots, has);

  for (std::size_t r = 0; r + 1 < cu.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const auto begin = static_cast<std::size_t>(cu[r]);
    const auto end = static_cast<std::size_t>(cu[r + 1]);
    if (slots[r] < 0) {
      for (std::size_t i = begin * s.x_elems(); i < end * s.x_elems(); ++i)
        EXPECT_EQ(y[i], 0.0f);
      continue;
    }
    if (end == begin)
      continue;
    const std::size_t at = static_cast<std::size_t>(slots[r]) * s.slot_elems();
    floats want((end - begin) * s.x_elems());
    floats want_state(s.slot_elems());
    naive_scan(s, in, begin, end, has[r] != 0 ? &initial[at] : nullptr, want.data(),
               want_state.data());
    expect_close_rel(&y[begin * s.x_elems()], want.data(), want.size(), 1e-5f);
    expect_close_rel(&state[at], want_state.data(), want_state.size(), 1e-5f);
    floats alone_state = initial;
    floats alone_y(want.size());
    run_varlen(s, in, alone_y, {0, static_cast<std::int32_t>(end - begin)}, alone_state, {slots[r]},
               {has[r]}, begin);
    EXPECT_EQ(alone_y, floats(y.begin() + static_cast<long>(begin * s.x_elems()),
                              y.begin() + static_cast<long>(end * s.x_elems())));
    expect_close_rel(&alone_state[at], &state[at], s.slot_elems(), 0.0f);
  }
  for (const std::int32_t untouched : {1, 2, 4})
    expect_slot_unchanged(s, state, initial, untouched);
}

TEST(ssd_scan_varlen, chunked_prefill_then_decode_equals_one_prefill_of_every_token) {
  const std::uint32_t seed = 22;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ssd_setup s(rng);
  const tokens in(s, 8, rng);
  const floats garbage = random_floats(s.pool_elems(), rng);
  floats whole_state = garbage;
  floats whole(8 * s.x_elems());
  run_varlen(s, in, whole, {0, 8}, whole_state, {4}, {0});

  floats state = garbage;
  floats y(8 * s.x_elems());
  std::size_t at = 0;
  for (const std::size_t n : {3U, 4U}) {
    floats chunk(n * s.x_elems());
    run_varlen(s, in, chunk, {0, static_cast<std::int32_t>(n)}, state, {4},
               {static_cast<std::uint8_t>(at > 0)}, at);
    std::copy(chunk.begin(), chunk.end(), y.begin() + static_cast<long>(at * s.x_elems()));
    at += n;
  }
  run_update(s, in, 7, &y[7 * s.x_elems()], 1, state, {4});
  EXPECT_EQ(y, whole);
  EXPECT_EQ(state, whole_state);
}

TEST(ssd_update, equals_varlen_rows_of_one_token_and_skips_minus_one_rows) {
  const std::uint32_t seed = 23;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ssd_setup s(rng);
  const tokens in(s, 4, rng);
  const floats initial = random_floats(s.pool_elems(), rng);
  const ints slots{5, -1, 0, 2};
  floats varlen_state = initial;
  floats varlen_y(4 * s.x_elems());
  run_varlen(s, in, varlen_y, {0, 1, 2, 3, 4}, varlen_state, slots, {1, 1, 1, 1});
  floats state = initial;
  floats y(4 * s.x_elems(), std::numeric_limits<float>::quiet_NaN());
  run_update(s, in, 0, y.data(), 4, state, slots);
  EXPECT_EQ(y, varlen_y);
  EXPECT_EQ(state, varlen_state);
  for (std::size_t i = s.x_elems(); i < 2 * s.x_elems(); ++i)
    EXPECT_EQ(y[i], 0.0f);
  for (const std::int32_t untouched : {1, 3, 4})
    expect_slot_unchanged(s, state, initial, untouched);
}

TEST(ssd_scan_varlen, has_state_zero_starts_from_zeros_whatever_the_slot_holds) {
  const std::uint32_t seed = 24;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ssd_setup s(rng);
  const tokens in(s, 3, rng);
  floats garbage(s.pool_elems(), 1e30f);
  floats zeros(s.pool_elems(), 0.0f);
  floats from_garbage(3 * s.x_elems());
  floats from_zeros(3 * s.x_elems());
  run_varlen(s, in, from_garbage, {0, 3}, garbage, {1}, {0});
  run_varlen(s, in, from_zeros, {0, 3}, zeros, {1}, {1});
  EXPECT_EQ(from_garbage, from_zeros);
  EXPECT_EQ(garbage[s.slot_elems()], zeros[s.slot_elems()]);
  expect_slot_unchanged(s, garbage, floats(s.pool_elems(), 1e30f), 3);
  run_update(s, in, 0, from_garbage.data(), 1, garbage, {3}, {0});
  run_update(s, in, 0, from_zeros.data(), 1, zeros, {3});
  for (std::size_t i = 0; i < s.x_elems(); ++i)
    EXPECT_EQ(from_garbage[i], from_zeros[i]);
}

TEST(ssd_dt, clamps_after_torch_softplus) {
  EXPECT_FLOAT_EQ(ssd_dt(0.0f, 0.0f, std::numeric_limits<float>::infinity()), std::log(2.0f));
  EXPECT_FLOAT_EQ(ssd_dt(25.0f, 0.0f, std::numeric_limits<float>::infinity()), 25.0f);
  EXPECT_FLOAT_EQ(ssd_dt(-10.0f, 0.01f, 2.0f), 0.01f);  // softplus(-10) ~ 4.5e-5 < min
  EXPECT_FLOAT_EQ(ssd_dt(3.0f, 0.01f, 2.0f), 2.0f);
  EXPECT_FLOAT_EQ(ssd_dt(-10.0f, 0.0f, 2.0f), std::log1p(std::exp(-10.0f)));
}

TEST(ssd_update, follows_the_one_head_formula_with_the_clamped_dt) {
  const float dt_bias = 1.0f;
  const float a_log = std::log(0.5f);  // A = -0.5
  const float d_skip = 0.25f;
  const ssd_weights w{&dt_bias, &a_log, &d_skip, 1, 1, 1, 1, 0.5f, 0.9f};
  const float x = 3.0f;
  const float dt_raw = -11.0f;  // softplus(-10) clamps up to 0.5
  const float b = 2.0f;
  const float c = -1.5f;
  float state[2] = {9.0f, 2.0f};
  float y = 0.0f;
  const ints slots{1};
  ssd_update({w, {&x, &dt_raw, &b, &c}, &y, 1, state, slots, {}});
  const float s1 = std::exp(0.5f * -0.5f) * 2.0f + 0.5f * b * x;
  EXPECT_FLOAT_EQ(state[1], s1);
  EXPECT_FLOAT_EQ(y, s1 * c + d_skip * x);
  EXPECT_EQ(state[0], 9.0f);
}

TEST(ssd_scan_varlen, reads_strided_column_slices_like_dense_inputs) {
  const std::uint32_t seed = 25;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ssd_setup s(rng);
  const tokens dense(s, 5, rng);
  // One conv output row is [x | B | C]; dt sits after 3 other columns of a wider row.
  const std::size_t conv_w = s.x_elems() + 2 * s.bc_elems();
  const std::size_t dt_w = static_cast<std::size_t>(s.h) + 5;
  floats conv(5 * conv_w);
  floats dt(5 * dt_w, 99.0f);
  for (std::size_t t = 0; t < 5; ++t) {
    std::copy_n(&dense.x[t * s.x_elems()], s.x_elems(), &conv[t * conv_w]);
    std::copy_n(&dense.b[t * s.bc_elems()], s.bc_elems(), &conv[t * conv_w + s.x_elems()]);
    std::copy_n(&dense.c[t * s.bc_elems()], s.bc_elems(),
                &conv[t * conv_w + s.x_elems() + s.bc_elems()]);
    std::copy_n(&dense.dt[t * static_cast<std::size_t>(s.h)], s.h, &dt[t * dt_w + 3]);
  }
  const auto cw = static_cast<std::int64_t>(conv_w);
  const ssd_inputs strided{conv.data(),
                           dt.data() + 3,
                           conv.data() + s.x_elems(),
                           conv.data() + s.x_elems() + s.bc_elems(),
                           cw,
                           static_cast<std::int64_t>(dt_w),
                           cw};
  floats state_a(s.pool_elems(), 0.0f);
  floats state_b = state_a;
  floats y_a(5 * s.x_elems());
  floats y_b(5 * s.x_elems());
  const ints cu{0, 2, 5};
  const ints slots{1, 4};
  const flags has{0, 0};
  run_varlen(s, dense, y_a, cu, state_a, slots, has);
  ssd_scan_varlen({s.weights(), strided, y_b.data(), cu, state_b.data(), slots, has});
  EXPECT_EQ(y_a, y_b);
  EXPECT_EQ(state_a, state_b);
}

TEST(ssd_scan_varlen, matches_transformers_torch_chunk_scan_and_state_update) {
  std::ifstream file(std::string(MSTAR_FIXTURES_DIR) + "/kernels/mamba2_reference.json");
  ASSERT_TRUE(file) << "missing fixture; see tests/fixtures/kernels/gen_mamba2_reference.py";
  const auto doc = nlohmann::json::parse(file)["ssd"];
  std::mt19937 rng(0);
  ssd_setup s(rng);
  s.h = doc["num_heads"].get<std::int32_t>();
  s.p = doc["head_dim"].get<std::int32_t>();
  s.n = doc["state_size"].get<std::int32_t>();
  s.g = doc["n_groups"].get<std::int32_t>();
  s.max_slots = 3;
  s.dt_min = doc["dt_min"].get<float>();
  s.dt_max = doc["dt_max"].get<float>();
  s.dt_bias = doc["dt_bias"].get<floats>();
  s.a_log = doc["A_log"].get<floats>();
  s.d_skip = doc["D"].get<floats>();
  floats state(s.pool_elems(), 5.0f);  // garbage the first stage must not read
  std::uint8_t has = 0;
  for (const auto& stage : doc["stages"]) {
    const auto n = stage["tokens"].get<std::int32_t>();
    SCOPED_TRACE("stage of " + std::to_string(n) + " tokens");
    tokens in;
    in.x = stage["x"].get<floats>();
    in.dt = stage["dt"].get<floats>();
    in.b = stage["B"].get<floats>();
    in.c = stage["C"].get<floats>();
    floats y(in.x.size());
    if (stage.value("decode", false)) {
      run_update(s, in, 0, y.data(), 1, state, {2});
    } else {
      run_varlen(s, in, y, {0, n}, state, {2}, {has});
    }
    has = 1;
    const floats want_y = stage["y"].get<floats>();
    const floats want_state = stage["state"].get<floats>();
    ASSERT_EQ(y.size(), want_y.size());
    ASSERT_EQ(want_state.size(), s.slot_elems());
    expect_close_rel(y.data(), want_y.data(), y.size(), 2e-5f);
    expect_close_rel(&state[2 * s.slot_elems()], want_state.data(), want_state.size(), 2e-5f);
  }
}

}  // namespace
}  // namespace mstar::kernels
