// Qwen3.5 config.json: both layouts transformers writes (the multimodal one
// with `text_config`, the text-only one flat), transformers' defaults, and
// refusals that name the field.
#include "models/qwen3_5_config.hpp"

#include <array>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "models/load.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using json = nlohmann::json;

const std::string qwen_models_dir = std::string{MSTAR_FIXTURES_DIR} + "/models";

json text_only() {
  return {{"model_type", "qwen3_5_text"},
          {"vocab_size", 512},
          {"hidden_size", 64},
          {"num_hidden_layers", 8},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"linear_num_key_heads", 2},
          {"linear_num_value_heads", 4},
          {"linear_key_head_dim", 8},
          {"linear_value_head_dim", 16},
          {"rope_parameters",
           {{"rope_type", "default"},
            {"rope_theta", 10000.0},
            {"partial_rotary_factor", 0.5},
            {"mrope_section", {2, 1, 1}}}}};
}

std::string error_of(const json& config) {
  const auto parsed = qwen3_5_config::parse(config.dump());
  return parsed ? std::string{"<parsed>"} : parsed.error().message();
}

TEST(qwen3_5_config, reads_the_multimodal_fixture_written_by_transformers) {
  const auto c = qwen3_5_config::load(qwen_models_dir + "/qwen3_5_tiny");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->multimodal);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_EQ(c->num_layers(), 4);
  EXPECT_EQ(c->count(qwen3_5_mixer::delta_net), 2);
  EXPECT_EQ(c->layers[1], qwen3_5_mixer::attention);
  EXPECT_EQ(c->rotary_dim(), 8);
  EXPECT_EQ(c->mrope_section[0], 2);
  EXPECT_EQ(c->image_token_id, 300);
  EXPECT_EQ(c->vision_start_token_id, 302);
  EXPECT_EQ(c->vision_end_token_id, 303);
  EXPECT_EQ(c->eos_token_ids, std::vector<std::int64_t>{2});
  const resources::delta_net_geometry geo{2, 4, 8, 16, 4};
  EXPECT_EQ(c->delta_net(), geo);
  EXPECT_EQ(c->delta_net().conv_dim(), 96);
}

TEST(qwen3_5_config, reads_the_text_only_layout) {
  const auto c = qwen3_5_config::load(qwen_models_dir + "/qwen3_5_tiny_text");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_FALSE(c->multimodal);
  EXPECT_EQ(c->count(qwen3_5_mixer::attention), 2);
}

// As transformers reads it: without the field the sections are [11, 11, 10]
// whatever the rotary span (4 pairs here), and sections need not sum to the
// span (pair i takes height or width only below 3 * that section).
TEST(qwen3_5_config, takes_mrope_sections_that_do_not_cover_the_rotary_span) {
  json c = text_only();
  c["rope_parameters"].erase("mrope_section");
  auto parsed = qwen3_5_config::parse(c.dump());
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->rotary_dim(), 8);
  EXPECT_EQ(parsed->mrope_section, (std::array<std::int64_t, 3>{11, 11, 10}));
  c["rope_parameters"]["mrope_section"] = {2, 2, 1};
  parsed = qwen3_5_config::parse(c.dump());
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->mrope_section[1], 2);
}

TEST(qwen3_5_config, lays_out_full_attention_every_fourth_layer_by_default) {
  const auto c = qwen3_5_config::parse(text_only().dump());
  ASSERT_TRUE(c) << c.error().to_string();
  ASSERT_EQ(c->num_layers(), 8);
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(c->layers[static_cast<std::size_t>(i)],
              i % 4 == 3 ? qwen3_5_mixer::attention : qwen3_5_mixer::delta_net)
        << "layer " << i;
  }
  auto every_other = text_only();
  every_other["full_attention_interval"] = 2;
  const auto d = qwen3_5_config::parse(every_other.dump());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->count(qwen3_5_mixer::attention), 4);
}

TEST(qwen3_5_config, refuses_what_it_cannot_run_naming_the_field) {
  auto c = text_only();
  c["model_type"] = "qwen3_5_moe";
  EXPECT_TRUE(contains(error_of(c), "'qwen3_5_moe' is not a Qwen3.5 model"));
  c = text_only();
  c["num_experts"] = 64;
  EXPECT_TRUE(contains(error_of(c), "field 'num_experts'"));
  c = text_only();
  c["layer_types"] = {"linear_attention", "sliding_attention"};
  EXPECT_TRUE(contains(error_of(c), "field 'layer_types[1]'"));
  c = text_only();
  c["layer_types"] = {"linear_attention", "full_attention"};
  EXPECT_TRUE(contains(error_of(c), "has 2 entries, num_hidden_layers is 8"));
  c = text_only();
  c["linear_num_key_heads"] = 3;
  EXPECT_TRUE(contains(error_of(c), "field 'linear_num_key_heads': 3 does not divide"));
  c = text_only();
  c["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_TRUE(contains(error_of(c), "field 'rope_parameters.rope_type'"));
  c = text_only();
  c["hidden_act"] = "gelu";
  EXPECT_TRUE(contains(error_of(c), "field 'hidden_act'"));
  c = text_only();
  c["head_dim"] = 0;
  EXPECT_TRUE(contains(error_of(c), "field 'head_dim': must be positive"));
  c = text_only();
  c["eos_token_id"] = {2, 9999};
  EXPECT_TRUE(contains(error_of(c), "field 'eos_token_id': 9999 is outside the vocabulary"));
}

TEST(qwen3_5_config, names_the_nested_field_of_a_multimodal_config) {
  json c = {{"model_type", "qwen3_5"}, {"text_config", text_only()}, {"vision_config", json{}}};
  c["text_config"]["head_dim"] = "wide";
  EXPECT_TRUE(contains(error_of(c), "field 'text_config.head_dim': expected an integer"));
  c["text_config"]["head_dim"] = 16;
  c["text_config"]["rope_parameters"]["mrope_section"] = {1, 2};
  EXPECT_TRUE(contains(error_of(c), "field 'text_config.rope_parameters.mrope_section'"));
  EXPECT_TRUE(contains(error_of({{"model_type", "qwen3_5"}}), "field 'text_config': missing"));
}

TEST(load_causal_lm, picks_the_family_from_model_type_and_refuses_others) {
  for (const char* name : {"qwen3_5_tiny", "qwen3_5_tiny_text", "nemotron_h_tiny_hybrid"}) {
    auto m = load_causal_lm(qwen_models_dir + "/" + name);
    ASSERT_TRUE(m) << name << ": " << m.error().message();
    EXPECT_EQ((*m)->vocab_size(), 512) << name;
  }
  const auto gpu = [] {
    run_options run;
    run.device = "cuda";
    return load_causal_lm(qwen_models_dir + "/qwen3_5_tiny", run);
  }();
  // A CUDA device loads where this build and machine have one (the GPU
  // tests check that path); otherwise the refusal names the folder and says why.
  if (gpu) {
    EXPECT_TRUE((*gpu)->on_gpu());
  } else {
    EXPECT_TRUE(contains(gpu.error().message(), "qwen3_5_tiny")) << gpu.error().message();
    EXPECT_TRUE(contains(gpu.error().message(), "CUDA") || contains(gpu.error().message(), "cuda"))
        << gpu.error().message();
  }
}

}  // namespace
}  // namespace mstar::models
