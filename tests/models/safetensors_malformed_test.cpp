#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "models/safetensors.hpp"
#include "tests/models/temp_folder.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using mstar::test::safetensors_bytes;
using mstar::test::temp_folder;

struct malformed_case {
  std::string name;
  std::string bytes;
  std::string reason;  ///< a part of the expected message
};

std::string f32_entry(std::string_view offsets, std::string_view shape = "[2]") {
  return std::string{R"({"dtype":"F32","shape":)"} + std::string{shape} + R"(,"data_offsets":)" +
         std::string{offsets} + "}";
}

std::vector<malformed_case> cases() {
  const std::string eight(8, '\0');
  std::string huge_length(8, '\xFF');
  return {
      {"empty_file", "", "shorter than the 8-byte header length"},
      {"five_bytes", "abcde", "file is 5 bytes"},
      {"header_past_end", safetensors_bytes("{}").replace(0, 1, 1, '\xE8'),
       "header length 232 runs past the end of the 10-byte file"},
      {"header_length_max", huge_length + "{}", "runs past the end"},
      {"bad_json", safetensors_bytes("{\"a\": "), "header is not valid JSON"},
      {"not_an_object", safetensors_bytes("[1, 2]"), "header is not a JSON object"},
      {"duplicate_name",
       safetensors_bytes("{\"w\":" + f32_entry("[0,8]") + ",\"w\":" + f32_entry("[0,8]") + "}",
                         eight),
       "header has the key \"w\" twice in one object"},
      {"entry_not_object", safetensors_bytes(R"({"w": 3})"),
       "tensor 'w': entry is not a JSON object"},
      {"missing_dtype", safetensors_bytes(R"({"w": {"shape":[1],"data_offsets":[0,4]}})", "abcd"),
       "no string 'dtype'"},
      {"missing_offsets", safetensors_bytes(R"({"w": {"dtype":"F32","shape":[1]}})"),
       "no 'data_offsets'"},
      {"unknown_dtype",
       safetensors_bytes(R"({"w": {"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", "abcd"),
       "unknown dtype 'F99'"},
      {"shape_not_array", safetensors_bytes("{\"w\":" + f32_entry("[0,8]", "2") + "}", eight),
       "'shape' is not an array"},
      {"negative_dim", safetensors_bytes("{\"w\":" + f32_entry("[0,8]", "[-2]") + "}", eight),
       "'shape' entry -2 is not a non-negative integer"},
      {"one_offset", safetensors_bytes("{\"w\":" + f32_entry("[0]") + "}", eight),
       "is not two non-negative integers"},
      {"negative_offset", safetensors_bytes("{\"w\":" + f32_entry("[-8,0]") + "}", eight),
       "is not two non-negative integers"},
      {"misordered_offsets", safetensors_bytes("{\"w\":" + f32_entry("[8,0]") + "}", eight),
       "data_offsets [8, 0] end before they begin"},
      {"offsets_past_data", safetensors_bytes("{\"w\":" + f32_entry("[8,16]") + "}", eight),
       "data_offsets [8, 16] run past the 8-byte data section"},
      {"size_mismatch", safetensors_bytes("{\"w\":" + f32_entry("[0,8]", "[3]") + "}", eight),
       "need 12 bytes but data_offsets [0, 8] hold 8"},
      {"shape_overflow",
       safetensors_bytes("{\"w\":" + f32_entry("[0,8]", "[4611686018427387904,16]") + "}", eight),
       "need overflowing bytes"},
      {"overlap",
       safetensors_bytes("{\"a\":" + f32_entry("[0,8]") + ",\"b\":" + f32_entry("[4,12]") + "}",
                         std::string(12, '\0')),
       "tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8]"},
      {"metadata_not_object", safetensors_bytes(R"({"__metadata__": [1]})"),
       "'__metadata__' is not a JSON object"},
      {"metadata_not_string", safetensors_bytes(R"({"__metadata__": {"format": 1}})"),
       "'__metadata__' value for 'format' is not a string"},
  };
}

class safetensors_malformed : public ::testing::TestWithParam<malformed_case> {};

TEST_P(safetensors_malformed, is_an_error_naming_the_file_and_the_reason) {
  const temp_folder dir;
  const auto path = dir.write("bad.safetensors", GetParam().bytes);
  const auto file = safetensors_file::open(path);
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code(), errc::parse_error);
  EXPECT_TRUE(contains(file.error().message(), path.string()));
  EXPECT_TRUE(contains(file.error().message(), GetParam().reason));
}

INSTANTIATE_TEST_SUITE_P(every_failure_mode, safetensors_malformed, ::testing::ValuesIn(cases()),
                         [](const auto& test_case) { return test_case.param.name; });

TEST(safetensors_file, accepts_zero_sized_tensors_sharing_an_offset) {
  const temp_folder dir;
  const std::string header = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                             R"("b":{"dtype":"F16","shape":[0,3],"data_offsets":[4,4]},)"
                             R"("d":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  const std::string data("pad!\x00\x00\x80\x3F", 8);  // 4 bytes of d, then 1.0f
  const auto file =
      safetensors_file::open(dir.write("ok.safetensors", safetensors_bytes(header, data)));
  ASSERT_TRUE(file) << file.error().to_string();
  const auto c = to_float32(*file->find("c"));
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, std::vector<float>{1.0F});
}

// The format requires the tensors to cover the data section exactly: a gap or
// a tail no tensor owns is what a header length off by a few bytes looks like.
TEST(safetensors_file, refuses_bytes_no_tensor_owns) {
  const temp_folder dir;
  const std::string data("pad!\x00\x00\x80\x3F", 8);
  const std::string gap = R"({"c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  const auto with_gap =
      safetensors_file::open(dir.write("gap.safetensors", safetensors_bytes(gap, data)));
  ASSERT_FALSE(with_gap);
  EXPECT_TRUE(
      contains(with_gap.error().message(), "bytes [0, 4) of the data section belong to no tensor"));
  const std::string head = R"({"c":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const auto with_tail =
      safetensors_file::open(dir.write("tail.safetensors", safetensors_bytes(head, data)));
  ASSERT_FALSE(with_tail);
  EXPECT_TRUE(contains(with_tail.error().message(),
                       "the tensors cover 4 bytes of the 8-byte data section"));
}

}  // namespace
}  // namespace mstar::models
