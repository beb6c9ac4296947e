#include "models/vision/image_decode.hpp"

#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "tests/models/image_fixtures.hpp"

namespace mstar::models::vision {
namespace {

using mstar::test::as_bytes;
using mstar::test::image_file;
using mstar::test::tensor_bytes;

// Pixels that differ from `want` (uint8 [h, w, 3] as PIL gave it), for messages.
std::int64_t count_differences(const rgb_image& got, std::span<const std::byte> want) {
  if (got.pixels.size() != want.size())
    return -1;
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    differ += got.pixels[i] != static_cast<std::uint8_t>(want[i]);
  return differ;
}

TEST(image_decode, detects_png_and_jpeg_by_their_magic_bytes) {
  EXPECT_EQ(detect_image_format(as_bytes(image_file("gray_24x16.png"))), image_format::png);
  EXPECT_EQ(detect_image_format(as_bytes(image_file("jpeg420_24x16.jpg"))), image_format::jpeg);
  EXPECT_EQ(detect_image_format(as_bytes("GIF89a")), std::nullopt);
  EXPECT_EQ(detect_image_format(as_bytes("\x89PNG")), std::nullopt);  // a signature cut short
  EXPECT_EQ(detect_image_format({}), std::nullopt);
}

// Every decode case of the fixture: PNG colour types and depths (palette with
// tRNS, 4-bit palette, 1-bit, gray, gray + alpha, RGB with tRNS, 16-bit gray,
// RGB and RGBA, Adam7), JPEG 4:2:0, 4:4:4, gray, progressive and CMYK, and
// EXIF orientations 1..8 (turned upright as PIL's exif_transpose does).
TEST(image_decode, gives_the_pixels_transformers_loads_from_bytes) {
  const auto& expected_file = mstar::test::expected_image_tensors();
  ASSERT_TRUE(expected_file) << expected_file.error().to_string();
  for (const auto& entry : mstar::test::expected_image_cases()["decode"]) {
    const std::string name = entry["image"];
    SCOPED_TRACE(name);
    const auto image = decode_image(as_bytes(image_file(name)));
    ASSERT_TRUE(image) << image.error().to_string();
    EXPECT_EQ(image->height, entry["size"][0].get<std::int64_t>());
    EXPECT_EQ(image->width, entry["size"][1].get<std::int64_t>());
    EXPECT_EQ(count_differences(*image, tensor_bytes(*expected_file, name + ".rgb")), 0);
  }
}

TEST(image_decode, composites_transparency_onto_white_as_transformers_convert_to_rgb) {
  const auto& expected_file = mstar::test::expected_image_tensors();
  ASSERT_TRUE(expected_file) << expected_file.error().to_string();
  int with_alpha = 0;
  for (const auto& entry : mstar::test::expected_image_cases()["decode"]) {
    const std::string name = entry["image"];
    SCOPED_TRACE(name);
    const auto image =
        decode_image(as_bytes(image_file(name)), {.alpha = alpha_mode::composite_on_white});
    ASSERT_TRUE(image) << image.error().to_string();
    // Without transparency, compositing changes nothing.
    const bool on_white = entry.value("on_white", false);
    with_alpha += on_white ? 1 : 0;
    const std::string want = name + (on_white ? ".rgb_on_white" : ".rgb");
    EXPECT_EQ(count_differences(*image, tensor_bytes(*expected_file, want)), 0);
  }
  EXPECT_EQ(with_alpha, 5);  // RGBA, gray + alpha, palette tRNS, RGB tRNS, RGBA 16
}

// The decode test compares these with PIL's exif_transpose; here, without
// the option, every file gives the stored pixels (the JPEGs differ only in
// their EXIF block).
TEST(image_decode, turns_images_upright_by_their_exif_orientation_unless_asked_not_to) {
  const auto stored = decode_image(as_bytes(image_file("exif1_24x16.jpg")));
  ASSERT_TRUE(stored) << stored.error().to_string();
  for (const std::string name :
       {"exif2_24x16.jpg", "exif3_24x16.jpg", "exif4_24x16.jpg", "exif5_24x16.jpg",
        "exif6_24x16.jpg", "exif7_24x16.jpg", "exif8_24x16.jpg", "exif8_big_endian_24x16.jpg"}) {
    SCOPED_TRACE(name);
    const auto raw = decode_image(as_bytes(image_file(name)), {.apply_exif_orientation = false});
    ASSERT_TRUE(raw) << raw.error().to_string();
    EXPECT_EQ(raw->pixels, stored->pixels);
    const auto upright = decode_image(as_bytes(image_file(name)));
    ASSERT_TRUE(upright);
    const bool turned = name[4] >= '5';
    EXPECT_EQ(upright->width, turned ? 16 : 24);
    EXPECT_EQ(upright->height, turned ? 24 : 16);
    EXPECT_NE(upright->pixels, stored->pixels);
  }
  const auto png =
      decode_image(as_bytes(image_file("exif6_24x16.png")), {.apply_exif_orientation = false});
  ASSERT_TRUE(png);
  EXPECT_EQ(png->width, 24);
  EXPECT_EQ(png->height, 16);
}

TEST(image_decode, keeps_pil_quirks_for_16_bit_pngs) {
  // I;16 -> RGB clamps (a 16-bit gray 256 is white); RGB 16 keeps the high byte.
  const auto gray = decode_image(as_bytes(image_file("gray16_24x16.png")));
  ASSERT_TRUE(gray) << gray.error().to_string();
  const std::vector<std::uint8_t> first{0, 1, 2, 100, 254, 255, 255, 255};
  for (std::size_t x = 0; x < first.size(); ++x)
    EXPECT_EQ(gray->pixels[3 * x], first[x]) << "x = " << x;
  const auto rgb = decode_image(as_bytes(image_file("rgb16_24x16.png")));
  ASSERT_TRUE(rgb) << rgb.error().to_string();
  const auto& expected_file = mstar::test::expected_image_tensors();
  ASSERT_TRUE(expected_file) << expected_file.error().to_string();
  const auto want = tensor_bytes(*expected_file, "rgb16_24x16.png.rgb");
  ASSERT_EQ(want.size(), rgb->pixels.size());
  EXPECT_EQ(std::memcmp(want.data(), rgb->pixels.data(), want.size()), 0);
}

TEST(image_decode, over_white_matches_pil_alpha_composite_at_the_extremes) {
  const auto image = decode_image(as_bytes(image_file("rgba_24x16.png")),
                                  {.alpha = alpha_mode::composite_on_white});
  ASSERT_TRUE(image);
  // Column 0 is fully transparent (white), column 1 opaque (the colour itself).
  const auto dropped = decode_image(as_bytes(image_file("rgba_24x16.png")));
  ASSERT_TRUE(dropped);
  for (std::int64_t y = 0; y < image->height; ++y) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(image->at(0, y)[c], 255);
      EXPECT_EQ(image->at(1, y)[c], dropped->at(1, y)[c]);
    }
  }
}

}  // namespace
}  // namespace mstar::models::vision
