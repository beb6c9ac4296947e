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

}  // namespace
}  // namespace mstar::kernels
