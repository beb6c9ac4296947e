// The causal conv on the GPU (kernels/cuda/recurrent.hpp) against the CPU
// reference (kernels/conv.hpp): outputs by normalised error, the whole state
// block exactly (it holds copies of inputs, no arithmetic). Each geometry
// runs two prefill steps on one state block (the second resuming the first's
// slots, as chunked prefill does) and two decode steps (slots trusted, then
// flags). Geometries reach each launch path: 4 channels per lane (widths 2,
// 3, 4), 1 channel per lane (channels or x stride not a multiple of 4, x not
// 16-byte aligned), and the generic kernels (widths past 4).
#include <algorithm>
#include <gtest/gtest.h>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/conv.hpp"
#include "tests/gpu/gpu_support.hpp"

// Own namespace: the GPU tests build as one unity translation unit.
namespace mstar::kernels::conv_test {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

struct conv_geometry {
  std::int32_t channels;
  std::int64_t x_stride;  // 0: channels
  std::int32_t width;
  bool bias;
  bool silu;
  std::size_t x_offset;  // floats before x in its buffer: 1 misaligns it
};

constexpr conv_geometry geometries[] = {
    {300, 320, 4, true, true, 0},   // float4 lanes, x a column slice, lanes past C idle
    {300, 320, 2, true, true, 0},   //   width 2
    {256, 0, 3, false, false, 0},   //   width 3, no bias, plain output, dense x
    {301, 305, 4, true, true, 0},   // 1 channel per lane: C odd
    {300, 322, 4, true, true, 0},   //   x stride not a multiple of 4
    {300, 320, 4, true, false, 1},  //   x not 16-byte aligned
    {64, 64, 5, true, true, 0},     // generic kernels
    {37, 41, 7, false, true, 0},    //   and unaligned
};

// One prefill step: row lengths, slots (distinct, -1 skips), resume flags.
struct conv_batch {
  std::vector<std::int32_t> lengths;
  std::vector<std::int32_t> slots;
  std::vector<std::uint8_t> resume;
};

// Rows shorter than the window (1, 2, 3 tokens, fresh and resumed), empty
// rows, a skipped row, rows of exactly one and of several 16-token lane
// chunks and rows in between, starting at offsets that are not multiples of
// 16. The second step resumes the first's slots with other lengths.
const conv_batch first_step{{5, 0, 1, 2, 17, 64, 3, 1, 2, 16, 33, 15, 0},
                            {4, 1, 6, -1, 0, 2, 5, 7, 8, 9, 3, 10, -1},
                            {1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1}};
const conv_batch second_step{{1, 2, 40, 0, 3, 1, 17, 2, 6, 1, 0, 16, 4},
                             {4, 1, 6, -1, 0, 2, 5, 7, 8, 9, 3, 10, 11},
                             {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}};
constexpr std::int32_t max_slots = 12;

std::vector<std::int32_t> cumulative(const std::vector<std::int32_t>& lens) {
  std::vector<std::int32_t> cu{0};
  for (const auto n : lens)
    cu.push_back(cu.back() + n);
  return cu;
}

// The first element where the device state differs from the CPU's.
::testing::AssertionResult same_state(const std::vector<float>& got,
                                      const std::vector<float>& ref) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << ref.size();
  const auto at = std::mismatch(got.begin(), got.end(), ref.begin());
  if (at.first == got.end())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "state element " << (at.first - got.begin()) << ": "
                                       << *at.first << " vs " << *at.second;
}

// The conv's state block and weights, on the host and the device.
struct conv_fixture {
  conv_geometry g;
  std::vector<float> weight, bias, state;
  test::gpu::device_vector<float> d_weight, d_bias, d_state;

  conv_fixture(test::random_tensors& rng, const conv_geometry& geometry, std::int32_t slots)
      : g(geometry),
        weight(rng.floats(static_cast<std::size_t>(g.channels) * g.width)),
        bias(rng.floats(static_cast<std::size_t>(g.channels))),
        state(rng.floats(static_cast<std::size_t>(slots) * g.channels * (g.width - 1))),
        d_weight(upload(weight)),
        d_bias(upload(bias)),
        d_state(upload(state)) {}

  [[nodiscard]] conv_weights host() const {
    return {weight.data(), g.bias ? bias.data() : nullptr, g.channels, g.width, g.silu};
  }
  [[nodiscard]] conv_weights device() const {
    return {d_weight.data(), g.bias ? d_bias.data() : nullptr, g.channels, g.width, g.silu};
  }
  [[nodiscard]] std::int64_t stride() const { return g.x_stride != 0 ? g.x_stride : g.channels; }

