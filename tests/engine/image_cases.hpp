#pragma once

// The image prompts of tests/fixtures/models/qwen3_5_tiny (make_qwen3_5.py):
// each a greedy request with its images, and what transformers generated.

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "models/safetensors.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::test {

struct image_case {
  engine::request_spec request;             ///< keeps the logits of each step
  std::vector<engine::token_id> generated;  ///< transformers' greedy tokens
  std::vector<float> step_logits;           ///< [generated, vocab]
};

/// The fixture's image prompts, each placeholder run already expanded.
inline std::vector<image_case> load_image_cases() {
  const auto dir = model_dir("qwen3_5_tiny");
  std::ifstream in{dir / "expected.json"};
  const auto doc = nlohmann::json::parse(in);
  auto logits = models::safetensors_file::open(dir / "expected_logits.safetensors").value();
  std::vector<image_case> out;
  for (const auto& p : doc.at("image_prompts")) {
    image_case c;
    c.generated = p.at("generated_ids").get<std::vector<engine::token_id>>();
    c.request = greedy_request(p.at("prompt_ids").get<std::vector<engine::token_id>>(),
                               static_cast<std::int32_t>(c.generated.size()), true);
    c.step_logits =
        models::to_float32(*logits.get(p.at("step_logits").get<std::string>()).value()).value();
    const auto pixels =
        models::to_float32(*logits.get(p.at("pixel_values").get<std::string>()).value()).value();
    std::size_t at = 0;
    for (const auto& g : p.at("grids")) {
      models::image_input im;
      im.t = g[0];
      im.h = g[1];
      im.w = g[2];
      const auto n = static_cast<std::size_t>(im.t * im.h * im.w * 96);  // 3 * 2 * 4 * 4
      im.pixel_values.assign(pixels.begin() + static_cast<long>(at),
                             pixels.begin() + static_cast<long>(at + n));
      at += n;
      c.request.images.push_back(std::move(im));
    }
    EXPECT_EQ(at, pixels.size());
    out.push_back(std::move(c));
  }
  return out;
}

/// Max |logit - transformers| over `logits` (one row per generated step).
inline float max_logit_gap(const image_case& c, const std::vector<std::vector<float>>& logits) {
  float worst = 0;
  for (std::size_t s = 0; s < logits.size(); ++s) {
    for (std::size_t v = 0; v < logits[s].size(); ++v)
      worst = std::max(worst, std::abs(logits[s][v] - c.step_logits[s * logits[s].size() + v]));
  }
  return worst;
}

}  // namespace mstar::test
