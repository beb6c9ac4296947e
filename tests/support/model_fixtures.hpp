#pragma once

// The committed transformers fixtures of tests/fixtures/models/<name>/
// (written by tests/fixtures/make_nemotron_h.py): each prompt's ids, the
// greedy tokens transformers generated and the logits row of each.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/safetensors.hpp"
#include "resources/kv/keys.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::test {

/// The folder of fixture model `name`; "default" is the embedded default model
/// (models/embedded/default) in binaries that define MSTAR_EMBEDDED_MODEL_DIR.
inline std::filesystem::path model_dir(const std::string& name) {
#ifdef MSTAR_EMBEDDED_MODEL_DIR
  if (name == "default")
    return MSTAR_EMBEDDED_MODEL_DIR;
#endif
  return std::filesystem::path{fixtures_dir()} / "models" / name;
}

/// One prompt of a fixture model and what transformers made of it.
struct fixture_prompt {
  std::vector<resources::token_id> prompt, generated;
  std::vector<float> step_logits;  ///< [generated.size(), vocab]
  /// [prompt.size(), vocab]: the logits after each prompt position, where
  /// the fixture has them (the tiny models); empty otherwise.
  std::vector<float> prompt_logits;
  /// The largest gap between transformers' own cached and uncached logits for
  /// this prompt (its two kernel paths): how far the reference is from itself.
  float reference_drift = 0;
};

/// The largest reference_drift over a fixture's prompts: how far float32
/// reordering moves this model's logits inside transformers itself. The
/// parity tests scale their tolerance by it, not by each prompt's own gap
/// (one sample of the model's: 1.1e-5 to 9.9e-5 over qwen3_5_tiny's prompts).
inline float fixture_drift(const std::vector<fixture_prompt>& fixture) {
  float drift = 0;
  for (const auto& p : fixture)
    drift = std::max(drift, p.reference_drift);
  return drift;
}

/// Every prompt of fixture model `name` (expected.json and its logits file).
inline std::vector<fixture_prompt> load_expected(const std::string& name) {
  std::ifstream in{model_dir(name) / "expected.json"};
  if (!in)
    throw std::runtime_error("cannot open " + (model_dir(name) / "expected.json").string());
  const auto expected = nlohmann::json::parse(in);
  auto logits = models::safetensors_file::open(model_dir(name) /
                                               expected.at("logits_file").get<std::string>());
  EXPECT_TRUE(logits.has_value());
  std::vector<fixture_prompt> out;
  for (const auto& p : expected.at("prompts")) {
    fixture_prompt f;
    f.prompt = p.at("prompt_ids").get<std::vector<resources::token_id>>();
    f.generated = p.at("generated_ids").get<std::vector<resources::token_id>>();
    f.step_logits =
        models::to_float32(*logits->get(p.at("step_logits").get<std::string>()).value()).value();
    f.reference_drift = p.value("max_cached_uncached_drift", 0.0F);
    if (p.contains("prompt_logits")) {
      f.prompt_logits =
          models::to_float32(*logits->get(p.at("prompt_logits").get<std::string>()).value())
              .value();
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace mstar::test
