#include "kernels/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <numeric>
#include <vector>

#include "tests/kernels/random_tensors.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

constexpr float infinity = std::numeric_limits<float>::infinity();

view<const float, 1> row(const std::vector<float>& logits) {
  return contiguous(logits.data(),
                    std::array<std::int64_t, 1>{static_cast<std::int64_t>(logits.size())});
}

// The filters written the long way: full softmax of logits / T, sort by
// probability (ties to lower id), cut to k, renormalise, cut to the shortest
// prefix reaching mass p, renormalise.
std::vector<token_probability> reference(const std::vector<float>& logits, double temperature,
                                         std::size_t top_k, double top_p) {
  std::vector<token_probability> all;
  double total = 0;
  for (std::size_t i = 0; i < logits.size(); ++i)
    total += std::exp(logits[i] / temperature);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    all.push_back({static_cast<std::int32_t>(i), std::exp(logits[i] / temperature) / total});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.probability > b.probability; });
  if (top_k != 0 && top_k < all.size())
    all.resize(top_k);
  const auto renormalise = [&] {
    double mass = 0;
    for (const auto& c : all)
      mass += c.probability;
    for (auto& c : all)
      c.probability /= mass;
  };
  renormalise();
  double mass = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    mass += all[i].probability;
    if (mass >= top_p) {
      all.resize(i + 1);
      break;
    }
  }
  renormalise();
  return all;
}

TEST(sampling, greedy_takes_the_argmax_with_ties_to_the_lowest_id) {
  const std::vector<float> logits{1, 5, 5, 2, -infinity};
  EXPECT_EQ(*sample({row(logits)}), 1);
  sampling_params p{row(logits), 0.8F, 1};  // top_k = 1 is greedy at any temperature
  for (std::uint64_t counter = 0; counter < 20; ++counter) {
    p.counter = counter;
    EXPECT_EQ(*sample(p), 1);
  }
  const auto dist = *sampling_distribution({row(logits)});
  ASSERT_EQ(dist.size(), 1U);
  EXPECT_EQ(dist[0].id, 1);
  EXPECT_EQ(dist[0].probability, 1.0);
}

TEST(sampling, distribution_matches_the_filters_written_the_long_way) {
  struct setting {
    float temperature;
    std::int32_t top_k;
    float top_p;
  };
  std::uint64_t seed = 90;
  for (const auto s : {setting{1.0F, 0, 1.0F}, setting{0.7F, 10, 1.0F}, setting{1.3F, 0, 0.8F},
                       setting{0.5F, 12, 0.6F}, setting{2.0F, 100, 0.95F}}) {
    test::random_tensors rng{++seed};
    const auto logits = rng.floats(50, -3, 3);
    const auto got = sampling_distribution({row(logits), s.temperature, s.top_k, s.top_p});
    ASSERT_TRUE(got) << got.error().to_string();
    const auto want = reference(logits, s.temperature, static_cast<std::size_t>(s.top_k), s.top_p);
    ASSERT_EQ(got->size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*got)[i].id, want[i].id) << "rank " << i;
      EXPECT_NEAR((*got)[i].probability, want[i].probability, 1e-12) << "rank " << i;
    }
  }
}

TEST(sampling, a_draw_is_the_inverse_cdf_of_the_seeded_uniform) {
  test::random_tensors rng{100};
  const auto logits = rng.floats(30, -2, 2);
  sampling_params p{row(logits), 0.9F, 20, 0.9F, 1234};
  const auto dist = *sampling_distribution(p);
  for (std::uint64_t counter = 0; counter < 200; ++counter) {
    p.counter = counter;
    const double u = xoshiro256ss{p.seed, counter}.uniform();
    double cumulative = 0;
    std::int32_t want = dist.back().id;
    for (const auto& c : dist) {
      cumulative += c.probability;
      if (u < cumulative) {
        want = c.id;
        break;
      }
    }
    ASSERT_EQ(*sample(p), want) << "counter " << counter;
    EXPECT_EQ(*sample(p), want) << "the same (seed, counter) must give the same token";
  }
}

TEST(sampling, frequencies_follow_the_distribution_and_filters_exclude_tokens) {
  const std::vector<float> logits{2.0F, 1.0F, 0.5F, 0.0F, -infinity, -1.0F};
  sampling_params p{row(logits), 1.0F, 4, 1.0F, 77};
  // Expected frequencies from the long-way reference, not the sampler's own
  // distribution.
  const auto dist = reference(logits, 1.0, 4, 1.0);
  std::vector<int> counts(logits.size(), 0);
  constexpr int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    p.counter = static_cast<std::uint64_t>(i);
    ++counts[static_cast<std::size_t>(*sample(p))];
  }
  EXPECT_EQ(counts[4], 0) << "a -inf logit was sampled";
  EXPECT_EQ(counts[5], 0) << "a token outside the top 4 was sampled";
  for (const auto& c : dist) {
    EXPECT_NEAR(counts[static_cast<std::size_t>(c.id)] / double{draws}, c.probability, 0.015)
        << "token " << c.id;
  }
}

TEST(sampling, a_tiny_top_p_keeps_only_the_most_likely_token) {
  const std::vector<float> logits{0.1F, 3.0F, 0.2F};
  const auto dist = *sampling_distribution({row(logits), 1.0F, 0, 0.01F});
  ASSERT_EQ(dist.size(), 1U);
  EXPECT_EQ(dist[0].id, 1);
}

