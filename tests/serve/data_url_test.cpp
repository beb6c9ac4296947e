// Base64 data URLs of the chat endpoint's image parts: RFC 4648's vectors,
// every padding form, and the errors (with the offset of the bad character).
#include "serve/internal/data_url.hpp"

#include <gtest/gtest.h>
#include <string>

namespace mstar::serve::internal {
namespace {

std::string text_of(const result<std::vector<std::byte>>& r) {
  EXPECT_TRUE(r.has_value()) << r.error().message();
  if (!r)
    return {};
  std::string out;
  for (const auto b : *r)
    out += static_cast<char>(b);
  return out;
}

std::string error_of(const result<std::vector<std::byte>>& r) {
  EXPECT_FALSE(r.has_value());
  return r ? std::string{} : r.error().message();
}

TEST(data_url, decodes_rfc_4648_test_vectors) {
  EXPECT_EQ(text_of(decode_base64("")), "");
  EXPECT_EQ(text_of(decode_base64("Zg==")), "f");
  EXPECT_EQ(text_of(decode_base64("Zm8=")), "fo");
  EXPECT_EQ(text_of(decode_base64("Zm9v")), "foo");
  EXPECT_EQ(text_of(decode_base64("Zm9vYg==")), "foob");
  EXPECT_EQ(text_of(decode_base64("Zm9vYmE=")), "fooba");
  EXPECT_EQ(text_of(decode_base64("Zm9vYmFy")), "foobar");
  EXPECT_EQ(text_of(decode_base64("+/+/")), "\xfb\xff\xbf");
}

TEST(data_url, refuses_bad_base64_naming_the_offset) {
  EXPECT_EQ(error_of(decode_base64("Zm9")), "base64 of 3 characters, not a multiple of 4");
  EXPECT_EQ(error_of(decode_base64("Zm9v*mFy")), "not base64: character '*' at offset 4");
  EXPECT_EQ(error_of(decode_base64("Zg==Zm9v")), "not base64: character '=' at offset 2");
  EXPECT_EQ(error_of(decode_base64("Z===")), "not base64: character '=' at offset 1");
  EXPECT_EQ(error_of(decode_base64("Zg=v")), "not base64: character '=' at offset 2");
  EXPECT_EQ(error_of(decode_base64("Zm9v\nmFy")), "not base64: character 0x0a at offset 4");
  EXPECT_EQ(error_of(decode_base64("Zm-_")), "not base64: character '-' at offset 2");
}

TEST(data_url, takes_png_and_jpeg_data_urls_only) {
  EXPECT_EQ(text_of(image_data_url("data:image/png;base64,Zm9v")), "foo");
  EXPECT_EQ(text_of(image_data_url("DATA:Image/JPEG;BASE64,Zm9v")), "foo");
  EXPECT_EQ(text_of(image_data_url("data:image/jpg;base64,Zm8=")), "fo");
  EXPECT_NE(error_of(image_data_url("https://example.com/a.png"))
                .find("a https URL: this server "
                      "fetches nothing"),
            std::string::npos);
  EXPECT_NE(error_of(image_data_url("file:///etc/passwd")).find("a file URL"), std::string::npos);
  EXPECT_NE(error_of(image_data_url("a.png")).find("no scheme"), std::string::npos);
  EXPECT_EQ(error_of(image_data_url("data:image/gif;base64,R0lG")),
            "media type 'image/gif' is not supported (image/png, image/jpeg)");
  EXPECT_EQ(error_of(image_data_url("data:image/png,abc")),
            "the data URL is not base64 (data:image/png;base64,...)");
  EXPECT_EQ(error_of(image_data_url("data:image/png;base64")),
            "a data URL without ',' before its data");
  EXPECT_EQ(error_of(image_data_url("data:image/png;base64,Zm9v!")),
            "base64 of 5 characters, not a multiple of 4");
}

}  // namespace
}  // namespace mstar::serve::internal
