// Causal depthwise conv over slot-addressed state (kernels/conv.hpp): a
// varlen batch equals each row alone and a naive conv; prefill then decode
// equals one longer prefill; has_state, -1 rows and untouched slots; the
// state layout (newest last); and values from transformers' torch code.
#include "kernels/conv.hpp"

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

struct conv_setup {
  std::int32_t channels = 5;
  std::int32_t width = 4;
  std::int32_t max_slots = 8;
  floats weight, bias;
  bool silu = true;

  conv_setup(std::mt19937& rng, std::int32_t c = 5, std::int32_t w = 4) : channels(c), width(w) {
    weight = random_floats(static_cast<std::size_t>(c * w), rng);
    bias = random_floats(static_cast<std::size_t>(c), rng);
  }
  [[nodiscard]] conv_weights weights() const {
    return {weight.data(), bias.data(), channels, width, silu};
  }
  [[nodiscard]] std::size_t slot_elems() const {
    return static_cast<std::size_t>(channels) * static_cast<std::size_t>(width - 1);
  }
};

// Straight from the definition, in double: out[t] = bias + sum_j w[j] * seq[t + j]
// over seq = initial window ++ x; the final window is seq's last W-1.
void naive_conv(const conv_setup& s, const float* init, const float* x, std::size_t n, float* out,
                float* final_window) {
  const auto c_count = static_cast<std::size_t>(s.channels);
  const auto w = static_cast<std::size_t>(s.width);
  for (std::size_t c = 0; c < c_count; ++c) {
    std::vector<double> seq;
    for (std::size_t j = 0; j + 1 < w; ++j)
      seq.push_back(init != nullptr ? init[c * (w - 1) + j] : 0.0);
    for (std::size_t t = 0; t < n; ++t)
      seq.push_back(x[t * c_count + c]);
    for (std::size_t t = 0; t < n; ++t) {
      double y = s.bias[c];
      for (std::size_t j = 0; j < w; ++j)
        y += double{s.weight[c * w + j]} * seq[t + j];
      if (s.silu)
        y = y / (1.0 + std::exp(-y));
      out[t * c_count + c] = static_cast<float>(y);
    }
    for (std::size_t j = 0; j + 1 < w; ++j)
      final_window[c * (w - 1) + j] = static_cast<float>(seq[n + j]);
  }
}

