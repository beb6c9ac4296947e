// Qwen3.5's vision tower on the GPU (models/cuda/qwen3_5_vision_cuda.hpp)
// against the CPU tower (models/qwen3_5_vision.hpp), the reference, on the
// committed inputs: the image prompts of qwen3_5_tiny
// (tests/engine/image_cases.hpp) one image at a time and packed, and
// qwen3_5_vision_tiny's cases (one image, two packed, a two-frame clip;
// tests/fixtures/make_qwen3_5_vision.py), float32 and bfloat16 weights. The
// CUDA text model encodes each image once, on the device.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>

#include "engine/local_engine.hpp"
#include "models/cuda/qwen3_5_vision_cuda.hpp"
#include "models/load.hpp"
#include "models/qwen3_5.hpp"
#include "models/qwen3_5_vision.hpp"
#include "models/safetensors.hpp"
#include "tests/engine/image_cases.hpp"
#include "tests/gpu/gpu_support.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::test::gpu {
namespace {

// Normalised error (max |gpu - cpu| / max |cpu|) of the whole output.
// float32: the GEMMs (cuBLAS) and the attention's online softmax sum in
// other orders than the CPU's.
constexpr double vision_f32_budget = 1e-4;
// bfloat16 weights and GEMM inputs (f32 accumulation, everything else f32):
// measured 0.0013 (qwen3_5_tiny images) and 0.0072 (qwen3_5_vision_tiny) on
// the H200 (bench/results/h200-qwen3_5-gpu-tests.log), budget about 4x that.
constexpr double vision_bf16_budget = 3e-2;

// One encode's inputs: packed patches and their grids.
struct vision_case {
  std::string name;
  std::vector<float> pixels;
  std::vector<models::vision_grid> grids;
};

void append_image(vision_case& c, const models::image_input& im) {
  c.pixels.insert(c.pixels.end(), im.pixel_values.begin(), im.pixel_values.end());
  c.grids.push_back({im.t, im.h, im.w});
}

// qwen3_5_tiny's image prompts: every image alone, then each prompt's images packed.
std::vector<vision_case> tiny_image_cases() {
  std::vector<vision_case> out;
  const auto cases = load_image_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& images = cases[i].request.images;
    for (std::size_t j = 0; j < images.size(); ++j) {
      vision_case one{"prompt " + std::to_string(i) + " image " + std::to_string(j), {}, {}};
      append_image(one, images[j]);
      out.push_back(std::move(one));
    }
    if (images.size() > 1) {
      vision_case packed{"prompt " + std::to_string(i) + " packed", {}, {}};
      for (const auto& im : images)
        append_image(packed, im);
      out.push_back(std::move(packed));
    }
  }
  return out;
}

// qwen3_5_vision_tiny's expected.safetensors cases (inputs only).
std::vector<vision_case> vision_tiny_cases() {
  std::vector<vision_case> out;
  auto file =
      models::safetensors_file::open(model_dir("qwen3_5_vision_tiny") / "expected.safetensors");
  EXPECT_TRUE(file.has_value()) << file.error().to_string();
  if (!file)
    return out;
  for (const std::string name : {"single", "packed", "video"}) {
    vision_case c{name, models::to_float32(**file->get(name + ".pixel_values")).value(), {}};
    const models::tensor_view* grid = file->find(name + ".grid_thw");
    EXPECT_TRUE(grid != nullptr && grid->dtype_name == "I64" && grid->shape.size() == 2);
    if (grid == nullptr)
      continue;
    std::vector<std::int64_t> thw(static_cast<std::size_t>(grid->numel()));
    std::memcpy(thw.data(), grid->bytes.data(), grid->bytes.size());
    for (std::size_t i = 0; i + 2 < thw.size(); i += 3)
      c.grids.push_back({thw[i], thw[i + 1], thw[i + 2]});
    out.push_back(std::move(c));
  }
  return out;
}

// Every case through both towers of `model`, each GPU output within `budget`
// of the CPU's; cases run twice, largest first the second time, so a work
// buffer sized for another image changes nothing. `worst`: the largest error.
void expect_towers_agree(const std::string& model, mstar::dtype dtype,
                         const std::vector<vision_case>& cases, double budget, double& worst) {
  worst = 0;
  ASSERT_FALSE(cases.empty());
  auto cpu = models::qwen3_5_vision::load(model_dir(model));
  ASSERT_TRUE(cpu.has_value()) << cpu.error().to_string();
  auto gpu = models::qwen3_5_vision_cuda::make(0, dtype, *cpu);
  ASSERT_TRUE(gpu.has_value()) << gpu.error().to_string();
  EXPECT_EQ((*gpu)->dtype(), dtype);
  for (const bool reversed : {false, true}) {
    for (std::size_t n = 0; n < cases.size(); ++n) {
      const auto& c = cases[reversed ? cases.size() - 1 - n : n];
      SCOPED_TRACE(model + " " + c.name);
      std::vector<float> want;
      const auto cpu_ok = cpu->encode(c.pixels, c.grids, want);
      ASSERT_TRUE(cpu_ok.has_value()) << cpu_ok.error().to_string();
      std::vector<float> got(3, -1.0F);  // replaced, not appended to
      const auto gpu_ok = (*gpu)->encode(c.pixels, c.grids, got);
      ASSERT_TRUE(gpu_ok.has_value()) << gpu_ok.error().to_string();
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(static_cast<std::int64_t>(got.size()),
                cpu->merged_tokens(c.grids) * cpu->config().out_hidden_size);
      EXPECT_TRUE(within(got, want, budget));
      worst = std::max(worst, normalised_error(got, want));
    }
  }
}

