#include <cmath>
#include <gtest/gtest.h>
#include <vector>

#include "kernels/math.hpp"
#include "tests/kernels/random_tensors.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

using shape1 = std::array<std::int64_t, 1>;
using shape3 = std::array<std::int64_t, 3>;

// One head rotated the way the model code writes it: per-channel cos and sin
// arrays (frequencies duplicated by halves for NeoX, pairwise for GPT-J) and a
// "rotate" that negates and swaps partners: out = v * cos + rotate(v) * sin.
std::vector<double> reference_head(const float* v, std::size_t head_dim, std::size_t rotary,
                                   double position, double theta, rope_style style) {
  const std::size_t half = rotary / 2;
  std::vector<double> cos(rotary), sin(rotary), rotated(rotary);
  for (std::size_t c = 0; c < rotary; ++c) {
    const std::size_t i = style == rope_style::half_split ? c % half : c / 2;
    const double angle =
        position * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary));
    cos[c] = std::cos(angle);
    sin[c] = std::sin(angle);
    if (style == rope_style::half_split) {
      rotated[c] = c < half ? -double{v[c + half]} : double{v[c - half]};
    } else {
      rotated[c] = c % 2 == 0 ? -double{v[c + 1]} : double{v[c - 1]};
    }
  }
  std::vector<double> out(v, v + head_dim);
  for (std::size_t c = 0; c < rotary; ++c)
    out[c] = v[c] * cos[c] + rotated[c] * sin[c];
  return out;
}

TEST(rope, matches_the_rotate_form_for_both_conventions) {
  std::uint64_t seed = 70;
  for (const rope_style style : {rope_style::half_split, rope_style::interleaved}) {
    for (const std::int64_t rotary : {16, 8}) {
      test::random_tensors rng{++seed};
      SCOPED_TRACE("rotary_dim = " + std::to_string(rotary));
      constexpr std::int64_t tokens = 5, heads = 3, head_dim = 16;
      const auto original = rng.floats(tokens * heads * head_dim);
      const std::vector<std::int32_t> positions{0, 1, 7, 300, 4095};
      auto x = original;
      rope_params p{contiguous(x.data(), shape3{tokens, heads, head_dim}),
                    contiguous(positions.data(), shape1{tokens}),
                    {},
                    500000.0F,
                    rotary,
                    style};
      ASSERT_TRUE(rope(p));
      for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t h = 0; h < heads; ++h) {
          const std::size_t base = (t * heads + h) * head_dim;
          const auto want =
              reference_head(original.data() + base, head_dim, static_cast<std::size_t>(rotary),
                             positions[t], 500000.0, style);
          for (std::size_t c = 0; c < head_dim; ++c) {
            ASSERT_NEAR(x[base + c], want[c], 1e-5)
                << "token " << t << " head " << h << " ch " << c;
          }
        }
      }
    }
  }
}

// Rotates a unit vector along channel `hot` of a 4-wide head at position 1
// (theta 10000: pair 0 turns by 1 radian, pair 1 by 0.01).
std::vector<float> rotate_unit(std::size_t hot, rope_style style) {
  std::vector<float> x(4, 0.0F);
  x[hot] = 1;
  const std::vector<std::int32_t> position{1};
  EXPECT_TRUE(rope({contiguous(x.data(), shape3{1, 1, 4}),
                    contiguous(position.data(), shape1{1}),
                    {},
                    10000.0F,
                    0,
                    style}));
  return x;
}

TEST(rope, hand_computed_unit_vectors_at_position_one) {
  const auto c1 = static_cast<float>(std::cos(1.0)), s1 = static_cast<float>(std::sin(1.0));
  const auto c2 = static_cast<float>(std::cos(0.01)), s2 = static_cast<float>(std::sin(0.01));
  const auto near = [](const std::vector<float>& got, const std::vector<float>& want) {
    for (std::size_t i = 0; i < 4; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6) << "channel " << i;
  };
  near(rotate_unit(0, rope_style::half_split), {c1, 0, s1, 0});  // pair (0, 2)
  near(rotate_unit(1, rope_style::half_split), {0, c2, 0, s2});  // pair (1, 3)
  near(rotate_unit(2, rope_style::half_split), {-s1, 0, c1, 0});
  near(rotate_unit(0, rope_style::interleaved), {c1, s1, 0, 0});  // pair (0, 1)
  near(rotate_unit(2, rope_style::interleaved), {0, 0, c2, s2});  // pair (2, 3)
  near(rotate_unit(1, rope_style::interleaved), {-s1, c1, 0, 0});
}

