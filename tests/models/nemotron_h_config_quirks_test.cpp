#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "models/nemotron_h_config.hpp"
#include "tests/models/nemotron_h_config_support.hpp"
#include "tests/models/temp_folder.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using json = nlohmann::json;

TEST(nemotron_h_config_quirks, reads_non_finite_numbers_in_every_spelling) {
  for (const json& high : {json("inf"), json("Infinity"), json("+INF"),
                           json{{"__float__", "Infinity"}}, json{{"__float__", "inf"}}}) {
    json c = test_config::minimal();
    c["time_step_limit"] = {0.0, high};
    const auto parsed = nemotron_h_config::parse(c.dump());
    ASSERT_TRUE(parsed) << high.dump() << ": " << parsed.error().to_string();
    EXPECT_TRUE(std::isinf(parsed->time_step_limit[1])) << high.dump();
  }
}

TEST(nemotron_h_config_quirks, reads_the_bare_infinity_token_python_json_writes) {
  const std::string text = R"({"vocab_size": 512, "hidden_size": 64, "hybrid_override_pattern": )"
                           R"("M", "mamba_dt_limit": [0.0, Infinity], "note": "NaN stays text"})";
  const auto parsed = nemotron_h_config::parse(text);
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_TRUE(std::isinf(parsed->time_step_limit[1]));
}

TEST(nemotron_h_config_quirks, reads_the_legacy_mamba_field_names) {
  json c = test_config::minimal();
  c["mamba_n_groups"] = 4;
  c["mamba_d_conv"] = 3;
  c["mamba_chunk_size"] = 64;
  c["mamba_dt_min"] = 0.01;
  c["mamba_conv_bias"] = false;
  c["mamba_num_heads"] = 8;
  const auto parsed = nemotron_h_config::parse(c.dump());
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->n_groups, 4);
  EXPECT_EQ(parsed->conv_kernel, 3);
  EXPECT_EQ(parsed->chunk_size, 64);
  EXPECT_DOUBLE_EQ(parsed->time_step_min, 0.01);
  EXPECT_FALSE(parsed->use_conv_bias);
}

TEST(nemotron_h_config_quirks, ignores_unknown_fields_and_accepts_integral_floats) {
  json c = test_config::minimal();
  c["some_future_field"] = {{"nested", true}};
  c["hidden_size"] = 64.0;
  const auto parsed = nemotron_h_config::parse(c.dump());
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->hidden_size, 64);
}

TEST(nemotron_h_config_quirks, reads_token_ids_as_ids_lists_or_null) {
  json c = test_config::minimal();
  c["eos_token_id"] = {2, 11};
  c["pad_token_id"] = nullptr;
  c["num_key_value_heads"] = nullptr;
  c["num_attention_heads"] = 4;
  auto parsed = nemotron_h_config::parse(c.dump());
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->eos_token_ids, (std::vector<std::int64_t>{2, 11}));
  EXPECT_FALSE(parsed->pad_token_id.has_value());
  EXPECT_EQ(parsed->num_key_value_heads, 4);  // null means one kv head per query head
  c["eos_token_id"] = nullptr;
  parsed = nemotron_h_config::parse(c.dump());
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->eos_token_ids.empty());
}

struct bad_field {
  const char* key;
  json value;
  const char* message;
};

TEST(nemotron_h_config_quirks, names_every_bad_field) {
  const bad_field cases[] = {
      {"hidden_size", "abc", "field 'hidden_size': expected an integer, got \"abc\""},
      {"vocab_size", 1.5, "field 'vocab_size': expected an integer, got 1.5"},
      {"vocab_size", 0, "field 'vocab_size': must be positive, got 0"},
      {"use_conv_bias", "yes", "field 'use_conv_bias': expected true or false"},
      {"layer_norm_epsilon", json{{"x", 1}}, "field 'layer_norm_epsilon': expected a number"},
      {"layer_norm_epsilon", -1.0, "field 'layer_norm_epsilon': must be finite and positive"},
      {"time_step_limit", json{1.0}, "field 'time_step_limit': expected [min, max] numbers"},
      {"time_step_limit", json{0.5, 0.1}, "field 'time_step_limit': [0.5, 0.1] is not a range"},
      {"eos_token_id", json{2, "x"}, "field 'eos_token_id': expected an id or a list of ids"},
      {"bos_token_id", -1, "field 'bos_token_id': must be in [0, vocab_size = 512), got -1"},
      {"mlp_hidden_act", "gelu", "field 'mlp_hidden_act': 'gelu' is not supported"},
      {"mamba_hidden_act", "relu", "field 'mamba_hidden_act': 'relu' is not supported"},
      {"num_key_value_heads", 3,
       "field 'num_key_value_heads': 3 does not divide "
       "num_attention_heads (32)"},
      {"n_groups", 3, "field 'n_groups': 3 does not divide mamba_num_heads (128)"},
      {"conv_kernel", 1, "field 'conv_kernel': must be at least 2, got 1"},
      {"chunk_size", 0, "field 'chunk_size': must be positive"},
      {"mamba_ssm_cache_dtype", "int8",
       "field 'mamba_ssm_cache_dtype': 'int8' is not a "
       "supported dtype"},
      {"model_type", "llama", "field 'model_type': 'llama' is not a Nemotron-H"},
  };
  for (const auto& bad : cases) {
    json c = test_config::minimal();
    c[bad.key] = bad.value;
    const std::string message = test_config::error_of(c);
    EXPECT_TRUE(contains(message, bad.message)) << bad.key;
    EXPECT_TRUE(contains(message, "config.json")) << bad.key;
  }
}

TEST(nemotron_h_config_quirks, checks_only_the_fields_of_layer_kinds_present) {
  json c = test_config::minimal();
  c["hybrid_override_pattern"] = "*-";
  c["mamba_hidden_act"] = "gelu";  // no Mamba-2 layer reads it
  c["n_groups"] = 3;
  EXPECT_TRUE(nemotron_h_config::parse(c.dump()));
  c["hybrid_override_pattern"] = "M";
  c["mamba_hidden_act"] = "silu";
  c["n_groups"] = 8;
  c["mlp_hidden_act"] = "gelu";  // no MLP layer
  c["num_key_value_heads"] = 3;  // no attention layer
  EXPECT_TRUE(nemotron_h_config::parse(c.dump()));
}

TEST(nemotron_h_config_quirks, reports_malformed_documents_and_missing_files) {
  EXPECT_TRUE(contains(nemotron_h_config::parse("{\"vocab_size\": ", "cfg").error().message(),
                       "cfg is not valid JSON"));
  EXPECT_TRUE(contains(nemotron_h_config::parse("[1]").error().message(), "not a JSON object"));
  EXPECT_TRUE(contains(nemotron_h_config::parse(R"({"hidden_size": 8})").error().message(),
                       "field 'vocab_size': missing"));
  const test::temp_folder dir;
  const auto missing = nemotron_h_config::load(dir.path());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
  EXPECT_TRUE(contains(missing.error().message(), "config.json: no such file"));
}

}  // namespace
}  // namespace mstar::models
