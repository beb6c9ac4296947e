#include "models/vision/image_processor.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <gtest/gtest.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "models/vision/bicubic_resize.hpp"
#include "models/vision/smart_resize.hpp"
#include "tests/models/image_fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models::vision {
namespace {

using mstar::test::as_bytes;
using mstar::test::contains;
using mstar::test::image_file;
using mstar::test::images_dir;

// The largest |ours - transformers| over pixel_values, comparing every
// temporal frame of ours with the one frame the fixture keeps.
float max_abs_error(const image_patches& got, const std::vector<float>& want, std::int64_t frames,
                    std::int64_t patch) {
  const std::int64_t plane = patch * patch;
  float worst = 0.0F;
  for (std::int64_t r = 0; r < got.num_patches; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t t = 0; t < frames; ++t) {
        const float* ours = got.pixel_values.data() + r * got.patch_dim + (c * frames + t) * plane;
        const float* theirs = want.data() + (r * 3 + c) * plane;
        for (std::int64_t i = 0; i < plane; ++i)
          worst = std::max(worst, std::abs(ours[i] - theirs[i]));
      }
    }
  }
  return worst;
}

// Every pipeline case of the fixture (no resize, up, down from a JPEG, Python's
// round-half-even, one side only, Qwen2-VL's spelling and CLIP's mean and std):
// grid_thw identical, pixel_values within 1e-6 (the resize reproduces torch's
// uint8 arithmetic, so the measured error is the float32 normalisation's: 0).
TEST(image_processor, matches_transformers_pixel_values_and_grid) {
  const auto& tensors = mstar::test::expected_image_tensors();
  ASSERT_TRUE(tensors) << tensors.error().to_string();
  for (const auto& entry : mstar::test::expected_image_cases()["pipeline"]) {
    const std::string name = entry["name"];
    SCOPED_TRACE(name);
    const auto config =
        image_processor_config::load(images_dir() + "/" + entry["config"].get<std::string>());
    ASSERT_TRUE(config) << config.error().to_string();
    const auto patches = preprocess_image(as_bytes(image_file(entry["image"])), *config);
    ASSERT_TRUE(patches) << patches.error().to_string();

    const auto grid = mstar::test::tensor_bytes(*tensors, name + ".image_grid_thw");
    ASSERT_EQ(grid.size(), 3 * sizeof(std::int64_t));
    std::array<std::int64_t, 3> want_grid{};
    std::memcpy(want_grid.data(), grid.data(), grid.size());
    EXPECT_EQ(patches->grid_thw, want_grid);
    EXPECT_EQ(patches->resized, (image_size{entry["resized"][0], entry["resized"][1]}));
    EXPECT_EQ(image_token_count(patches->grid_thw, config->merge_size),
              entry["image_tokens"].get<std::int64_t>());
    EXPECT_EQ(patches->patch_dim,
              3 * config->temporal_patch_size * config->patch_size * config->patch_size);

    const auto* view = tensors->find(name + ".pixel_values");
    ASSERT_NE(view, nullptr);
    const auto want = to_float32(*view);
    ASSERT_TRUE(want) << want.error().to_string();
    ASSERT_EQ(static_cast<std::int64_t>(want->size()) * config->temporal_patch_size,
              patches->num_patches * patches->patch_dim);
    const float error =
        max_abs_error(*patches, *want, config->temporal_patch_size, config->patch_size);
    std::cout << "[ image    ] " << name << ": max |pixel_values - transformers| = " << error
              << " (PIL backend would differ by " << entry["pil_backend_max_abs_diff"] << ")\n";
    EXPECT_LE(error, 1e-6F);
  }
}

