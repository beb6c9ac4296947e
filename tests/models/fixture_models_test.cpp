// The committed Nemotron-H fixtures agree with themselves: every weight the
// config implies is in the checkpoint with the shape the forward expects (named
// as transformers saves them, "backbone." prefix), and the reference outputs
// have the shapes expected.json promises.
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

#include "models/nemotron_h_config.hpp"
#include "models/safetensors.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::models {
namespace {

using tensor_shape = std::vector<std::int64_t>;

// Every tensor of a NemotronHForCausalLM checkpoint and its shape, from the config.
std::map<std::string, tensor_shape> implied_weights(const nemotron_h_config& c) {
  const std::int64_t h = c.hidden_size;
  std::map<std::string, tensor_shape> out{{"backbone.embeddings.weight", {c.vocab_size, h}},
                                          {"backbone.norm_f.weight", {h}},
                                          {"lm_head.weight", {c.vocab_size, h}}};
  for (std::int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string p = "backbone.layers." + std::to_string(i) + ".";
    out[p + "norm.weight"] = {h};
    switch (c.layers[static_cast<std::size_t>(i)]) {
      case layer_kind::mamba2:
        out[p + "mixer.in_proj.weight"] = {c.in_proj_size(), h};
        out[p + "mixer.conv1d.weight"] = {c.conv_dim(), 1, c.conv_kernel};
        out[p + "mixer.conv1d.bias"] = {c.conv_dim()};
        out[p + "mixer.dt_bias"] = {c.mamba_num_heads};
        out[p + "mixer.A_log"] = {c.mamba_num_heads};
        out[p + "mixer.D"] = {c.mamba_num_heads};
        out[p + "mixer.norm.weight"] = {c.d_inner()};
        out[p + "mixer.out_proj.weight"] = {h, c.d_inner()};
        break;
      case layer_kind::attention:
        out[p + "mixer.q_proj.weight"] = {c.num_attention_heads * c.head_dim, h};
        out[p + "mixer.k_proj.weight"] = {c.num_key_value_heads * c.head_dim, h};
        out[p + "mixer.v_proj.weight"] = {c.num_key_value_heads * c.head_dim, h};
        out[p + "mixer.o_proj.weight"] = {h, c.num_attention_heads * c.head_dim};
        break;
      case layer_kind::mlp:
        out[p + "mixer.up_proj.weight"] = {c.intermediate_size, h};
        out[p + "mixer.down_proj.weight"] = {h, c.intermediate_size};
        break;
      case layer_kind::moe:
        break;
    }
  }
  return out;
}

class fixture_model : public ::testing::TestWithParam<std::string> {
 protected:
  std::string folder() const {
    return GetParam() == "default" ? std::string{MSTAR_EMBEDDED_MODEL_DIR}
                                   : std::string{MSTAR_FIXTURES_DIR} + "/models/" + GetParam();
  }
};

TEST_P(fixture_model, holds_exactly_the_weights_its_config_implies) {
  const auto config = nemotron_h_config::load(folder());
  ASSERT_TRUE(config) << config.error().to_string();
  const auto ckpt = safetensors_checkpoint::open(folder());
  ASSERT_TRUE(ckpt) << ckpt.error().to_string();
  const auto implied = implied_weights(*config);
  EXPECT_EQ(ckpt->names().size(), implied.size());
  for (const auto& [name, dims] : implied) {
    const auto view = ckpt->get(name);
    ASSERT_TRUE(view) << view.error().to_string();
    EXPECT_EQ((*view)->shape, dims) << name;
    EXPECT_EQ(to_string(*(*view)->type), config->weights_dtype) << name;
  }
}

TEST_P(fixture_model, has_reference_logits_of_the_promised_shapes) {
  const auto config = nemotron_h_config::load(folder());
  ASSERT_TRUE(config);
  std::ifstream in{folder() + "/expected.json"};
  ASSERT_TRUE(in) << folder();
  const auto expected = nlohmann::json::parse(in);
  const auto logits =
      safetensors_file::open(folder() + "/" + expected["logits_file"].get<std::string>());
  ASSERT_TRUE(logits) << logits.error().to_string();
  const auto steps = expected["max_new_tokens"].get<std::int64_t>();
  for (const auto& p : expected["prompts"]) {
    const auto rows = logits->get(p["step_logits"].get<std::string>());
    ASSERT_TRUE(rows) << rows.error().to_string();
    EXPECT_EQ((*rows)->shape, (tensor_shape{steps, config->vocab_size}));
    EXPECT_EQ(p["generated_ids"].size(), static_cast<std::size_t>(steps));
    if (p.contains("prompt_logits")) {
      const auto prompt = logits->get(p["prompt_logits"].get<std::string>());
      ASSERT_TRUE(prompt);
      const auto length = static_cast<std::int64_t>(p["prompt_ids"].size());
      EXPECT_EQ((*prompt)->shape, (tensor_shape{length, config->vocab_size}));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(committed, fixture_model,
                         ::testing::Values("nemotron_h_tiny_hybrid", "nemotron_h_tiny_attn",
                                           "default"));

}  // namespace
}  // namespace mstar::models