void expect_close(const float* got, const float* want, std::size_t n, float tol) {
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

void run_varlen(const conv_setup& s, const floats& x, floats& out, const ints& cu, floats& state,
                const ints& slots, const flags& has) {
  causal_conv_varlen({s.weights(), x.data(), 0, out.data(), cu, state.data(), slots, has});
}

void run_update(const conv_setup& s, const float* x, float* out, std::int32_t batch, floats& state,
                const ints& slots, const flags& has = {}) {
  causal_conv_update({s.weights(), x, 0, out, batch, state.data(), slots, has});
}

TEST(causal_conv_varlen, batch_equals_each_row_alone_and_a_naive_conv) {
  const std::uint32_t seed = 11;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const conv_setup s(rng);
  const ints cu{0, 5, 6, 8, 8, 15, 18};  // lengths 5, 1, 2, 0, 7, 3
  const ints slots{5, 2, 7, 3, -1, 1};
  const flags has{1, 1, 0, 1, 1, 0};
  const std::size_t c = static_cast<std::size_t>(s.channels);
  const floats x = random_floats(18 * c, rng);
  const floats initial = random_floats(static_cast<std::size_t>(s.max_slots) * s.slot_elems(), rng);
  floats state = initial;
  floats out(x.size(), std::numeric_limits<float>::quiet_NaN());
  run_varlen(s, x, out, cu, state, slots, has);

  floats expect_state = initial;
  for (std::size_t r = 0; r + 1 < cu.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const auto begin = static_cast<std::size_t>(cu[r]);
    const auto n = static_cast<std::size_t>(cu[r + 1]) - begin;
    if (slots[r] < 0) {
      for (std::size_t i = begin * c; i < (begin + n) * c; ++i)
        EXPECT_EQ(out[i], 0.0f);
      continue;
    }
    if (n == 0)
      continue;
    const std::size_t at = static_cast<std::size_t>(slots[r]) * s.slot_elems();
    floats want(n * c);
    naive_conv(s, has[r] != 0 ? &initial[at] : nullptr, &x[begin * c], n, want.data(),
               &expect_state[at]);
    expect_close(&out[begin * c], want.data(), n * c, 1e-5f);
    // The same row run alone, from the same initial slots.
    floats alone_state = initial;
    floats alone_out(n * c);
    const floats row_x(x.begin() + static_cast<long>(begin * c),
                       x.begin() + static_cast<long>((begin + n) * c));
    run_varlen(s, row_x, alone_out, {0, static_cast<std::int32_t>(n)}, alone_state, {slots[r]},
               {has[r]});
    EXPECT_EQ(alone_out, floats(out.begin() + static_cast<long>(begin * c),
                                out.begin() + static_cast<long>((begin + n) * c)));
    for (std::size_t i = 0; i < s.slot_elems(); ++i)
      ASSERT_EQ(alone_state[at + i], state[at + i]);
  }
  // Slots of the -1 row, the empty row and unaddressed slots keep their bytes.
  expect_close(state.data(), expect_state.data(), state.size(), 1e-6f);
  for (const std::int32_t untouched : {0, 3, 4, 6}) {
    const std::size_t at = static_cast<std::size_t>(untouched) * s.slot_elems();
    for (std::size_t i = 0; i < s.slot_elems(); ++i)
      ASSERT_EQ(state[at + i], initial[at + i]);
  }
}

TEST(causal_conv_varlen, chunked_prefill_then_decode_equals_one_prefill_of_every_token) {
  const std::uint32_t seed = 12;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const conv_setup s(rng);
  const std::size_t c = static_cast<std::size_t>(s.channels);
  const floats x = random_floats(8 * c, rng);
  floats garbage = random_floats(static_cast<std::size_t>(s.max_slots) * s.slot_elems(), rng);

  floats whole_state = garbage;
  floats whole(8 * c);
  run_varlen(s, x, whole, {0, 8}, whole_state, {3}, {0});

  // Chunks of 2, 1 (both shorter than W-1) and 4 tokens, then one decode step.
  floats state = garbage;
  floats out(8 * c);
  std::size_t at = 0;
  for (const std::size_t n : {2U, 1U, 4U}) {
    const floats chunk(x.begin() + static_cast<long>(at * c),
                       x.begin() + static_cast<long>((at + n) * c));
    floats chunk_out(n * c);
    run_varlen(s, chunk, chunk_out, {0, static_cast<std::int32_t>(n)}, state, {3},
               {static_cast<std::uint8_t>(at > 0)});
    std::copy(chunk_out.begin(), chunk_out.end(), out.begin() + static_cast<long>(at * c));
    at += n;
  }
  run_update(s, &x[7 * c], &out[7 * c], 1, state, {3});
  EXPECT_EQ(out, whole);
  EXPECT_EQ(state, whole_state);
}

TEST(causal_conv_update, equals_varlen_rows_of_one_token_and_skips_minus_one_rows) {
  const std::uint32_t seed = 13;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const conv_setup s(rng);
  const std::size_t c = static_cast<std::size_t>(s.channels);
  const floats x = random_floats(4 * c, rng);
  const floats initial = random_floats(static_cast<std::size_t>(s.max_slots) * s.slot_elems(), rng);
  const ints slots{6, -1, 0, 2};
  floats varlen_state = initial;
  floats varlen_out(4 * c);
  run_varlen(s, x, varlen_out, {0, 1, 2, 3, 4}, varlen_state, slots, {1, 1, 1, 1});
  floats state = initial;
  floats out(4 * c, std::numeric_limits<float>::quiet_NaN());
  run_update(s, x.data(), out.data(), 4, state, slots);
  EXPECT_EQ(out, varlen_out);
  EXPECT_EQ(state, varlen_state);
  for (std::size_t i = c; i < 2 * c; ++i)
    EXPECT_EQ(out[i], 0.0f);
  for (const std::int32_t untouched : {1, 3, 4, 5, 7}) {
    const std::size_t at = static_cast<std::size_t>(untouched) * s.slot_elems();
    for (std::size_t i = 0; i < s.slot_elems(); ++i)
      ASSERT_EQ(state[at + i], initial[at + i]);
  }
}

TEST(causal_conv_varlen, has_state_zero_starts_from_zeros_whatever_the_slot_holds) {
  const std::uint32_t seed = 14;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const conv_setup s(rng);
  const std::size_t c = static_cast<std::size_t>(s.channels);
  const floats x = random_floats(3 * c, rng);
  floats garbage(static_cast<std::size_t>(s.max_slots) * s.slot_elems(), 1e30f);
  floats zeros(garbage.size(), 0.0f);
  floats from_garbage(3 * c);
  floats from_zeros(3 * c);
  run_varlen(s, x, from_garbage, {0, 3}, garbage, {4}, {0});
  run_varlen(s, x, from_zeros, {0, 3}, zeros, {4}, {1});
  EXPECT_EQ(from_garbage, from_zeros);
  for (std::size_t i = 0; i < s.slot_elems(); ++i)
    EXPECT_EQ(garbage[4 * s.slot_elems() + i], zeros[4 * s.slot_elems() + i]);
  floats decode_garbage = garbage;
  floats decode_zeros = zeros;
  run_update(s, x.data(), from_garbage.data(), 1, decode_garbage, {2}, {0});
  run_update(s, x.data(), from_zeros.data(), 1, decode_zeros, {2});
  for (std::size_t i = 0; i < c; ++i)
    EXPECT_EQ(from_garbage[i], from_zeros[i]);
}

TEST(causal_conv_varlen,
     keeps_the_newest_input_last_and_applies_the_last_tap_to_the_current_token) {
  std::mt19937 rng(15);
  conv_setup s(rng, 1, 4);
  s.bias = {0.0f};
  s.silu = false;
  floats state(s.slot_elems() * 2, 0.0f);
  state[3] = 1.0f;  // slot 1 holds [1, 2, 3], oldest first
  state[4] = 2.0f;
  state[5] = 3.0f;
  s.weight = {0.0f, 0.0f, 0.0f, 1.0f};
  floats out(2);
  run_varlen(s, {10.0f, 20.0f}, out, {0, 2}, state, {1}, {1});
  EXPECT_EQ(out, (floats{10.0f, 20.0f}));
  EXPECT_EQ(floats(state.begin() + 3, state.end()), (floats{3.0f, 10.0f, 20.0f}));
  s.weight = {1.0f, 0.0f, 0.0f, 0.0f};  // the oldest tap reads the window's first column
  floats one(1);
  const float thirty = 30.0f;
  run_update(s, &thirty, one.data(), 1, state, {1});
  EXPECT_EQ(one[0], 3.0f);
  EXPECT_EQ(floats(state.begin() + 3, state.end()), (floats{10.0f, 20.0f, 30.0f}));
}

TEST(causal_conv_varlen, reads_a_strided_column_slice_like_a_dense_input) {
  const std::uint32_t seed = 16;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const conv_setup s(rng);
  const std::size_t c = static_cast<std::size_t>(s.channels);
  const std::size_t wide = c + 7;
  const floats projected = random_floats(6 * wide, rng);
  floats dense(6 * c);
  for (std::size_t t = 0; t < 6; ++t) {
    for (std::size_t i = 0; i < c; ++i)
      dense[t * c + i] = projected[t * wide + 3 + i];
  }
  floats state_a(static_cast<std::size_t>(s.max_slots) * s.slot_elems(), 0.0f);
  floats state_b = state_a;
  floats out_a(6 * c);
  floats out_b(6 * c);
  const ints cu{0, 4, 6};
  const ints slots{1, 2};
  const flags has{0, 0};
  run_varlen(s, dense, out_a, cu, state_a, slots, has);
  causal_conv_varlen({s.weights(), projected.data() + 3, static_cast<std::int64_t>(wide),
                      out_b.data(), cu, state_b.data(), slots, has});
  EXPECT_EQ(out_a, out_b);
  EXPECT_EQ(state_a, state_b);
}

floats json_floats(const nlohmann::json& j) {
  return j.get<floats>();
}

TEST(causal_conv_varlen, matches_transformers_torch_conv_with_its_cache) {
  std::ifstream in(std::string(MSTAR_FIXTURES_DIR) + "/kernels/mamba2_reference.json");
  ASSERT_TRUE(in) << "missing fixture; see tests/fixtures/kernels/gen_mamba2_reference.py";
  const auto doc = nlohmann::json::parse(in)["conv"];
  std::mt19937 rng(0);
  conv_setup s(rng, doc["channels"].get<std::int32_t>(), doc["width"].get<std::int32_t>());
  s.weight = json_floats(doc["weight"]);
  s.bias = json_floats(doc["bias"]);
  s.silu = doc["silu"].get<bool>();
  floats state(s.slot_elems() * 3, 7.0f);  // garbage the first stage must not read
  std::uint8_t has = 0;
  for (const auto& stage : doc["stages"]) {
    const auto n = stage["tokens"].get<std::int32_t>();
    SCOPED_TRACE("stage of " + std::to_string(n) + " tokens");
    const floats x = json_floats(stage["x"]);
    floats out(x.size());
    if (stage.value("decode", false)) {
      run_update(s, x.data(), out.data(), 1, state, {2});
    } else {
      run_varlen(s, x, out, {0, n}, state, {2}, {has});
    }
    has = 1;
    const floats want_out = json_floats(stage["out"]);
    const floats want_state = json_floats(stage["state"]);
    ASSERT_EQ(out.size(), want_out.size());
    expect_close(out.data(), want_out.data(), out.size(), 1e-5f);
    ASSERT_EQ(want_state.size(), s.slot_elems());
    expect_close(&state[2 * s.slot_elems()], want_state.data(), want_state.size(), 0.0f);
  }
}

}  // namespace
}  // namespace mstar::kernels
