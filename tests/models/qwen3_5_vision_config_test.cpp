// The Qwen3.5 vision tower's config.json reader and weight loader: what they
// accept, and every refusal's message.
#include <cstring>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/qwen3_5_vision.hpp"
#include "tests/models/temp_folder.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using json = nlohmann::json;
using mstar::test::contains;
using mstar::test::read_bytes;
using mstar::test::safetensors_bytes;
using mstar::test::temp_folder;

const std::string vision_config_dir =
    std::string{MSTAR_FIXTURES_DIR} + "/models/qwen3_5_vision_tiny";

json fixture_config() {
  return json::parse(read_bytes(vision_config_dir + "/config.json"));
}

// The error message of parsing the fixture's config with `edit` applied to
// its vision_config, or "<parsed>".
template <class Edit>
std::string error_of(Edit edit) {
  json doc = fixture_config();
  edit(doc["vision_config"]);
  const auto parsed = qwen3_5_vision_config::parse(doc.dump());
  return parsed ? std::string{"<parsed>"} : parsed.error().message();
}

TEST(qwen3_5_vision_config, reads_the_fixture_written_by_transformers) {
  const auto c = qwen3_5_vision_config::load(vision_config_dir);
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->depth, 2);
  EXPECT_EQ(c->hidden_size, 16);
  EXPECT_EQ(c->hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(c->intermediate_size, 48);
  EXPECT_EQ(c->num_heads, 2);
  EXPECT_EQ(c->in_channels, 3);
  EXPECT_EQ(c->patch_size, 4);
  EXPECT_EQ(c->spatial_merge_size, 2);
  EXPECT_EQ(c->temporal_patch_size, 2);
  EXPECT_EQ(c->out_hidden_size, 48);
  EXPECT_EQ(c->num_position_embeddings, 25);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->head_dim(), 8);
  EXPECT_EQ(c->patch_dim(), 96);
  EXPECT_EQ(c->merge_unit(), 4);
  EXPECT_EQ(c->merged_hidden(), 64);
  EXPECT_EQ(c->grid_side(), 5);
}

TEST(qwen3_5_vision_config, takes_transformers_defaults_for_absent_fields) {
  const auto c = qwen3_5_vision_config::parse(R"({"vision_config": {"hidden_act": "gelu"}})");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->depth, 27);
  EXPECT_EQ(c->hidden_size, 1152);
  EXPECT_EQ(c->hidden_act, "gelu");
  EXPECT_EQ(c->intermediate_size, 4304);
  EXPECT_EQ(c->num_heads, 16);
  EXPECT_EQ(c->patch_size, 16);
  EXPECT_EQ(c->out_hidden_size, 3584);
  EXPECT_EQ(c->num_position_embeddings, 2304);
  EXPECT_EQ(c->grid_side(), 48);
  EXPECT_EQ(c->rope_theta, 10000.0);
  const auto bare = qwen3_5_vision_config::parse(R"({"vision_config": {"rope_theta": 500.0}})");
  ASSERT_TRUE(bare) << bare.error().to_string();
  EXPECT_EQ(bare->rope_theta, 500.0);  // the spelling before rope_parameters
}

TEST(qwen3_5_vision_config, names_the_nested_field_of_each_bad_value) {
  EXPECT_TRUE(contains(error_of([](json& v) { v["num_heads"] = "two"; }),
                       "config.json: field 'vision_config.num_heads': expected an integer, got "
                       "\"two\""));
  EXPECT_TRUE(contains(error_of([](json& v) { v["depth"] = 0; }),
                       "config.json: field 'vision_config.depth': must be in [1, 1048576], got 0"));
  EXPECT_TRUE(contains(error_of([](json& v) {
                         v["patch_size"] = json::array({16, 16});
                       }),
                       "field 'vision_config.patch_size': expected an integer, got [16,16]"));
  EXPECT_TRUE(contains(error_of([](json& v) { v["num_heads"] = 3; }),
                       "field 'vision_config.num_heads': 3 does not divide hidden_size (16)"));
  EXPECT_TRUE(contains(error_of([](json& v) {
                         v["hidden_size"] = 24;
                         v["num_heads"] = 4;
                       }),
                       "field 'vision_config.num_heads': head_dim = hidden_size / num_heads = 6 "
                       "is not a multiple of 4"));
  EXPECT_TRUE(contains(error_of([](json& v) { v["rope_parameters"]["rope_theta"] = -1; }),
                       "field 'vision_config.rope_parameters.rope_theta': must be finite and "
                       "positive, got -1"));
  EXPECT_TRUE(contains(error_of([](json& v) {
                         v.erase("rope_parameters");
                         v["rope_theta"] = 0;
                       }),
                       "field 'vision_config.rope_theta': must be finite and positive, got 0"));
  EXPECT_TRUE(contains(error_of([](json& v) { v["rope_parameters"] = "axial"; }),
                       "field 'vision_config.rope_parameters': expected an object"));
  EXPECT_TRUE(contains(error_of([](json& v) { v["patch_size"] = 1 << 20; }),
                       "field 'vision_config.patch_size': a patch of in_channels * "
                       "temporal_patch_size * patch_size^2 = 6597069766656 values is too large"));
}