  // x for `tokens` tokens: the host copy, and the device one `x_offset`
  // floats into its buffer.
  std::pair<std::vector<float>, test::gpu::device_vector<float>> inputs(test::random_tensors& rng,
                                                                        std::int64_t tokens) {
    auto x = rng.floats(static_cast<std::size_t>(tokens * stride()), -3.0F, 3.0F);
    std::vector<float> padded(g.x_offset, 0.0F);
    padded.insert(padded.end(), x.begin(), x.end());
    return {std::move(x), upload(padded)};
  }

  void prefill(test::random_tensors& rng, const conv_batch& b) {
    const auto cu = cumulative(b.lengths);
    auto in = inputs(rng, cu.back());
    std::vector<float> ref(static_cast<std::size_t>(cu.back()) * g.channels);
    causal_conv_varlen(
        {host(), in.first.data(), g.x_stride, ref.data(), cu, state.data(), b.slots, b.resume});
    const auto d_cu = upload(cu);
    const auto d_slots = upload(b.slots);
    const auto d_resume = upload(b.resume);
    auto d_out = poisoned<float>(ref.size());
    ASSERT_EQ(
        cuda::causal_conv_varlen({device(), in.second.data() + g.x_offset, g.x_stride, d_out.data(),
                                  d_cu.span(), d_state.data(), d_slots.span(), d_resume.span()},
                                 nullptr),
        cudaSuccess);
    EXPECT_TRUE(within(d_out.download(), ref, budget::recurrent)) << "varlen output";
    EXPECT_TRUE(same_state(d_state.download(), state)) << "varlen state";
  }

  void decode(test::random_tensors& rng, const conv_batch& b, bool flags) {
    const auto batch = static_cast<std::int32_t>(b.slots.size());
    auto in = inputs(rng, batch);
    std::vector<float> ref(static_cast<std::size_t>(batch) * g.channels);
    const std::span<const std::uint8_t> has =
        flags ? std::span{b.resume} : std::span<const std::uint8_t>{};
    causal_conv_update(
        {host(), in.first.data(), g.x_stride, ref.data(), batch, state.data(), b.slots, has});
    const auto d_slots = upload(b.slots);
    const auto d_resume = upload(b.resume);
    auto d_out = poisoned<float>(ref.size());
    ASSERT_EQ(cuda::causal_conv_update({device(), in.second.data() + g.x_offset, g.x_stride,
                                        d_out.data(), batch, d_state.data(), d_slots.span(),
                                        flags ? d_resume.span() : std::span<const std::uint8_t>{}},
                                       nullptr),
              cudaSuccess);
    EXPECT_TRUE(within(d_out.download(), ref, budget::recurrent)) << "update output";
    EXPECT_TRUE(same_state(d_state.download(), state)) << "update state";
  }
};

std::string label(const conv_geometry& g) {
  return "C " + std::to_string(g.channels) + " stride " + std::to_string(g.x_stride) + " W " +
         std::to_string(g.width) + (g.bias ? " bias" : "") + (g.silu ? " silu" : "") +
         " x offset " + std::to_string(g.x_offset);
}

TEST(gpu_conv, varlen_and_update_match_outputs_and_state) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(501);
  for (const auto& g : geometries) {
    SCOPED_TRACE(label(g));
    conv_fixture f(rng, g, max_slots);
    {
      SCOPED_TRACE("first prefill step");
      f.prefill(rng, first_step);
    }
    {
      SCOPED_TRACE("second prefill step, resuming");
      f.prefill(rng, second_step);
    }
    for (const bool flags : {false, true}) {
      SCOPED_TRACE(flags ? "decode with flags" : "decode trusting the slots");
      f.decode(rng, second_step, flags);
    }
  }
}

// Model-sized channels (Mamba-2 h64: 64 x 64 + 2 x 8 x 128) and long rows,
// so the persistent grid's warps take several items each; rows resumed and
// fresh, one shorter than a lane chunk.
TEST(gpu_conv, long_rows_at_model_width_match) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(503);
  const conv_geometry g{6144, 6144 + 64, 4, true, true, 0};
  conv_fixture f(rng, g, 4);
  const conv_batch step{{700, 9, 1500, 31}, {2, 0, 3, 1}, {1, 0, 0, 1}};
  f.prefill(rng, step);
  f.decode(rng, step, false);
}

}  // namespace
}  // namespace mstar::kernels::conv_test
