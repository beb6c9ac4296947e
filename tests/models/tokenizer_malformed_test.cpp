#include <functional>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "models/tokenizer.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/matchers.hpp"

namespace mstar::models {
namespace {

using mstar::test::contains;
using json = nlohmann::json;

struct mutation {
  const char* name;
  std::function<void(json&)> apply;
  errc code;
  const char* message;
};

TEST(bpe_tokenizer_malformed, names_the_field_and_reason_of_every_failure) {
  const json good = test::load_fixture_json("tokenizers/tiny_bpe.json");
  const mutation cases[] = {
      {"no model", [](json& d) { d.erase("model"); }, errc::parse_error,
       "field 'model': not an object"},
      {"wordpiece", [](json& d) { d["model"]["type"] = "WordPiece"; }, errc::unsupported,
       "field 'model.type': 'WordPiece' is not supported (BPE)"},
      {"vocab list", [](json& d) { d["model"]["vocab"] = json::array(); }, errc::parse_error,
       "field 'model.vocab': not an object"},
      {"negative id", [](json& d) { d["model"]["vocab"]["a"] = -4; }, errc::parse_error,
       "id of 'a' is -4"},
      {"merges object", [](json& d) { d["model"]["merges"] = json::object(); }, errc::parse_error,
       "field 'model.merges': not a list"},
      {"merge unknown",
       [](json& d) {
         d["model"]["merges"][3] = {"zz", "qq"};
       },
       errc::parse_error, "field 'model.merges[3]': 'zz' is not in the vocab"},
      {"merge shape", [](json& d) { d["model"]["merges"][0] = "abc"; }, errc::parse_error,
       "field 'model.merges[0]': \"abc\" is not"},
      {"byte fallback", [](json& d) { d["model"]["byte_fallback"] = true; }, errc::unsupported,
       "field 'model.byte_fallback'"},
      {"subword prefix", [](json& d) { d["model"]["continuing_subword_prefix"] = "##"; },
       errc::unsupported, "field 'model.continuing_subword_prefix'"},
      {"ignore_merges type", [](json& d) { d["model"]["ignore_merges"] = "yes"; },
       errc::parse_error, "'ignore_merges' is not true or false"},
      {"normalizer",
       [](json& d) {
         d["normalizer"] = {{"type", "NFC"}};
       },
       errc::unsupported, "field 'normalizer': type 'NFC' is not supported"},
      {"no pre_tokenizer", [](json& d) { d["pre_tokenizer"] = nullptr; }, errc::unsupported,
       "not a byte-level tokenizer"},
      {"split",
       [](json& d) {
         d["pre_tokenizer"] = {{"type", "Split"}};
       },
       errc::unsupported, "field 'pre_tokenizer': type 'Split' is not supported"},
      {"sequence",
       [](json& d) {
         d["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", 3}};
       },
       errc::unsupported, "a Sequence other than [ByteLevel]"},
      {"prefix type", [](json& d) { d["pre_tokenizer"]["add_prefix_space"] = 1; },
       errc::parse_error, "'add_prefix_space' is not true or false"},
      {"decoder",
       [](json& d) {
         d["decoder"] = {{"type", "WordPiece"}};
       },
       errc::unsupported, "field 'decoder'"},
      {"added content", [](json& d) { d["added_tokens"][0].erase("content"); }, errc::parse_error,
       "field 'added_tokens[0]': needs a non-negative 'id'"},
      {"added special", [](json& d) { d["added_tokens"][1]["special"] = "x"; }, errc::parse_error,
       "'special' is not true or false"},
      {"missing byte", [](json& d) { d["model"]["vocab"].erase("!"); }, errc::parse_error, "'!'"},
      {"bad unk", [](json& d) { d["model"]["unk_token"] = "<unk>"; }, errc::parse_error,
       "field 'model.unk_token': is not in the vocab"},
      {"root", [](json& d) { d = json::array(); }, errc::parse_error, "not a JSON object"},
  };
  for (const auto& c : cases) {
    json doc = good;
    c.apply(doc);
    const auto tok = bpe_tokenizer::parse(doc.dump(), "tok.json");
    ASSERT_FALSE(tok) << c.name;
    EXPECT_EQ(tok.error().code(), c.code) << c.name << ": " << tok.error().to_string();
    EXPECT_TRUE(contains(tok.error().message(), c.message)) << c.name;
    EXPECT_TRUE(contains(tok.error().message(), "tok.json")) << c.name;
  }
}

TEST(bpe_tokenizer_malformed, reports_text_that_is_not_json_and_missing_files) {
  auto tok = bpe_tokenizer::parse("{\"model\": ", "tok.json");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code(), errc::parse_error);
  EXPECT_TRUE(contains(tok.error().message(), "tok.json is not valid JSON"));
  tok = bpe_tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code(), errc::not_found);
}

TEST(bpe_tokenizer_malformed, tolerates_a_missing_byte_when_there_is_an_unk_token) {
  json doc = test::load_fixture_json("tokenizers/tiny_bpe.json");
  doc["model"]["vocab"].erase("~");
  doc["model"]["vocab"]["<unk>"] = 999;
  doc["model"]["unk_token"] = "<unk>";
  const auto tok = bpe_tokenizer::parse(doc.dump());
  ASSERT_TRUE(tok) << tok.error().to_string();
  const auto ids = tok->encode("a~");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), token_id{999});
}

}  // namespace
}  // namespace mstar::models