TEST(image_processor, counts_image_tokens_from_the_size_alone) {
  const auto config = image_processor_config::load(images_dir());
  ASSERT_TRUE(config) << config.error().to_string();
  for (const auto& entry : mstar::test::expected_image_cases()["pipeline"]) {
    if (entry["config"] != "preprocessor_config.json")
      continue;
    SCOPED_TRACE(entry["name"].get<std::string>());
    const auto tokens =
        image_token_count(image_size{entry["input_size"][0], entry["input_size"][1]}, *config);
    ASSERT_TRUE(tokens) << tokens.error().to_string();
    EXPECT_EQ(*tokens, entry["image_tokens"].get<std::int64_t>());
  }
  // Qwen3.5's own bounds: a 4032 x 3024 (w x h) photo becomes 4032 x 3008
  // pixels, 252 x 188 patches, 11844 tokens.
  auto qwen35 = image_processor_config::parse(
      R"({"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
          "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
          "image_std": [0.5, 0.5, 0.5]})");
  ASSERT_TRUE(qwen35) << qwen35.error().to_string();
  const auto photo = image_token_count(image_size{3024, 4032}, *qwen35);
  ASSERT_TRUE(photo);
  EXPECT_EQ(*photo, 11844);
  EXPECT_EQ(image_token_count({1, 6, 10}, 2), 15);
}

// smart_resize against transformers' on 356 sizes and bounds, errors included.
TEST(image_smart_resize, agrees_with_transformers_on_every_fixture_case) {
  std::ifstream in{images_dir() + "/smart_resize.jsonl"};
  ASSERT_TRUE(in);
  int cases = 0;
  int errors = 0;
  for (std::string line; std::getline(in, line);) {
    const auto c = nlohmann::json::parse(line);
    const auto& a = c[0];
    SCOPED_TRACE(line);
    const auto got = smart_resize(a[0], a[1], a[2], a[3], a[4]);
    if (c[1].is_string()) {
      ++errors;
      ASSERT_FALSE(got);
      EXPECT_EQ(got.error().message(), c[1].get<std::string>());
    } else {
      ASSERT_TRUE(got) << got.error().to_string();
      EXPECT_EQ(got->height, c[1][0].get<std::int64_t>());
      EXPECT_EQ(got->width, c[1][1].get<std::int64_t>());
    }
    ++cases;
  }
  EXPECT_EQ(cases, 356);
  EXPECT_EQ(errors, 36);
}

TEST(image_smart_resize, rounds_ties_to_even_as_python_does) {
  // 80 / 32 = 2.5 -> 2 and 48 / 32 = 1.5 -> 2: 64 x 64.
  const auto size = smart_resize(48, 80, 32, 1024, 4096);
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, (image_size{64, 64}));
}

TEST(image_smart_resize, refuses_extreme_aspect_ratios_and_bad_arguments) {
  const auto tall = smart_resize(1000, 4, 32, 1024, 4096);
  ASSERT_FALSE(tall);
  EXPECT_EQ(tall.error().message(), "absolute aspect ratio must be smaller than 200, got 250.0");
  EXPECT_TRUE(smart_resize(200, 1, 32, 1024, 4096));  // exactly 200 is allowed
  EXPECT_TRUE(contains(smart_resize(0, 10, 32, 1024, 4096).error().message(),
                       "height must be in [1, 2147483648], got 0"));
  EXPECT_TRUE(contains(smart_resize(10, 10, 0, 1024, 4096).error().message(), "factor"));
  EXPECT_TRUE(contains(smart_resize(10, 10, 32, -1, 4096).error().message(), "min_pixels"));
  EXPECT_TRUE(contains(
      smart_resize(std::int64_t{1} << 27, std::int64_t{1} << 27, 32, 1024, 4096).error().message(),
      "is above 2^53 pixels"));
}

TEST(image_smart_resize, scales_tiny_images_up_to_min_pixels) {
  const auto size = smart_resize(1, 1, 32, 65536, 16777216);
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, (image_size{256, 256}));
}

