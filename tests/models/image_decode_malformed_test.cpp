#include <array>
#include <cstdint>
#include <gtest/gtest.h>
#include <random>
#include <string>

#include "models/vision/image_decode.hpp"
#include "tests/models/image_fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models::vision {
namespace {

using mstar::test::as_bytes;
using mstar::test::contains;
using mstar::test::image_file;

// CRC-32 as PNG chunks carry it (ISO 3309), to forge valid headers.
std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFU;
  for (const char ch : bytes) {
    crc ^= static_cast<std::uint8_t>(ch);
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0xEDB88320U & (0U - (crc & 1U)));
  }
  return crc ^ 0xFFFFFFFFU;
}

void put_be32(std::string& bytes, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    bytes[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xFF);
}

// A fixture PNG whose IHDR declares `width` x `height`, with a valid CRC.
std::string png_declaring(std::uint32_t width, std::uint32_t height) {
  std::string png = image_file("rgb_64x32.png");
  put_be32(png, 16, width);
  put_be32(png, 20, height);
  put_be32(png, 29, crc32(std::string_view{png}.substr(12, 17)));  // "IHDR" and its 13 bytes
  return png;
}

// The offset of the SOF0 marker (baseline frame header) of a JPEG.
std::size_t sof0(const std::string& jpeg) {
  return jpeg.find("\xff\xc0", 2);
}

std::string jpeg_declaring(std::uint16_t width, std::uint16_t height) {
  std::string jpeg = image_file("jpeg420_24x16.jpg");
  const std::size_t at = sof0(jpeg);
  jpeg[at + 5] = static_cast<char>(height >> 8);
  jpeg[at + 6] = static_cast<char>(height & 0xFF);
  jpeg[at + 7] = static_cast<char>(width >> 8);
  jpeg[at + 8] = static_cast<char>(width & 0xFF);
  return jpeg;
}

void expect_refused(const std::string& bytes, errc code, std::string_view reason,
                    const decode_options& options = {}) {
  const auto image = decode_image(as_bytes(bytes), options);
  ASSERT_FALSE(image) << "decoded a " << image->width << " x " << image->height << " image";
  EXPECT_EQ(image.error().code(), code) << image.error().to_string();
  EXPECT_TRUE(contains(image.error().message(), reason));
}

TEST(image_decode_malformed, refuses_empty_input) {
  expect_refused("", errc::invalid_argument, "no data (0 bytes)");
}

TEST(image_decode_malformed, refuses_garbage_naming_its_first_bytes) {
  expect_refused("<html>not an image</html>", errc::unsupported,
                 "unknown format (the 25 bytes start 3c 68 74 6d 6c 3e 6e 6f): only PNG and JPEG");
  std::mt19937 rng{19};
  std::string noise(4096, '\0');
  for (char& c : noise)
    c = static_cast<char>(rng() & 0xFF);
  noise[0] = 'x';
  expect_refused(noise, errc::unsupported, "only PNG and JPEG are supported");
}

TEST(image_decode_malformed, names_formats_it_does_not_read) {
  expect_refused("GIF89a\x01\x00\x01\x00", errc::unsupported, "GIF is not supported");
  expect_refused(std::string{"RIFF\x10\x00\x00\x00WEBPVP8 ", 16}, errc::unsupported,
                 "WebP is not supported");
  expect_refused(std::string{"\x00\x00\x00\x1c"
                             "ftypavif",
                             12},
                 errc::unsupported, "HEIF/AVIF is not supported");
}

TEST(image_decode_malformed, refuses_a_png_signature_followed_by_garbage) {
  expect_refused(std::string{"\x89PNG\r\n\x1a\n"} + std::string(64, 'z'), errc::parse_error,
                 "png: cannot decode");
}

TEST(image_decode_malformed, refuses_truncated_pngs) {
  const std::string png = image_file("rgb_64x32.png");
  for (const std::size_t keep :
       {std::size_t{8}, std::size_t{20}, std::size_t{33}, png.size() / 2, png.size() - 20}) {
    SCOPED_TRACE(keep);
    expect_refused(png.substr(0, keep), errc::parse_error, "png: cannot decode");
  }
  expect_refused(png.substr(0, 500), errc::parse_error,
                 "png: cannot decode: truncated: the data ends after 500 bytes, before the image "
                 "does");
}

TEST(image_decode_malformed, refuses_a_png_with_damaged_image_data) {
  std::string png = image_file("rgb_64x32.png");
  const std::size_t idat = png.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  png[idat + 40] = static_cast<char>(png[idat + 40] ^ 0x5A);
  expect_refused(png, errc::parse_error, "png: cannot decode: IDAT");
}

