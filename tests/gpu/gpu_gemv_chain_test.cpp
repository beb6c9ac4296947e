// The persistent GEMV chain (kernels/cuda/gemv_chain.hpp): each link's
// output is the bits of activation_linear_bf16 (no function, GEMV entry 5)
// of the link's input as the chain left it, launch after launch, rows
// fixed or grabbed (the counters come back zeroed); the first link's within the bf16 budget of the
// CPU's product; what it does not take is refused before any launch.
#include <cmath>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "kernels/cuda/gemv_chain.hpp"
#include "kernels/cuda/math.hpp"
#include "tests/gpu/gemv_fold_harness.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;
using test_gemv::rounded_to_bf16;

// (n, k) of each link, link i reading the first k floats of link i - 1's
// output (link 0 an input row): the 0.56B Nemotron-H's out_proj, MLP up,
// down and in_proj (down's K 8192, the widest), then links narrower than the
// grid's warps, with a last chunk part empty (K 1000), one row, and K 8.
struct link_shape {
  std::int32_t n, k;
};
constexpr link_shape chain_shapes[] = {{2048, 4096}, {8192, 2048}, {2048, 8192}, {10304, 2048},
                                       {1001, 4096}, {257, 1000},  {1, 256},     {64, 8}};

TEST(gpu_gemv_chain, equals_the_activation_gemv_bit_for_bit_launch_after_launch) {
  MSTAR_REQUIRE_GPU();
  auto blas = cuda::blas_handle::make();
  ASSERT_TRUE(blas.has_value()) << blas.error().to_string();
  auto rng = test::gpu::seeded(1707);
  constexpr std::size_t count = std::size(chain_shapes);
  // Weights scaled so the chain's values stay finite and of order one.
  std::vector<test::gpu::device_vector<std::uint16_t>> weights;
  std::vector<std::vector<float>> host_w;
  for (const auto& s : chain_shapes) {
    const float bound = 1.7F / std::sqrt(static_cast<float>(s.k));
    auto w = rng.floats(static_cast<std::size_t>(s.n) * s.k, -bound, bound);
    weights.push_back(upload(rounded_to_bf16(w)));
    host_w.push_back(std::move(w));
  }
  const auto x0 = rng.floats(8192, -2.0F, 2.0F);
  const auto d_x0 = upload(x0);
  std::vector<test::gpu::device_vector<float>> outs;
  for (const auto& s : chain_shapes)
    outs.push_back(poisoned<float>(static_cast<std::size_t>(s.n)));
  std::vector<cuda::gemv_chain_link> links;
  for (std::size_t i = 0; i < count; ++i) {
    const float* in = i == 0 ? d_x0.data() : outs[i - 1].data();
    links.push_back({weights[i].data(), in, outs[i].data(), chain_shapes[i].n, chain_shapes[i].k});
  }
  ASSERT_TRUE(cuda::gemv_chain_fits(links));
  auto counters = poisoned<std::uint32_t>(cuda::gemv_chain_counter_bytes / 4, 0);
  // The same links as separate GEMVs, each on the chain's own input.
  const auto expect_links_are_gemvs = [&] {
    for (std::size_t i = 0; i < count; ++i) {
      SCOPED_TRACE("link " + std::to_string(i));
      const auto& s = chain_shapes[i];
      auto single = poisoned<float>(static_cast<std::size_t>(s.n));
      cuda::activation_linear_bf16_params p;
      p.x = contiguous<const float>(links[i].in, std::array<std::int64_t, 2>{1, s.k});
      p.weight =
          contiguous<const std::uint16_t>(weights[i].data(), std::array<std::int64_t, 2>{s.n, s.k});
      p.out_f32 = contiguous(single.data(), std::array<std::int64_t, 2>{1, s.n});
      p.gemv_variant = 5;
      ASSERT_TRUE(cuda::activation_linear_bf16_fits(p));
      ASSERT_EQ(cuda::activation_linear_bf16(p, nullptr), cudaSuccess);
      const auto got = outs[i].download();
      EXPECT_EQ(test::gpu::bytes_of(got), test::gpu::bytes_of(single.download()));
      for (const float v : got)
        ASSERT_TRUE(std::isfinite(v)) << "the chain's values stay finite";
    }
  };
  // Launches alternate the row modes on the same counters.
  for (int launch = 0; launch < 4; ++launch) {
    const auto rows =
        launch % 2 == 0 ? cuda::gemv_chain_rows::grabbed : cuda::gemv_chain_rows::fixed;
    SCOPED_TRACE("launch " + std::to_string(launch) +
                 (rows == cuda::gemv_chain_rows::grabbed ? " grabbed" : " fixed"));
    for (auto& o : outs)
      ASSERT_EQ(cudaMemset(o.data(), 0xff, o.bytes()), cudaSuccess);
    ASSERT_EQ(cuda::gemv_chain(links, counters.data(), nullptr, rows), cudaSuccess);
    test::gpu::expect_device_ok();
    EXPECT_EQ(counters.download(),
              std::vector<std::uint32_t>(cuda::gemv_chain_counter_bytes / 4, 0U))
        << "every launch leaves its counters zeroed";
    expect_links_are_gemvs();
  }
  // Link 0 against the CPU: the rounded input times the rounded weights.
  std::vector<float> in(x0.begin(), x0.begin() + chain_shapes[0].k);
  (void)rounded_to_bf16(in);
  const auto ref =
      test_gemv::cpu_row_product(in, host_w[0], {}, false, chain_shapes[0].k, chain_shapes[0].n);
  EXPECT_TRUE(test::gpu::within(outs[0].download(), ref, test::gpu::budget::bf16_in_f32_out));
}

TEST(gpu_gemv_chain, refuses_what_it_does_not_take) {
  // Checked before any device call: runs without a GPU too.
  alignas(16) static std::uint16_t w[64];
  alignas(16) static float x[64];
  static float y[64];
  const cuda::gemv_chain_link good{w, x, y, 8, 8};
  struct refused_case {
    cuda::gemv_chain_link link;
    const char* name;
  };
  const refused_case cases[] = {
      {{nullptr, x, y, 8, 8}, "no weight"},
      {{w, nullptr, y, 8, 8}, "no input"},
      {{w, x, nullptr, 8, 8}, "no output"},
      {{w, x, y, 0, 8}, "no outputs"},
      {{w, x, y, 8, 12}, "K not a multiple of 8"},
      {{w, x, y, 8, cuda::gemv_chain_max_k + 8}, "K past the shared row"},
      {{w + 1, x, y, 8, 8}, "weight off 16 bytes"},
      {{w, x + 1, y, 8, 8}, "input off 16 bytes"},
  };
  static std::uint32_t counters[cuda::gemv_chain_counter_bytes / 4];
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<cuda::gemv_chain_link> links{good, c.link};
    EXPECT_FALSE(cuda::gemv_chain_fits(links));
    EXPECT_EQ(cuda::gemv_chain(links, counters, nullptr), cudaErrorInvalidValue);
  }
  EXPECT_TRUE(cuda::gemv_chain_fits(std::vector<cuda::gemv_chain_link>{good}));
  EXPECT_FALSE(cuda::gemv_chain_fits({})) << "no links";
  const std::vector<cuda::gemv_chain_link> too_many(cuda::gemv_chain_max_links + 1, good);
  EXPECT_FALSE(cuda::gemv_chain_fits(too_many));
  EXPECT_EQ(cuda::gemv_chain(std::vector<cuda::gemv_chain_link>{good}, nullptr, nullptr),
            cudaErrorInvalidValue)
      << "no counters";
}

}  // namespace
}  // namespace mstar::kernels