TEST(sampling, invalid_settings_and_logits_are_named) {
  const std::vector<float> logits{0, 1};
  const std::vector<float> nan_logits{0, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> masked{-infinity, -infinity};
  const std::vector<float> empty;
  const auto message = [](const sampling_params& p) {
    const auto r = sample(p);
    return r ? std::string{"(sampled)"} : r.error().message();
  };
  EXPECT_TRUE(test::contains(message({row(logits), -1.0F}), "temperature"));
  EXPECT_TRUE(test::contains(message({row(logits), 1.0F, -2}), "top_k"));
  EXPECT_TRUE(test::contains(message({row(logits), 1.0F, 0, 0.0F}), "top_p"));
  EXPECT_TRUE(test::contains(message({row(logits), 1.0F, 0, 1.5F}), "top_p"));
  EXPECT_TRUE(test::contains(message({row(nan_logits), 1.0F}), "logits[1]"));
  EXPECT_TRUE(test::contains(message({row(masked), 1.0F}), "every entry is -inf"));
  EXPECT_TRUE(test::contains(message({row(empty)}), "empty"));
}

// vectors/xoshiro256ss.json: computed by tests/fixtures/make_xoshiro_vectors.py
// (plain Python, independent of this library); its raw-state outputs start
// with the published 11520, 0, 1509978240, 1215971899390074240.
TEST(xoshiro256ss, gives_the_published_outputs_from_the_state_1_2_3_4) {
  const auto vectors = test::load_fixture_json("vectors/xoshiro256ss.json");
  const auto& raw = vectors.at("raw_state");
  auto g = xoshiro256ss::from_state(raw.at("state").get<std::array<std::uint64_t, 4>>());
  const auto outputs = raw.at("outputs").get<std::vector<std::uint64_t>>();
  ASSERT_GE(outputs.size(), 4U);
  EXPECT_EQ(outputs[0], 11520U);
  EXPECT_EQ(outputs[3], 1215971899390074240U);
  for (std::size_t i = 0; i < outputs.size(); ++i)
    EXPECT_EQ(g.next(), outputs[i]) << "output " << i;
}

TEST(xoshiro256ss, seeding_and_uniform_match_an_independent_implementation) {
  const auto vectors = test::load_fixture_json("vectors/xoshiro256ss.json");
  int checked = 0;
  for (const auto& c : vectors.at("seeded")) {
    const auto seed = c.at("seed").get<std::uint64_t>();
    const auto stream = c.at("stream").get<std::uint64_t>();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", stream " + std::to_string(stream));
    xoshiro256ss g{seed, stream};
    for (const auto want : c.at("outputs").get<std::vector<std::uint64_t>>())
      EXPECT_EQ(g.next(), want);
    EXPECT_EQ(xoshiro256ss(seed, stream).uniform(), c.at("uniform").get<double>());
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// The distribution and every draw of a seeded request against the same
// vectors: the filtered probabilities and the inverse-CDF token per counter
// computed in Python (draws whose uniform lies within 1e-9 of a CDF boundary
// would depend on summation order; the vectors' closest is far wider).
TEST(sampling, distribution_and_draws_match_an_independent_implementation) {
  const auto vectors = test::load_fixture_json("vectors/xoshiro256ss.json");
  const auto& d = vectors.at("draw");
  std::vector<float> logits;
  for (const auto& v : d.at("logits"))
    logits.push_back(static_cast<float>(v.get<double>()));
  sampling_params p{row(logits), static_cast<float>(d.at("temperature").get<double>()),
                    d.at("top_k").get<std::int32_t>(),
                    static_cast<float>(d.at("top_p").get<double>()),
                    d.at("seed").get<std::uint64_t>()};
  const auto dist = sampling_distribution(p);
  ASSERT_TRUE(dist) << dist.error().to_string();
  const auto& want = d.at("distribution");
  ASSERT_EQ(dist->size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*dist)[i].id, want[i].at("id").get<std::int32_t>()) << "rank " << i;
    EXPECT_NEAR((*dist)[i].probability, want[i].at("probability").get<double>(), 1e-12)
        << "rank " << i;
  }
  int checked = 0;
  for (const auto& draw : d.at("draws")) {
    if (draw.at("margin").get<double>() < 1e-9)
      continue;
    p.counter = draw.at("counter").get<std::uint64_t>();
    EXPECT_EQ(*sample(p), draw.at("token").get<std::int32_t>()) << "counter " << p.counter;
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

TEST(xoshiro256ss, is_deterministic_per_seed_and_stream_and_uniform_in_unit_interval) {
  xoshiro256ss a{5, 0}, b{5, 0}, other_stream{5, 1}, other_seed{6, 0};
  int same_as_stream = 0, same_as_seed = 0;
  double sum = 0;
  constexpr int draws = 100000;
  for (int i = 0; i < draws; ++i) {
    const std::uint64_t x = a.next();
    ASSERT_EQ(x, b.next());
    same_as_stream += x == other_stream.next() ? 1 : 0;
    same_as_seed += x == other_seed.next() ? 1 : 0;
    const double u = xoshiro256ss{5, static_cast<std::uint64_t>(i)}.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_EQ(same_as_stream, 0);
  EXPECT_EQ(same_as_seed, 0);
  EXPECT_NEAR(sum / draws, 0.5, 0.005);
}

}  // namespace
}  // namespace mstar::kernels
