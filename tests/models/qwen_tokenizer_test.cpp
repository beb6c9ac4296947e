// The Qwen2 / Qwen3 tokenizer pipeline (NFC, a Split regex then ByteLevel,
// added tokens matched before pre-tokenization) against the `tokenizers`
// package: tests/fixtures/make_qwen_tokenizer.py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "models/tokenizer.hpp"
#include "tests/models/tokenizer_reference.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::models {
namespace {

using json = nlohmann::json;
using test::ids_of;

const std::string folder = std::string{MSTAR_FIXTURES_DIR} + "/tokenizers/qwen_like";

// What make_qwen_tokenizer.py's apply() does to the base tokenizer.json.
json apply(json doc, const json& changes) {
  for (const auto& [field, value] : changes.items()) {
    if (field == "added_tokens+") {
      for (const auto& token : value)
        doc["added_tokens"].push_back(token);
    } else if (field.starts_with("model.")) {
      doc["model"][field.substr(6)] = value;
    } else {
      doc[field] = value;
    }
  }
  return doc;
}

TEST(qwen_tokenizer, encodes_and_decodes_like_the_tokenizers_package) {
  const auto tok = bpe_tokenizer::load(folder + "/tokenizer.json");
  ASSERT_TRUE(tok) << tok.error().to_string();
  test::expect_matches_reference(*tok, "tokenizers/qwen_like/cases.json");
}

TEST(qwen_tokenizer, matches_the_tokenizers_package_under_each_variant_pipeline) {
  const json base = test::load_fixture_json("tokenizers/qwen_like/tokenizer.json");
  const json variants = test::load_fixture_json("tokenizers/qwen_like/variants.json");
  const json& texts = variants["texts"];
  ASSERT_GE(variants["variants"].size(), 20U);
  for (const auto& variant : variants["variants"]) {
    const auto name = variant["name"].get<std::string>();
    const auto tok = bpe_tokenizer::parse(apply(base, variant["changes"]).dump(), name);
    ASSERT_TRUE(tok) << tok.error().to_string();
    ASSERT_EQ(variant["ids"].size(), texts.size()) << name;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const auto text = texts[i].get<std::string>();
      const auto ids = ids_of(variant["ids"][i]);
      EXPECT_EQ(tok->encode(text), ids) << name << ": encoding '" << text << "'";
      const json& decoded = variant["decoded"][i];
      EXPECT_EQ(tok->decode(ids), decoded.is_null() ? text : decoded.get<std::string>())
          << name << ": decoding '" << text << "'";
    }
  }
}

TEST(qwen_tokenizer, loads_from_a_model_folder_and_finds_its_added_tokens) {
  const auto tok = load_tokenizer(folder);
  ASSERT_TRUE(tok) << tok.error().to_string();
  const json doc = test::load_fixture_json("tokenizers/qwen_like/tokenizer.json");
  EXPECT_EQ((*tok)->vocab_size(), 2018);
  const auto bpe = bpe_tokenizer::load(folder + "/tokenizer.json");
  ASSERT_TRUE(bpe);
  ASSERT_EQ(doc["added_tokens"].size(), 18U);
  for (const auto& added : doc["added_tokens"]) {
    const auto content = added["content"].get<std::string>();
    EXPECT_EQ(bpe->find(content), added["id"].get<token_id>()) << content;
    EXPECT_EQ((*tok)->encode(content), std::vector<token_id>{added["id"].get<token_id>()});
  }
}

TEST(qwen_tokenizer, keeps_bytes_that_are_not_utf8_and_normalizes_around_them) {
  const auto tok = bpe_tokenizer::load(folder + "/tokenizer.json");
  ASSERT_TRUE(tok);
  std::string all;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
  // A stray 0xE9, a truncated sequence and a surrogate stay; "e" + U+0301 composes.
  const std::string text = "caf\xE9 cafe\xCC\x81 \xE2\x82 \xED\xA0\x80x<|im_end|>\xFF";
  EXPECT_EQ(tok->decode(tok->encode(text)),
            "caf\xE9 caf\xC3\xA9 \xE2\x82 \xED\xA0\x80x<|im_end|>\xFF");
}

TEST(qwen_tokenizer, encodes_the_same_from_several_threads) {
  const auto tok = bpe_tokenizer::load(folder + "/tokenizer.json");
  ASSERT_TRUE(tok);
  const json cases = test::load_fixture_json("tokenizers/qwen_like/cases.json")["cases"];
  std::vector<std::string> texts;
  for (const auto& c : cases)
    texts.push_back(c["text"].get<std::string>());
  std::vector<std::vector<std::vector<token_id>>> results(4);
  std::vector<std::thread> threads;
  for (auto& out : results) {
    threads.emplace_back([&tok, &texts, &out] {
      for (int round = 0; round < 20; ++round) {
        for (const auto& text : texts)
          out.push_back(tok->encode(text));
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& out : results) {
    ASSERT_EQ(out.size(), 20 * texts.size());
    for (std::size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(out[i], ids_of(cases[i % texts.size()]["ids"])) << texts[i % texts.size()];
  }
}

}  // namespace
}  // namespace mstar::models