TEST(image_processor, repeats_an_image_over_the_temporal_patch) {
  auto config = image_processor_config::parse(
      R"({"size": {"longest_edge": 4096, "shortest_edge": 1024}, "patch_size": 16,
          "temporal_patch_size": 3, "merge_size": 2, "image_mean": 0.5, "image_std": 0.5})");
  ASSERT_TRUE(config) << config.error().to_string();
  const auto patches = preprocess_image(as_bytes(image_file("rgb_64x32.png")), *config);
  ASSERT_TRUE(patches) << patches.error().to_string();
  EXPECT_EQ(patches->patch_dim, 3 * 3 * 16 * 16);
  EXPECT_EQ(patches->grid_thw, (std::array<std::int64_t, 3>{1, 2, 4}));
  for (std::int64_t r = 0; r < patches->num_patches; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) {
      const float* frame0 = patches->pixel_values.data() + r * patches->patch_dim + c * 3 * 256;
      for (std::int64_t t = 1; t < 3; ++t)
        EXPECT_TRUE(std::equal(frame0, frame0 + 256, frame0 + t * 256));
    }
  }
}

TEST(image_processor, orders_patches_by_merge_group) {
  // A 64 x 64 image whose every 16 x 16 patch is one grey level, its raster
  // index; with merge 2 the rows come as groups of 2 x 2 patches.
  rgb_image image;
  image.width = 64;
  image.height = 64;
  image.pixels.resize(64 * 64 * 3);
  for (std::int64_t y = 0; y < 64; ++y)
    for (std::int64_t x = 0; x < 64; ++x)
      for (int c = 0; c < 3; ++c)
        image.pixels[(y * 64 + x) * 3 + c] = static_cast<std::uint8_t>((y / 16) * 4 + x / 16);
  image_processor_config config;
  config.patch_size = 16;
  config.min_pixels = 4096;
  config.max_pixels = 4096;
  config.do_normalize = false;
  config.do_rescale = false;
  const auto patches = preprocess_image(image, config);
  ASSERT_TRUE(patches) << patches.error().to_string();
  const std::array<float, 16> order{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  for (std::int64_t r = 0; r < 16; ++r)
    EXPECT_EQ(patches->pixel_values[r * patches->patch_dim], order[r]) << "row " << r;
}

TEST(image_processor, refuses_unaligned_images_when_resizing_is_off) {
  image_processor_config config;
  config.patch_size = 16;
  config.do_resize = false;
  rgb_image image;
  image.width = 48;
  image.height = 32;
  image.pixels.resize(48 * 32 * 3);
  const auto patches = preprocess_image(image, config);
  ASSERT_FALSE(patches);
  EXPECT_TRUE(contains(patches.error().message(), "multiples of patch_size * merge_size = 32"));
  image.width = 64;
  image.pixels.resize(64 * 32 * 3);
  EXPECT_TRUE(preprocess_image(image, config));
  EXPECT_FALSE(preprocess_image(rgb_image{}, config));
}

TEST(image_processor, passes_decode_errors_through) {
  const auto config = image_processor_config::load(images_dir());
  ASSERT_TRUE(config);
  const auto patches = preprocess_image(as_bytes("GIF89a"), *config);
  ASSERT_FALSE(patches);
  EXPECT_EQ(patches.error().code(), errc::unsupported);
}

TEST(image_bicubic_resize, weights_follow_torch_precision_rule) {
  // Upscaling puts a weight near 1 somewhere: 2^14 keeps 2 * w below 2^15.
  const auto up = bicubic_resize_weights(12, 32);
  EXPECT_EQ(up.precision, 14U);
  EXPECT_EQ(up.stride, 5);
  // Shrinking 150 -> 32 spreads each output over ~19 inputs: smaller weights,
  // more fractional bits.
  const auto down = bicubic_resize_weights(150, 32);
  EXPECT_GT(down.precision, 14U);
  for (std::int64_t i = 0; i < 32; ++i) {
    std::int64_t sum = 0;
    for (std::int64_t j = 0; j < down.count[i]; ++j)
      sum += down.weights[i * down.stride + j];
    EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(1 << down.precision), 8.0);
  }
}

}  // namespace
}  // namespace mstar::models::vision
