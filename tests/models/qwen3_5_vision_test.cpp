// The Qwen3.5 vision tower against transformers 5.24 (tests/fixtures/
// make_qwen3_5_vision.py): one image, two images packed, a two-frame clip.
#include "models/qwen3_5_vision.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;

const std::string vision_fixture_dir =
    std::string{MSTAR_FIXTURES_DIR} + "/models/qwen3_5_vision_tiny";

// Float32 against transformers' float32: the measured max abs error is under
// 8e-7 on outputs of magnitude up to 1.7 (the test prints it per case).
constexpr double tolerance = 1e-5;

// One case of expected.safetensors: inputs and transformers' outputs.
struct expected_case {
  std::vector<float> pixels;
  std::vector<vision_grid> grids;
  std::vector<float> embeddings;
};

expected_case read_case(const safetensors_file& file, const std::string& name) {
  expected_case out;
  out.pixels = to_float32(**file.get(name + ".pixel_values")).value();
  out.embeddings = to_float32(**file.get(name + ".embeddings")).value();
  const tensor_view* grid = file.find(name + ".grid_thw");  // I64: read the bytes
  EXPECT_TRUE(grid != nullptr && grid->dtype_name == "I64" && grid->shape.size() == 2 &&
              grid->shape[1] == 3);
  std::vector<std::int64_t> thw(static_cast<std::size_t>(grid->numel()));
  std::memcpy(thw.data(), grid->bytes.data(), grid->bytes.size());
  for (std::size_t i = 0; i + 2 < thw.size(); i += 3)
    out.grids.push_back({thw[i], thw[i + 1], thw[i + 2]});
  return out;
}

class qwen3_5_vision_parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = qwen3_5_vision::load(vision_fixture_dir);
    ASSERT_TRUE(loaded) << loaded.error().to_string();
    model_ = std::make_unique<qwen3_5_vision>(std::move(*loaded));
    auto file = safetensors_file::open(vision_fixture_dir + "/expected.safetensors");
    ASSERT_TRUE(file) << file.error().to_string();
    expected_ = std::make_unique<safetensors_file>(std::move(*file));
  }
  static void TearDownTestSuite() {
    model_.reset();
    expected_.reset();
  }

  // Encodes a case and checks it against transformers, printing the errors.
  static std::vector<float> expect_parity(const std::string& name) {
    const auto c = read_case(*expected_, name);
    std::vector<float> got;
    const auto ok = model_->encode(c.pixels, c.grids, got);
    EXPECT_TRUE(ok) << ok.error().to_string();
    EXPECT_EQ(static_cast<std::int64_t>(got.size()),
              model_->merged_tokens(c.grids) * model_->config().out_hidden_size);
    EXPECT_EQ(got.size(), c.embeddings.size());
    double max_abs = 0, scale = 0;
    for (std::size_t i = 0; i < std::min(got.size(), c.embeddings.size()); ++i) {
      const double want = c.embeddings[i];
      max_abs = std::max(max_abs, std::abs(double{got[i]} - want));
      scale = std::max(scale, std::abs(want));
      EXPECT_NEAR(got[i], want, tolerance * (1 + std::abs(want))) << name << " element " << i;
    }
    std::cout << "[ parity   ] " << name << ": " << c.embeddings.size()
              << " values, largest magnitude " << scale << ", max abs error " << max_abs
              << ", relative to the largest magnitude " << max_abs / scale << "\n";
    return got;
  }

  inline static std::unique_ptr<qwen3_5_vision> model_;
  inline static std::unique_ptr<safetensors_file> expected_;
};

TEST_F(qwen3_5_vision_parity, one_image_matches_transformers) {
  expect_parity("single");
}

TEST_F(qwen3_5_vision_parity, two_packed_images_match_transformers_and_each_alone) {
  const auto packed = expect_parity("packed");
  const auto c = read_case(*expected_, "packed");
  ASSERT_EQ(c.grids.size(), 2U);
  std::vector<float> alone;
  std::size_t pixel_at = 0;
  for (const auto& g : c.grids) {
    const auto n = static_cast<std::size_t>(g.t * g.h * g.w * model_->config().patch_dim());
    std::vector<float> one;
    const vision_grid grid[] = {g};
    ASSERT_TRUE(model_->encode({c.pixels.data() + pixel_at, n}, grid, one));
    alone.insert(alone.end(), one.begin(), one.end());
    pixel_at += n;
  }
  ASSERT_EQ(alone.size(), packed.size());
  for (std::size_t i = 0; i < packed.size(); ++i)
    ASSERT_NEAR(alone[i], packed[i], 1e-6 * (1 + std::abs(packed[i]))) << "element " << i;
}

TEST_F(qwen3_5_vision_parity, a_two_frame_clip_attends_frame_by_frame_as_transformers) {
  expect_parity("video");
}

TEST_F(qwen3_5_vision_parity, scratch_reuse_across_calls_of_other_sizes_changes_nothing) {
  const auto first = expect_parity("single");
  expect_parity("packed");
  const auto again = expect_parity("single");
  EXPECT_EQ(first, again);
}

TEST_F(qwen3_5_vision_parity, bad_grids_and_pixel_counts_are_errors_naming_the_image) {
  const auto c = read_case(*expected_, "packed");
  const auto message = [&c](std::vector<vision_grid> grids, std::size_t pixels) {
    std::vector<float> out{1.0F};
    const auto r = model_->encode({c.pixels.data(), pixels}, grids, out);
    EXPECT_TRUE(out.empty());
    return r ? std::string{"<ok>"} : r.error().message();
  };
  const std::size_t all = c.pixels.size();
  EXPECT_TRUE(contains(message({{1, 4, 4}, {1, 3, 6}}, all),
                       "grid_thw[1] = (1, 3, 6): h and w must be multiples of "
                       "spatial_merge_size 2"));
  EXPECT_TRUE(contains(message({{0, 4, 4}}, all),
                       "grid_thw[0] = (0, 4, 4): every extent must be in [1, 1048576]"));
  EXPECT_TRUE(contains(message({{1, -2, 4}}, all), "grid_thw[0] = (1, -2, 4)"));
  EXPECT_TRUE(contains(message({{1, 4, 4}, {1, 2, 6}}, all - 1),
                       "pixel_values: 2687 floats, grid_thw needs 28 patches x 96 values"));
  EXPECT_TRUE(contains(message({{1, 4, 4}}, all), "needs 16 patches x 96 values"));
  std::vector<float> none;
  EXPECT_TRUE(model_->encode({}, {}, none));  // nothing to encode is not an error
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace mstar::models