TEST(rope, explicit_inv_freq_replaces_theta) {
  test::random_tensors rng{80};
  const auto original = rng.floats(2 * 8);
  const std::vector<std::int32_t> positions{3, 9};
  std::vector<float> inv_freq(4);
  for (std::size_t i = 0; i < 4; ++i)
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / 8));
  auto from_theta = original;
  auto from_table = original;
  ASSERT_TRUE(rope(
      {contiguous(from_theta.data(), shape3{2, 1, 8}), contiguous(positions.data(), shape1{2})}));
  ASSERT_TRUE(
      rope({contiguous(from_table.data(), shape3{2, 1, 8}), contiguous(positions.data(), shape1{2}),
            contiguous(inv_freq.data(), shape1{4})}));
  for (std::size_t i = 0; i < original.size(); ++i)
    EXPECT_NEAR(from_table[i], from_theta[i], 1e-5);
}

TEST(rope, rejects_odd_or_oversized_rotary_dim_and_negative_positions) {
  std::vector<float> x(8);
  const std::vector<std::int32_t> ok{0, 1};
  const std::vector<std::int32_t> negative{0, -1};
  rope_params p{contiguous(x.data(), shape3{2, 1, 4}), contiguous(ok.data(), shape1{2})};
  for (const std::int64_t bad : {3, 6}) {
    p.rotary_dim = bad;
    const auto r = rope(p);
    ASSERT_FALSE(r);
    EXPECT_TRUE(test::contains(r.error().message(), "rotary_dim: " + std::to_string(bad)));
  }
  p.rotary_dim = 0;
  p.positions = contiguous(negative.data(), shape1{2});
  const auto r = rope(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::out_of_range);
  EXPECT_TRUE(test::contains(r.error().message(), "positions[1] = -1"));
}

// M-RoPE (Qwen2-VL / Qwen3.5): equal positions are plain half-split rope; with
// distinct positions each frequency pair turns by its component's position
// (interleaved sections: pair 1 height, pair 2 width, pair 0 and the pairs past
// the sections temporal).
TEST(mrope, equals_rope_for_text_and_picks_each_pairs_component_for_images) {
  const std::int64_t tokens = 2, heads = 2, head_dim = 12, rotary = 10, half = rotary / 2;
  std::vector<float> inv_freq(half);
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[static_cast<std::size_t>(i)] =
        static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rotary));
  test::random_tensors rng{7};
  const auto x = rng.floats(static_cast<std::size_t>(tokens * heads * head_dim));
  auto text = x, plain = x;
  const std::vector<std::int32_t> same = {3, 9, 3, 9, 3, 9}, one = {3, 9};
  mrope_params mp{contiguous<float, 3>(text.data(), shape3{tokens, heads, head_dim}),
                  contiguous<const std::int32_t, 2>(same.data(), {3, tokens}),
                  contiguous<const float, 1>(inv_freq.data(), shape1{half}),
                  {2, 1, 1}};
  ASSERT_TRUE(mrope(mp));
  ASSERT_TRUE(rope({contiguous<float, 3>(plain.data(), shape3{tokens, heads, head_dim}),
                    contiguous<const std::int32_t, 1>(one.data(), shape1{tokens}),
                    contiguous<const float, 1>(inv_freq.data(), shape1{half}), 10000.0F, rotary,
                    rope_style::half_split}));
  EXPECT_EQ(text, plain);

  // t = 1, h = 5, w = 11 for token 0: pairs 0, 3, 4 take t, pair 1 h, pair 2 w.
  auto image = x;
  const std::vector<std::int32_t> thw = {1, 0, 5, 0, 11, 0};
  mp.x = contiguous<float, 3>(image.data(), shape3{tokens, heads, head_dim});
  mp.positions = contiguous<const std::int32_t, 2>(thw.data(), {3, tokens});
  ASSERT_TRUE(mrope(mp));
  const int position_of_pair[5] = {1, 5, 11, 1, 1};
  for (std::int64_t i = 0; i < half; ++i) {
    const double angle = position_of_pair[i] * double{inv_freq[static_cast<std::size_t>(i)]};
    const float a = x[static_cast<std::size_t>(i)], b = x[static_cast<std::size_t>(i + half)];
    EXPECT_NEAR(image[static_cast<std::size_t>(i)], a * std::cos(angle) - b * std::sin(angle), 1e-5)
        << "pair " << i;
    EXPECT_NEAR(image[static_cast<std::size_t>(i + half)],
                b * std::cos(angle) + a * std::sin(angle), 1e-5)
        << "pair " << i;
  }
  EXPECT_EQ(image[10], x[10]) << "channels past the rotary span pass through";
}

}  // namespace
}  // namespace mstar::kernels
