#include <gtest/gtest.h>
#include <string>

#include "models/safetensors.hpp"
#include "tests/models/temp_folder.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using mstar::test::safetensors_bytes;
using mstar::test::temp_folder;

const std::string sharded_dir = std::string{MSTAR_FIXTURES_DIR} + "/safetensors/sharded";

// A file with one F32 tensor [1] holding `value`'s bytes.
std::string one_tensor(std::string_view name) {
  return safetensors_bytes(std::string{"{\""} + std::string{name} +
                               R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                           std::string("\x00\x00\x80\x3F", 4));
}

TEST(safetensors_checkpoint, follows_the_index_across_shards) {
  const auto ckpt = safetensors_checkpoint::open(sharded_dir);
  ASSERT_TRUE(ckpt) << ckpt.error().to_string();
  EXPECT_EQ(ckpt->files().size(), 2U);
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a.weight", "b.bias", "b.weight"}));
  const auto b = ckpt->get("b.weight");
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_EQ((*b)->type, dtype::bfloat16);
  EXPECT_EQ(to_float32(**b).value(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(to_float32(*ckpt->find("a.weight")).value(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(safetensors_checkpoint, names_the_folder_when_a_tensor_is_absent) {
  const auto ckpt = safetensors_checkpoint::open(sharded_dir);
  ASSERT_TRUE(ckpt);
  const auto got = ckpt->get("c.weight");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), errc::not_found);
  EXPECT_TRUE(contains(got.error().message(), "sharded: no tensor named 'c.weight'"));
  EXPECT_EQ(ckpt->find("c.weight"), nullptr);
}

TEST(safetensors_checkpoint, prefers_model_safetensors_over_other_files) {
  const temp_folder dir;
  dir.write("model.safetensors", one_tensor("w"));
  dir.write("expected_logits.safetensors", one_tensor("x"));
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt) << ckpt.error().to_string();
  EXPECT_EQ(ckpt->names(), std::vector<std::string>{"w"});
}

TEST(safetensors_checkpoint, reads_every_safetensors_file_without_an_index) {
  const temp_folder dir;
  dir.write("part-b.safetensors", one_tensor("b"));
  dir.write("part-a.safetensors", one_tensor("a"));
  dir.write("notes.txt", "not weights");
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt) << ckpt.error().to_string();
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ckpt->files().front().path().filename(), "part-a.safetensors");
}

TEST(safetensors_checkpoint, refuses_a_tensor_present_in_two_files) {
  const temp_folder dir;
  dir.write("one.safetensors", one_tensor("w"));
  dir.write("two.safetensors", one_tensor("w"));
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_TRUE(contains(ckpt.error().message(),
                       "tensor 'w' is in both one.safetensors and "
                       "two.safetensors"));
}

TEST(safetensors_checkpoint, refuses_an_index_that_maps_a_tensor_to_the_wrong_file) {
  const temp_folder dir;
  dir.write("one.safetensors", one_tensor("w"));
  dir.write("two.safetensors", one_tensor("v"));
  dir.write("model.safetensors.index.json",
            R"({"weight_map": {"w": "two.safetensors", "v": "two.safetensors"}})");
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_TRUE(contains(ckpt.error().message(),
                       "tensor 'w' is mapped to two.safetensors but is "
                       "not in it"));
}

TEST(safetensors_checkpoint, refuses_an_index_naming_a_missing_file) {
  const temp_folder dir;
  dir.write("model.safetensors.index.json", R"({"weight_map": {"w": "gone.safetensors"}})");
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_EQ(ckpt.error().code(), errc::io_error);
  EXPECT_TRUE(contains(ckpt.error().message(), "gone.safetensors"));
}

TEST(safetensors_checkpoint, refuses_an_index_that_points_outside_the_folder) {
  const temp_folder dir;
  dir.write("model.safetensors.index.json", R"({"weight_map": {"w": "../x.safetensors"}})");
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_TRUE(contains(ckpt.error().message(),
                       "weight_map entry 'w' is \"../x.safetensors\", "
                       "not a file name in the folder"));
}

TEST(safetensors_checkpoint, refuses_a_malformed_index) {
  const temp_folder dir;
  dir.write("model.safetensors.index.json", R"({"metadata": {}})");
  auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_TRUE(contains(ckpt.error().message(), "no 'weight_map' object"));
  dir.write("model.safetensors.index.json", R"({"weight_map": )");
  ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_EQ(ckpt.error().code(), errc::parse_error);
  EXPECT_TRUE(contains(ckpt.error().message(), "not valid JSON"));
}

TEST(safetensors_checkpoint, reports_a_folder_without_weights) {
  const temp_folder dir;
  auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_EQ(ckpt.error().code(), errc::not_found);
  EXPECT_TRUE(contains(ckpt.error().message(), "no model.safetensors.index.json"));
  ckpt = safetensors_checkpoint::open(dir.path() / "missing");
  ASSERT_FALSE(ckpt);
  EXPECT_TRUE(contains(ckpt.error().message(), "not a directory"));
}

TEST(safetensors_checkpoint, passes_on_a_shard_s_own_error) {
  const temp_folder dir;
  dir.write("model.safetensors", "short");
  const auto ckpt = safetensors_checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt);
  EXPECT_TRUE(contains(ckpt.error().message(), "model.safetensors: file is 5 bytes"));
}

}  // namespace
}  // namespace mstar::models
