#include "models/tokenizer.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/models/temp_folder.hpp"
#include "tests/models/tokenizer_reference.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using json = nlohmann::json;

const std::string fixtures = MSTAR_FIXTURES_DIR;

using test::expect_matches_reference;
using test::ids_of;

TEST(bpe_tokenizer, encodes_and_decodes_like_the_tokenizers_package) {
  const auto tok = bpe_tokenizer::load(fixtures + "/tokenizers/tiny_bpe.json");
  ASSERT_TRUE(tok) << tok.error().to_string();
  expect_matches_reference(*tok, "tokenizers/tiny_bpe.expected.json");
}

TEST(bpe_tokenizer, honours_add_prefix_space) {
  const auto tok = bpe_tokenizer::load(fixtures + "/tokenizers/tiny_bpe_prefix_space.json");
  ASSERT_TRUE(tok) << tok.error().to_string();
  expect_matches_reference(*tok, "tokenizers/tiny_bpe_prefix_space.expected.json");
}

TEST(bpe_tokenizer, encodes_the_embedded_models_corpus_like_the_tokenizers_package) {
  // 13 KB: held-out paragraphs of the ten novels it was trained on, and edge cases
  // (tests/fixtures/make_embedded_tokenizer_cases.py).
  const auto tok = bpe_tokenizer::load(std::string{MSTAR_EMBEDDED_MODEL_DIR} + "/tokenizer.json");
  ASSERT_TRUE(tok) << tok.error().to_string();
  expect_matches_reference(*tok, "tokenizers/embedded_default.expected.json");
  EXPECT_EQ(tok->find("<|endoftext|>"), token_id{0});  // eos_token_id in config.json
}

TEST(bpe_tokenizer, reads_merges_written_as_strings_like_pairs) {
  json doc = test::load_fixture_json("tokenizers/tiny_bpe.json");
  for (auto& merge : doc["model"]["merges"]) {
    merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  }
  const auto tok = bpe_tokenizer::parse(doc.dump());
  ASSERT_TRUE(tok) << tok.error().to_string();
  expect_matches_reference(*tok, "tokenizers/tiny_bpe.expected.json");
}

TEST(bpe_tokenizer, finds_vocab_entries_and_special_tokens) {
  const auto tok = bpe_tokenizer::load(fixtures + "/tokenizers/tiny_bpe.json");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->find("<|endoftext|>"), token_id{0});
  EXPECT_EQ(tok->find("<|pad|>"), token_id{1});
  EXPECT_TRUE(tok->find("\xC4\xA0"
                        "a")
                  .has_value());  // "Ġa", the first merge
  EXPECT_FALSE(tok->find("no such token").has_value());
}

TEST(bpe_tokenizer, round_trips_arbitrary_bytes) {
  const auto tok = bpe_tokenizer::load(fixtures + "/tokenizers/tiny_bpe.json");
  ASSERT_TRUE(tok);
  std::string all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
  EXPECT_EQ(tok->decode(std::vector<token_id>{100000}), "\xEF\xBF\xBD");
}

TEST(byte_tokenizer, maps_bytes_to_ids_past_the_offset_and_back) {
  const auto tok = byte_tokenizer::make(3, 512);
  ASSERT_TRUE(tok) << tok.error().to_string();
  EXPECT_EQ(tok->encode("Hi"), (std::vector<token_id>{75, 108}));
  std::string all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
  EXPECT_EQ(tok->vocab_size(), 512);
}

TEST(byte_tokenizer, marks_ids_that_are_not_bytes) {
  const auto tok = byte_tokenizer::make(3, 512);
  ASSERT_TRUE(tok);
  const std::vector<token_id> ids{1, 75, 300, 2};
  EXPECT_EQ(tok->decode(ids),
            "\xEF\xBF\xBD"
            "H\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(ids, true), "H\xEF\xBF\xBD");  // specials dropped, 300 is no byte
}

TEST(byte_tokenizer, refuses_a_vocabulary_too_small_for_every_byte) {
  const auto tok = byte_tokenizer::make(3, 200);
  ASSERT_FALSE(tok);
  EXPECT_TRUE(contains(tok.error().message(), "offset 3 needs ids up to 258"));
  EXPECT_FALSE(byte_tokenizer::make(-1, 512));
}

TEST(load_tokenizer, uses_the_byte_convention_a_fixture_model_declares) {
  const auto tok = load_tokenizer(fixtures + "/models/nemotron_h_tiny_hybrid");
  ASSERT_TRUE(tok) << tok.error().to_string();
  const auto expected = test::load_fixture_json("models/nemotron_h_tiny_hybrid/expected.json");
  EXPECT_EQ((*tok)->encode("Hello"), ids_of(expected["prompts"][1]["prompt_ids"]));
  EXPECT_EQ((*tok)->vocab_size(), 512);
}

TEST(load_tokenizer, reads_the_embedded_models_tokenizer_json) {
  const auto tok = load_tokenizer(MSTAR_EMBEDDED_MODEL_DIR);
  ASSERT_TRUE(tok) << tok.error().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 4096);
  EXPECT_EQ((*tok)->decode((*tok)->encode("Once upon a time")), "Once upon a time");
}

TEST(load_tokenizer, falls_back_to_tokenizer_json) {
  const test::temp_folder dir;
  dir.write("tokenizer.json", test::read_bytes(fixtures + "/tokenizers/tiny_bpe.json"));
  dir.write("config.json", R"({"vocab_size": 420})");
  const auto tok = load_tokenizer(dir.path());
  ASSERT_TRUE(tok) << tok.error().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 420);
}

TEST(load_tokenizer, reports_a_folder_without_a_tokenizer_or_a_bad_declaration) {
  const test::temp_folder dir;
  auto tok = load_tokenizer(dir.path());
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code(), errc::not_found);
  EXPECT_TRUE(contains(tok.error().message(), "no tokenizer.json"));
  dir.write("config.json", R"({"vocab_size": 512, "mstar_tokenizer": "words"})");
  tok = load_tokenizer(dir.path());
  ASSERT_FALSE(tok);
  EXPECT_TRUE(contains(tok.error().message(), "field 'mstar_tokenizer': \"words\" is neither"));
  dir.write("config.json", R"({"vocab_size": 100, "mstar_tokenizer": {"type": "bytes"}})");
  tok = load_tokenizer(dir.path());
  ASSERT_FALSE(tok);
  EXPECT_TRUE(contains(tok.error().message(), "the vocabulary has 100"));
  dir.write("config.json", R"({"mstar_tokenizer": {"type": "bytes", "offset": "x"}})");
  tok = load_tokenizer(dir.path());
  ASSERT_FALSE(tok);
  EXPECT_TRUE(contains(tok.error().message(), "field 'offset': expected an integer"));
}

}  // namespace
}  // namespace mstar::models
