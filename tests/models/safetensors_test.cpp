#include "models/safetensors.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "tests/models/temp_folder.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using mstar::test::safetensors_bytes;
using mstar::test::temp_folder;

const std::string safetensors_dir = std::string{MSTAR_FIXTURES_DIR} + "/safetensors";

float parse_value(const nlohmann::json& value) {
  if (value.is_number())
    return value.get<float>();
  return std::strtof(value.get<std::string>().c_str(), nullptr);  // "inf", "-0.0", subnormals
}

TEST(safetensors_file, reads_every_tensor_python_wrote_with_its_values) {
  const auto file = safetensors_file::open(safetensors_dir + "/mixed.safetensors");
  ASSERT_TRUE(file) << file.error().to_string();
  const auto expected = test::load_fixture_json("safetensors/mixed.expected.json");
  EXPECT_EQ(file->tensors().size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    if (want["dtype"] == "int64")
      continue;  // see lists_an_unsupported_dtype_...
    const auto view = file->get(name);
    ASSERT_TRUE(view) << view.error().to_string();
    EXPECT_EQ((*view)->shape, want["shape"].get<std::vector<std::int64_t>>());
    const auto values = to_float32(**view);
    ASSERT_TRUE(values) << values.error().to_string();
    ASSERT_EQ(values->size(), want["values"].size());
    for (std::size_t i = 0; i < values->size(); ++i) {
      const float w = parse_value(want["values"][i]);
      EXPECT_EQ((*values)[i], w) << "element " << i;
      EXPECT_EQ(std::signbit((*values)[i]), std::signbit(w)) << "element " << i;
    }
  }
  EXPECT_EQ(file->metadata().at("note"), "mstar fixture");
}

TEST(safetensors_file, reports_dtypes_and_shapes_including_scalars_and_empty_tensors) {
  const auto file = safetensors_file::open(safetensors_dir + "/mixed.safetensors");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->find("dense.bf16")->type, dtype::bfloat16);
  EXPECT_EQ(file->find("dense.f16")->type, dtype::float16);
  EXPECT_EQ(file->find("dense.f32")->bytes.size(), 24U);
  EXPECT_TRUE(file->find("scalar.f32")->shape.empty());
  EXPECT_EQ(file->find("scalar.f32")->numel(), 1);
  EXPECT_EQ(file->find("empty.f32")->numel(), 0);
  EXPECT_EQ(file->find("nope"), nullptr);
}

TEST(safetensors_file, lists_an_unsupported_dtype_but_refuses_to_hand_it_out) {
  const auto file = safetensors_file::open(safetensors_dir + "/mixed.safetensors");
  ASSERT_TRUE(file);
  const tensor_view* ids = file->find("ids.i64");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype_name, "I64");
  EXPECT_FALSE(ids->type.has_value());
  const auto got = file->get("ids.i64");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), errc::unsupported);
  EXPECT_TRUE(contains(got.error().message(), "tensor 'ids.i64': unsupported dtype I64"));
  EXPECT_TRUE(contains(got.error().message(), "mixed.safetensors"));
  const auto values = to_float32(*ids);
  ASSERT_FALSE(values);
  EXPECT_TRUE(contains(values.error().message(), "unsupported dtype I64"));
}

TEST(safetensors_file, names_the_file_and_tensor_when_a_tensor_is_absent) {
  const auto file = safetensors_file::open(safetensors_dir + "/mixed.safetensors");
  ASSERT_TRUE(file);
  const auto got = file->get("lm_head.weight");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), errc::not_found);
  EXPECT_TRUE(contains(got.error().message(), "no tensor named 'lm_head.weight'"));
}

TEST(safetensors_file, keeps_views_valid_after_the_file_object_moves) {
  auto file = safetensors_file::open(safetensors_dir + "/mixed.safetensors");
  ASSERT_TRUE(file);
  const auto before = to_float32(*file->find("dense.f32"));
  safetensors_file moved = std::move(file).value();
  const auto after = to_float32(*moved.find("dense.f32"));
  ASSERT_TRUE(before && after);
  EXPECT_EQ(*before, *after);
}

TEST(safetensors_file, fails_cleanly_at_every_truncation_of_a_real_file) {
  temp_folder dir;
  const std::string whole = test::read_bytes(safetensors_dir + "/mixed.safetensors");
  for (std::size_t size = 0; size < whole.size(); ++size) {
    // A fresh name each time: rewriting one file makes ext4 flush on every truncation.
    const auto path = dir.write("cut-" + std::to_string(size), whole.substr(0, size));
    const auto file = safetensors_file::open(path);
    ASSERT_FALSE(file) << "opened a file cut to " << size << " of " << whole.size() << " bytes";
    EXPECT_TRUE(contains(file.error().message(), path.string())) << size;
  }
}

TEST(safetensors_file, survives_random_corruption_of_the_header) {
  constexpr unsigned seed = 20240601;
  std::mt19937 rng{seed};
  temp_folder dir;
  const std::string whole = test::read_bytes(safetensors_dir + "/mixed.safetensors");
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i)
    header = (header << 8) | static_cast<unsigned char>(whole[i]);
  int opened = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = whole;
    const auto at = std::uniform_int_distribution<std::size_t>{0, 8 + header - 1}(rng);
    bytes[at] = static_cast<char>(std::uniform_int_distribution<int>{0, 255}(rng));
    const auto file = safetensors_file::open(dir.write("flip-" + std::to_string(trial), bytes));
    if (!file)
      continue;
    ++opened;  // a harmless flip (inside a metadata string, say) may still parse
    for (const auto& [name, view] : file->tensors()) {  // reading every byte is safe
      if (view.type) {
        ASSERT_TRUE(to_float32(view)) << "seed " << seed << " tensor " << name;
      }
    }
  }
  EXPECT_LT(opened, 2000) << "seed " << seed;
}

TEST(safetensors_file, reports_a_missing_file_as_an_io_error_naming_it) {
  const auto file = safetensors_file::open("/nonexistent/mstar/model.safetensors");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code(), errc::io_error);
  EXPECT_TRUE(contains(file.error().message(), "/nonexistent/mstar/model.safetensors"));
}

TEST(safetensors_file, refuses_a_directory) {
  temp_folder dir;
  const auto file = safetensors_file::open(dir.path());
  ASSERT_FALSE(file);
  EXPECT_TRUE(contains(file.error().message(), "is a directory, not a file"));
}

TEST(tensor_conversion, widens_bfloat16_and_float16_exactly) {
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0F);
  EXPECT_EQ(bf16_bits_to_float(0xC040), -3.0F);
  EXPECT_EQ(float16_to_float(0x3C00), 1.0F);
  EXPECT_EQ(float16_to_float(0x7BFF), 65504.0F);
  EXPECT_EQ(float16_to_float(0x0001), std::ldexp(1.0F, -24));  // smallest subnormal
  EXPECT_EQ(float16_to_float(0x03FF), std::ldexp(1023.0F, -24));
  EXPECT_EQ(float16_to_float(0x0400), std::ldexp(1.0F, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(float16_to_float(0xFC00)) && float16_to_float(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(float16_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(float16_to_float(0x8000)));
}

TEST(tensor_conversion, refuses_an_output_of_the_wrong_size) {
  const auto file = safetensors_file::open(safetensors_dir + "/mixed.safetensors");
  ASSERT_TRUE(file);
  std::vector<float> out(5);
  const auto ok = to_float32(*file->find("dense.f32"), out);
  ASSERT_FALSE(ok);
  EXPECT_TRUE(contains(ok.error().message(), "dense.f32"));
}

}  // namespace
}  // namespace mstar::models
