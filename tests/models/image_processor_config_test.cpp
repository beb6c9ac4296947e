#include "models/vision/image_processor_config.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/models/image_fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models::vision {
namespace {

using json = nlohmann::json;
using mstar::test::contains;

// Qwen3.5's preprocessor_config.json as published (Qwen/Qwen3.5-9B).
json qwen35() {
  return json::parse(R"({
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"})");
}

result<image_processor_config> parse(const json& config) {
  return image_processor_config::parse(config.dump());
}

std::string error_of(const json& config) {
  const auto parsed = parse(config);
  return parsed ? std::string{"<parsed>"} : parsed.error().message();
}

TEST(image_processor_config, reads_qwen35_fields) {
  const auto c = parse(qwen35());
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->patch_size, 16);
  EXPECT_EQ(c->temporal_patch_size, 2);
  EXPECT_EQ(c->merge_size, 2);
  EXPECT_EQ(c->min_pixels, 65536);
  EXPECT_EQ(c->max_pixels, 16777216);
  EXPECT_EQ(c->image_mean, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_EQ(c->image_std, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_DOUBLE_EQ(c->rescale_factor, 1.0 / 255.0);
  EXPECT_EQ(c->factor(), 32);
  EXPECT_EQ(c->patch_dim(), 1536);
}

TEST(image_processor_config, reads_the_fixture_configs_from_a_folder_or_a_file) {
  const auto folder = image_processor_config::load(mstar::test::images_dir());
  ASSERT_TRUE(folder) << folder.error().to_string();
  EXPECT_EQ(folder->min_pixels, 1024);
  EXPECT_EQ(folder->max_pixels, 4096);
  const auto qwen2vl =
      image_processor_config::load(mstar::test::images_dir() + "/preprocessor_config_qwen2vl.json");
  ASSERT_TRUE(qwen2vl) << qwen2vl.error().to_string();
  EXPECT_EQ(qwen2vl->min_pixels, 256);
  EXPECT_EQ(qwen2vl->max_pixels, 1024);
  EXPECT_EQ(qwen2vl->image_mean[0], 0.48145466);  // OpenAI CLIP's, by default
  const mstar::test::temp_folder empty;
  const auto missing = image_processor_config::load(empty.path());
  ASSERT_FALSE(missing);
  EXPECT_TRUE(contains(missing.error().message(), "preprocessor_config.json: no such file"));
}

TEST(image_processor_config, keeps_the_processor_defaults_for_absent_fields) {
  const auto c = image_processor_config::parse("{}");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->patch_size, 14);
  EXPECT_EQ(c->min_pixels, 56 * 56);
  EXPECT_EQ(c->max_pixels, 28 * 28 * 1280);
  EXPECT_TRUE(c->do_resize && c->do_rescale && c->do_normalize);
}

TEST(image_processor_config, lets_min_and_max_pixels_override_size) {
  json c = qwen35();
  c["min_pixels"] = 3136;
  c["max_pixels"] = 12845056;
  const auto parsed = parse(c);
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->min_pixels, 3136);
  EXPECT_EQ(parsed->max_pixels, 12845056);
  c["size"] = {{"max_pixels", 1}};  // transformers' resize would fail: no shortest_edge
  c.erase("min_pixels");
  EXPECT_TRUE(contains(error_of(c), "field 'size': needs 'shortest_edge' and 'longest_edge'"));
}

TEST(image_processor_config, accepts_one_number_for_every_channel) {
  json c = qwen35();
  c["image_mean"] = 0.25;
  const auto parsed = parse(c);
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->image_mean, (std::array<double, 3>{0.25, 0.25, 0.25}));
}

TEST(image_processor_config, names_the_bad_field) {
  const auto with = [](const char* key, json value) {
    json c = qwen35();
    c[key] = std::move(value);
    return c;
  };
  EXPECT_EQ(error_of(with("patch_size", "16")),
            "preprocessor_config.json: field 'patch_size': expected an integer, got \"16\"");
  EXPECT_TRUE(
      contains(error_of(with("patch_size", 0)),
               "preprocessor_config.json: field 'patch_size': must be in [1, 1024], got 0"));
  EXPECT_TRUE(contains(error_of(with("merge_size", -2)), "field 'merge_size'"));
  EXPECT_TRUE(contains(error_of(with("temporal_patch_size", 1000)), "field 'temporal_patch_size'"));
  EXPECT_TRUE(contains(error_of(with("image_mean", json::array({0.5, 0.5}))),
                       "field 'image_mean': expected a number or a list of 3 numbers"));
  EXPECT_TRUE(contains(error_of(with("image_std", json::array({0.5, "x", 0.5}))),
                       "field 'image_std[1]': expected a number"));
  EXPECT_TRUE(contains(error_of(with("image_std", json::array({0.5, 0.0, 0.5}))),
                       "field 'image_std[1]': must be finite and non-zero"));
  EXPECT_TRUE(contains(error_of(with("rescale_factor", -1)), "field 'rescale_factor'"));
  EXPECT_TRUE(contains(error_of(with("size", 7)), "field 'size': expected an object, got 7"));
  EXPECT_TRUE(contains(error_of(with("size", {{"shortest_edge", 0}, {"longest_edge", 10}})),
                       "field 'size.shortest_edge (min_pixels)': must be in [1,"));
  EXPECT_TRUE(contains(error_of(with("size", {{"shortest_edge", "a"}, {"longest_edge", 10}})),
                       "field 'size.shortest_edge': expected an integer"));
  EXPECT_TRUE(contains(error_of(with("do_resize", "yes")), "field 'do_resize': expected true"));
  EXPECT_EQ(image_processor_config::parse("[1]").error().message(),
            "preprocessor_config.json: not a JSON object");
  EXPECT_EQ(image_processor_config::parse("{").error().code(), errc::parse_error);
}

TEST(image_processor_config, refuses_what_it_would_compute_differently) {
  const auto refused = [](const char* key, json value) {
    json c = qwen35();
    c[key] = std::move(value);
    const auto parsed = parse(c);
    EXPECT_FALSE(parsed);
    return parsed ? errc::internal : parsed.error().code();
  };
  EXPECT_EQ(refused("resample", 2), errc::unsupported);  // bilinear
  EXPECT_EQ(refused("do_convert_rgb", false), errc::unsupported);
  EXPECT_EQ(refused("image_processor_type", "SiglipImageProcessor"), errc::unsupported);
  EXPECT_TRUE(contains(error_of([] {
                         json c = qwen35();
                         c["resample"] = 1;
                         return c;
                       }()),
                       "field 'resample': only 3 (bicubic) is supported, got 1"));
}

}  // namespace
}  // namespace mstar::models::vision
