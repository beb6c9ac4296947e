// Item digests by the Python preprocess stage's recipe (§1.8). Expected
// values were computed with Python 3 and hashlib from the recipe:
//   sha = hashlib.sha256(file_bytes).digest()
//   fingerprint(sha, "image", "example-preprocess-v1", 30, *[repr(p) for p in params])
#include "resources/kv/item_digest.hpp"

#include <gtest/gtest.h>

#include "core/hex.hpp"

namespace mstar::resources {
namespace {

const std::string file_bytes = "\x89PNG fake image bytes";

digest256 file_sha() {
  return sha256_of({reinterpret_cast<const std::uint8_t*>(file_bytes.data()), file_bytes.size()});
}

TEST(item_digest, hashes_the_file_bytes_with_plain_sha256) {
  EXPECT_EQ(to_hex(file_sha()), "c202b6d309adc82bdfe2c7b37a01064f16bd9fef5f4d47f8e69b28928b9baa46");
}

TEST(item_digest, matches_python_without_params) {
  const auto d = item_digest(file_sha(), "image", "example-preprocess-v1", 30, {}).value();
  EXPECT_EQ(to_hex(d), "3ae3acf8d57e20916b8f163d5c446e6ead7f9a30a91b00b654253f7a2c0eb9fb");
}

TEST(item_digest, matches_python_with_the_repr_of_every_param_kind) {
  const std::vector<preprocess_param> params = {nullptr,
                                                true,
                                                std::int64_t{448},
                                                0.5,
                                                std::string{"bicubic"},
                                                std::string{"it's"},
                                                std::vector<std::uint8_t>{0, 'a', 'b', '\''},
                                                std::string{"True"}};
  const auto d = item_digest(file_sha(), "image", "example-preprocess-v1", 30, params).value();
  EXPECT_EQ(to_hex(d), "73860d56bda8034fea4a9e8b6fde9257657ec9a83e62cf5e27301df9cfa480c3");
}

TEST(python_repr, quotes_like_python_and_tells_true_from_its_text) {
  EXPECT_EQ(python_repr(true).value(), "True");
  EXPECT_EQ(python_repr(std::string{"True"}).value(), "'True'");
  EXPECT_EQ(python_repr(std::string{"it's"}).value(), "\"it's\"");
  EXPECT_EQ(python_repr(std::string{"a'b\"c\n"}).value(), "'a\\'b\"c\\n'");
  EXPECT_EQ(python_repr(std::vector<std::uint8_t>{0, 0xff, '\\'}).value(), "b'\\x00\\xff\\\\'");
  EXPECT_EQ(python_repr(1e-5).value(), "1e-05");
}

TEST(item_digest, refuses_text_whose_repr_it_cannot_write_naming_the_param) {
  const std::vector<preprocess_param> params = {std::int64_t{1}, std::string{"caf\xc3\xa9"}};
  const auto d = item_digest(file_sha(), "image", "p", 4, params);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("params[1]"), std::string::npos) << d.error().message();
}

}  // namespace
}  // namespace mstar::resources