TEST(image_decode_malformed, refuses_a_zero_size_png) {
  expect_refused(png_declaring(0, 32), errc::parse_error,
                 "png: cannot decode: Invalid IHDR data (after the warning: Image width is zero in "
                 "IHDR)");
  expect_refused(png_declaring(64, 0), errc::parse_error, "Image height is zero in IHDR");
}

TEST(image_decode_malformed, refuses_huge_declared_sizes_before_allocating) {
  // 2^31 - 1 squared would be 4.6e18 pixels; nothing of that size is touched.
  expect_refused(png_declaring(0x7FFFFFFF, 0x7FFFFFFF), errc::out_of_range,
                 "png: a 2147483647 x 2147483647 image (4611686014132420609 pixels) is above the "
                 "limit of 89478485 pixels");
  expect_refused(png_declaring(20000, 20000), errc::out_of_range, "above the limit");
  expect_refused(jpeg_declaring(65000, 65000), errc::out_of_range,
                 "jpeg: a 65000 x 65000 image (4225000000 pixels) is above the limit");
}

TEST(image_decode_malformed, applies_a_caller_pixel_limit) {
  expect_refused(image_file("rgb_64x32.png"), errc::out_of_range,
                 "a 64 x 32 image (2048 pixels) is above the limit of 2047 pixels",
                 {.max_pixels = 2047});
  EXPECT_TRUE(decode_image(as_bytes(image_file("rgb_64x32.png")), {.max_pixels = 2048}));
  expect_refused(image_file("jpeg420_24x16.jpg"), errc::out_of_range, "above the limit of 100",
                 {.max_pixels = 100});
  expect_refused(image_file("rgb_64x32.png"), errc::invalid_argument, "max_pixels must be positive",
                 {.max_pixels = 0});
}

TEST(image_decode_malformed, refuses_truncated_jpegs) {
  const std::string jpeg = image_file("photo_200x150.jpg");
  for (const std::size_t keep :
       {std::size_t{3}, std::size_t{40}, sof0(jpeg) + 4, jpeg.size() / 2, jpeg.size() - 100}) {
    SCOPED_TRACE(keep);
    expect_refused(jpeg.substr(0, keep), errc::parse_error, "jpeg: cannot decode");
  }
  expect_refused(jpeg.substr(0, 5000), errc::parse_error,
                 "jpeg: cannot decode: truncated: the data ends after 5000 bytes, before the image "
                 "does");
}

TEST(image_decode_malformed, refuses_a_corrupt_jpeg_header) {
  std::string bad_length = image_file("jpeg420_24x16.jpg");
  const std::size_t at = sof0(bad_length);
  bad_length[at + 2] = 0;
  bad_length[at + 3] = 3;  // a frame header cannot be 3 bytes long
  expect_refused(bad_length, errc::parse_error, "jpeg: cannot decode");
  std::string bad_precision = image_file("jpeg420_24x16.jpg");
  bad_precision[at + 4] = 7;  // 7-bit samples
  expect_refused(bad_precision, errc::parse_error, "precision");
  expect_refused(std::string{"\xff\xd8\xff"} + std::string(100, '\x01'), errc::parse_error,
                 "jpeg: cannot decode");
}

// Every prefix of a PNG and of a JPEG: an error, or (a cut after the pixel
// data) the whole image; never a crash, a hang or a partial image.
TEST(image_decode_malformed, every_prefix_is_refused_or_complete) {
  for (const std::string name : {"interlaced_24x16.png", "jpeg_progressive_24x16.jpg",
                                 "palette4_24x16.png", "jpeg_cmyk_24x16.jpg"}) {
    SCOPED_TRACE(name);
    const std::string whole = image_file(name);
    const auto full = decode_image(as_bytes(whole));
    ASSERT_TRUE(full) << full.error().to_string();
    int complete = 0;
    for (std::size_t keep = 0; keep < whole.size(); ++keep) {
      const auto image = decode_image(as_bytes(std::string_view{whole}.substr(0, keep)));
      if (image) {
        ++complete;
        EXPECT_EQ(image->pixels, full->pixels) << "prefix of " << keep << " bytes";
      } else {
        EXPECT_FALSE(image.error().message().empty());
      }
    }
    EXPECT_LT(complete, 64) << "most prefixes must be refused";
  }
}

}  // namespace
}  // namespace mstar::models::vision