TEST(gpu_qwen3_5_vision, float32_tower_matches_the_cpu_tower_on_the_fixture_images) {
  MSTAR_REQUIRE_GPU();
  double a = 0, b = 0;
  expect_towers_agree("qwen3_5_tiny", mstar::dtype::float32, tiny_image_cases(), vision_f32_budget,
                      a);
  expect_towers_agree("qwen3_5_vision_tiny", mstar::dtype::float32, vision_tiny_cases(),
                      vision_f32_budget, b);
  std::printf(
      "[ measured ] vision tower float32 on the GPU vs the CPU: normalised error %.3g "
      "(qwen3_5_tiny images), %.3g (qwen3_5_vision_tiny cases)\n",
      a, b);
}

TEST(gpu_qwen3_5_vision, bfloat16_tower_follows_the_cpu_tower_within_its_budget) {
  MSTAR_REQUIRE_GPU();
  double a = 0, b = 0;
  expect_towers_agree("qwen3_5_tiny", mstar::dtype::bfloat16, tiny_image_cases(),
                      vision_bf16_budget, a);
  expect_towers_agree("qwen3_5_vision_tiny", mstar::dtype::bfloat16, vision_tiny_cases(),
                      vision_bf16_budget, b);
  std::printf(
      "[ measured ] vision tower bfloat16 on the GPU vs the CPU's float32: normalised error "
      "%.3g (qwen3_5_tiny images), %.3g (qwen3_5_vision_tiny cases)\n",
      a, b);
}

TEST(gpu_qwen3_5_vision, refuses_bad_grids_as_the_cpu_tower_and_leaves_out_empty) {
  MSTAR_REQUIRE_GPU();
  auto cpu = models::qwen3_5_vision::load(model_dir("qwen3_5_vision_tiny"));
  ASSERT_TRUE(cpu.has_value()) << cpu.error().to_string();
  auto gpu = models::qwen3_5_vision_cuda::make(0, mstar::dtype::float32, *cpu);
  ASSERT_TRUE(gpu.has_value()) << gpu.error().to_string();
  const auto patch = static_cast<std::size_t>(cpu->config().patch_dim());
  const std::vector<float> pixels(4 * patch, 0.5F);
  const models::vision_grid odd[] = {{1, 1, 4}};       // rows not a multiple of the merge size
  const models::vision_grid short_of[] = {{1, 4, 4}};  // 16 patches, 4 given
  for (const auto grids : {std::span<const models::vision_grid>{odd},
                           std::span<const models::vision_grid>{short_of}}) {
    std::vector<float> want, got(2, 1.0F);
    const auto a = cpu->encode(pixels, grids, want);
    const auto b = (*gpu)->encode(pixels, grids, got);
    ASSERT_FALSE(a.has_value());
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.error().code(), a.error().code());
    EXPECT_EQ(b.error().message(), a.error().message());
    EXPECT_TRUE(got.empty());
  }
}

// As tests/engine/qwen3_5_images_test.cpp's page-key cases, on the device:
// prompt 0 (one image), prompt 0 again (its image's pages cached: not
// encoded again), prompt 1 (two images); the tokens are transformers'.
TEST(gpu_qwen3_5_vision, the_cuda_text_model_encodes_each_image_once_on_the_device) {
  MSTAR_REQUIRE_GPU();
  const auto cases = load_image_cases();
  ASSERT_GE(cases.size(), 2U);
  ASSERT_EQ(cases[0].request.images.size(), 1U);
  ASSERT_EQ(cases[1].request.images.size(), 2U);
  models::run_options run;
  run.device = "cuda";
  run.dtype = mstar::dtype::float32;
  auto model = models::load_causal_lm(model_dir("qwen3_5_tiny"), run);
  ASSERT_TRUE(model.has_value()) << model.error().message();
  engine::engine_config config;
  config.pools.page_size = 4;
  auto e = engine::local_engine::make(std::move(*model), config);
  ASSERT_TRUE(e.has_value()) << e.error().message();
  const auto& qwen = dynamic_cast<const models::qwen3_5_model&>((*e)->model());
  const std::pair<std::size_t, std::int64_t> steps[] = {{0, 1}, {0, 1}, {1, 3}};
  for (const auto& step : steps) {
    const auto& c = cases[step.first];
    const auto got = engine::run_to_completion(**e, {c.request});
    ASSERT_TRUE(got.has_value()) << got.error().message();
    ASSERT_EQ(got->size(), 1U);
    EXPECT_EQ(got->front().tokens[0], c.generated) << "image prompt " << step.first;
    EXPECT_EQ(qwen.images_encoded(), step.second) << "after image prompt " << step.first;
  }
}

}  // namespace
}  // namespace mstar::test::gpu