TEST(qwen3_5_vision_config, refuses_what_the_tower_cannot_run) {
  json doc = fixture_config();
  doc["vision_config"]["hidden_act"] = "relu";
  const auto act = qwen3_5_vision_config::parse(doc.dump());
  ASSERT_FALSE(act);
  EXPECT_EQ(act.error().code(), errc::unsupported);
  EXPECT_TRUE(contains(act.error().message(),
                       "field 'vision_config.hidden_act': 'relu' is not supported "
                       "(gelu_pytorch_tanh, gelu)"));
  EXPECT_TRUE(
      contains(error_of([](json& v) {
                 v["deepstack_visual_indexes"] = json::array({3, 7});
               }),
               "field 'vision_config.deepstack_visual_indexes': [3,7]: deepstack outputs are not "
               "supported"));
  EXPECT_TRUE(contains(error_of([](json& v) { v["rope_parameters"]["rope_type"] = "default"; }),
                       "field 'vision_config.rope_parameters.rope_type': 'default' is not "
                       "supported (the vision tower's rope is axial)"));
}

TEST(qwen3_5_vision_config, a_config_without_a_vision_tower_says_so) {
  const auto missing = qwen3_5_vision_config::parse(R"({"model_type": "qwen3_5_text"})");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(contains(missing.error().message(),
                       "config.json: field 'vision_config': missing (not a Qwen3.5 "
                       "vision-language config?)"));
  const auto scalar = qwen3_5_vision_config::parse(R"({"vision_config": 3})");
  ASSERT_FALSE(scalar);
  EXPECT_TRUE(contains(scalar.error().message(), "field 'vision_config': expected an object"));
  const auto broken = qwen3_5_vision_config::parse("{\"vision_config\": {", "my/config.json");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code(), errc::parse_error);
  EXPECT_TRUE(contains(broken.error().message(), "my/config.json is not valid JSON"));
}

// The fixture's vision weights as name -> (shape, values), to write back
// edited into a scratch checkpoint.
using tensor_map = std::map<std::string, std::pair<std::vector<std::int64_t>, std::vector<float>>>;

tensor_map fixture_tensors() {
  const auto file = safetensors_file::open(vision_config_dir + "/model.safetensors");
  EXPECT_TRUE(file);
  tensor_map out;
  for (const auto& [name, t] : file->tensors())
    out[name] = {t.shape, to_float32(t).value()};
  return out;
}

// A folder with the fixture's config.json and `tensors` as model.safetensors (F32).
void write_checkpoint(const temp_folder& dir, const tensor_map& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, entry] : tensors) {
    const auto begin = data.size();
    data.append(reinterpret_cast<const char*>(entry.second.data()),
                entry.second.size() * sizeof(float));
    header[name] = {
        {"dtype", "F32"}, {"shape", entry.first}, {"data_offsets", {begin, data.size()}}};
  }
  dir.write("model.safetensors", safetensors_bytes(header.dump(), data));
  dir.write("config.json", read_bytes(vision_config_dir + "/config.json"));
}

std::string load_error(const temp_folder& dir) {
  const auto model = qwen3_5_vision::load(dir.path());
  return model ? std::string{"<loaded>"} : model.error().to_string();
}

TEST(qwen3_5_vision_weights, a_faithful_copy_of_the_fixture_loads) {
  const temp_folder dir;
  write_checkpoint(dir, fixture_tensors());
  EXPECT_EQ(load_error(dir), "<loaded>");
}

TEST(qwen3_5_vision_weights, a_wrong_shape_names_the_tensor_and_both_shapes) {
  const temp_folder dir;
  auto tensors = fixture_tensors();
  tensors["model.visual.blocks.1.attn.qkv.weight"].first = {16, 48};  // transposed
  write_checkpoint(dir, tensors);
  EXPECT_TRUE(contains(load_error(dir),
                       "invalid_argument: " + dir.path().string() +
                           ": tensor 'model.visual.blocks.1.attn.qkv.weight' has shape [16, 48], "
                           "config.json implies [48, 16]"));
  tensors = fixture_tensors();
  tensors["model.visual.patch_embed.proj.weight"].first = {16, 96};  // flattened: not the Conv3d
  write_checkpoint(dir, tensors);
  EXPECT_TRUE(contains(load_error(dir),
                       "tensor 'model.visual.patch_embed.proj.weight' has shape "
                       "[16, 96], config.json implies [16, 3, 2, 4, 4]"));
}

TEST(qwen3_5_vision_weights, a_missing_tensor_or_block_is_named) {
  const temp_folder dir;
  auto tensors = fixture_tensors();
  tensors.erase("model.visual.merger.linear_fc2.bias");
  write_checkpoint(dir, tensors);
  EXPECT_TRUE(contains(load_error(dir), "not_found"));
  EXPECT_TRUE(contains(load_error(dir), "no tensor named 'model.visual.merger.linear_fc2.bias'"));

  const temp_folder deeper;
  write_checkpoint(deeper, fixture_tensors());
  json config = fixture_config();
  config["vision_config"]["depth"] = 3;
  deeper.write("config.json", config.dump());
  EXPECT_TRUE(contains(load_error(deeper), "no tensor named 'model.visual.blocks.2.norm1.weight'"));
}

}  // namespace
}  // namespace mstar::models
