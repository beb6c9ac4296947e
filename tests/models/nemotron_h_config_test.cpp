#include "models/nemotron_h_config.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/models/nemotron_h_config_support.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using json = nlohmann::json;

const std::string models_dir = std::string{MSTAR_FIXTURES_DIR} + "/models";

result<nemotron_h_config> parse(const json& config) {
  return nemotron_h_config::parse(config.dump());
}

TEST(nemotron_h_config, reads_the_hybrid_fixture_written_by_transformers) {
  const auto c = nemotron_h_config::load(models_dir + "/nemotron_h_tiny_hybrid");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->pattern(), "M*M-M*-");
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_attention_heads, 4);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->intermediate_size, 128);
  EXPECT_EQ(c->mlp_hidden_act, "relu2");
  EXPECT_EQ(c->chunk_size, 8);
  EXPECT_EQ(c->time_step_limit[0], 0.0);
  EXPECT_TRUE(std::isinf(c->time_step_limit[1]));  // written as {"__float__": "Infinity"}
  EXPECT_DOUBLE_EQ(c->layer_norm_epsilon, 1e-5);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->weights_dtype, "float32");
  EXPECT_EQ(c->count(layer_kind::mamba2), 3);
  EXPECT_EQ(c->count(layer_kind::attention), 2);
  EXPECT_EQ(c->count(layer_kind::mlp), 2);
  EXPECT_EQ(c->d_inner(), 128);
  EXPECT_EQ(c->conv_dim(), 192);
  EXPECT_EQ(c->in_proj_size(), 328);
  EXPECT_EQ(c->gated_norm_group_size(), 64);
  EXPECT_EQ(c->to_mamba2_geometry(), (resources::mamba2_geometry{8, 16, 16, 2, 4}));
  EXPECT_EQ(c->eos_token_ids, std::vector<std::int64_t>{2});
}

TEST(nemotron_h_config, reads_the_layers_block_type_spelling_of_the_attention_fixture) {
  const auto c = nemotron_h_config::load(models_dir + "/nemotron_h_tiny_attn/config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->pattern(), "*-*-");
  EXPECT_EQ(c->count(layer_kind::mamba2), 0);
}

TEST(nemotron_h_config, reads_the_embedded_default_model) {
  const auto c = nemotron_h_config::load(MSTAR_EMBEDDED_MODEL_DIR);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->pattern(), "M-M*M-M-");
  EXPECT_EQ(c->time_step_min, 0.0);  // no dt clamp anywhere (models/embedded/train/train.py)
  EXPECT_EQ(c->eos_token_ids, std::vector<std::int64_t>{0});
  EXPECT_EQ(c->weights_dtype, "bfloat16");
}

TEST(nemotron_h_config, takes_transformers_defaults_for_absent_fields) {
  const auto c = parse(test_config::minimal());
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->mamba_num_heads, 128);
  EXPECT_EQ(c->n_groups, 8);
  EXPECT_EQ(c->chunk_size, 128);
  EXPECT_DOUBLE_EQ(c->time_step_min, 0.001);
  EXPECT_TRUE(std::isinf(c->time_step_limit[1]));
  EXPECT_TRUE(c->use_conv_bias);
  EXPECT_EQ(c->mamba_ssm_cache_dtype, dtype::float32);
  EXPECT_EQ(c->pad_token_id, 0);
  EXPECT_EQ(c->bos_token_id, 1);
}

TEST(nemotron_h_config, reads_the_layers_block_type_list_with_old_and_new_names) {
  json c = test_config::minimal();
  c.erase("hybrid_override_pattern");
  c["layers_block_type"] = {"mamba", "full_attention", "linear_attention", "mlp", "attention"};
  const auto parsed = parse(c);
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->pattern(), "M*M-*");
}

TEST(nemotron_h_config, accepts_both_spellings_when_they_agree_and_refuses_them_when_not) {
  json c = test_config::minimal();
  c["layers_block_type"] = {"mamba", "attention", "mlp"};
  EXPECT_TRUE(parse(c));
  c["layers_block_type"] = {"mamba", "mlp", "mlp"};
  EXPECT_TRUE(contains(test_config::error_of(c),
                       "field 'hybrid_override_pattern': gives layers \"M*-\" but "
                       "'layers_block_type' gives \"M--\""));
}

TEST(nemotron_h_config, refuses_moe_layers_in_either_spelling) {
  json c = test_config::minimal();
  c["hybrid_override_pattern"] = "M*E-";
  const auto parsed = parse(c);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().code(), errc::unsupported);
  EXPECT_TRUE(contains(parsed.error().message(),
                       "layer 2 of pattern \"M*E-\": MoE layers (E) are "
                       "not supported yet"));
  c.erase("hybrid_override_pattern");
  c["layers_block_type"] = {"moe"};
  EXPECT_TRUE(contains(test_config::error_of(c), "MoE layers (E) are not supported yet"));
}

TEST(nemotron_h_config, names_the_field_of_a_bad_pattern) {
  json c = test_config::minimal();
  c["hybrid_override_pattern"] = "M*x";
  EXPECT_TRUE(
      contains(test_config::error_of(c), "field 'hybrid_override_pattern': character 'x' at 2"));
  c["hybrid_override_pattern"] = "";
  EXPECT_TRUE(
      contains(test_config::error_of(c), "field 'hybrid_override_pattern': lists no layers"));
  c["hybrid_override_pattern"] = 5;
  EXPECT_TRUE(
      contains(test_config::error_of(c), "field 'hybrid_override_pattern': expected a string"));
  c.erase("hybrid_override_pattern");
  EXPECT_TRUE(contains(test_config::error_of(c),
                       "neither 'hybrid_override_pattern' nor 'layers_block_type'"));
  c["layers_block_type"] = {"mamba", "ssm"};
  EXPECT_TRUE(contains(test_config::error_of(c), "field 'layers_block_type': entry 1 is \"ssm\""));
}

TEST(nemotron_h_config, checks_num_hidden_layers_against_the_pattern) {
  json c = test_config::minimal();
  c["num_hidden_layers"] = 3;
  EXPECT_TRUE(parse(c));
  c["num_hidden_layers"] = 4;
  EXPECT_TRUE(contains(test_config::error_of(c),
                       "field 'num_hidden_layers': is 4 but "
                       "'hybrid_override_pattern' has 3 layers"));
}

}  // namespace
}  // namespace mstar::models
