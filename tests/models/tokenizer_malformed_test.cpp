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

// A Sequence of `split` (a Split pre-tokenizer) then ByteLevel, as Qwen writes it.
json split_then_byte_level(json split) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {std::move(split),
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

json split_step(json pattern, json behavior = "Isolated") {
  return {{"type", "Split"},
          {"pattern", std::move(pattern)},
          {"behavior", std::move(behavior)},
          {"invert", false}};
}

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
         d["normalizer"] = {{"type", "Lowercase"}};
       },
       errc::unsupported, "field 'normalizer': type 'Lowercase' is not supported"},
      {"normalizer in a sequence",
       [](json& d) {
         d["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [
             {"type": "NFC"}, {"type": "Strip", "left": true}]})");
       },
       errc::unsupported, "field 'normalizer.normalizers[1]': type 'Strip' is not supported"},
      {"normalizer sequence list",
       [](json& d) {
         d["normalizer"] = {{"type", "Sequence"}, {"normalizers", "NFC"}};
       },
       errc::parse_error, "field 'normalizer.normalizers': not a list"},
      {"no pre_tokenizer", [](json& d) { d["pre_tokenizer"] = nullptr; }, errc::unsupported,
       "not a byte-level tokenizer"},
      {"split without pattern",
       [](json& d) {
         d["pre_tokenizer"] = {{"type", "Split"}};
       },
       errc::parse_error, "field 'pre_tokenizer.pattern': needs {\"Regex\""},
      {"sequence",
       [](json& d) {
         d["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", 3}};
       },
       errc::parse_error, "field 'pre_tokenizer.pretokenizers': not a non-empty list"},
      {"whitespace",
       [](json& d) {
         d["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       errc::unsupported, "field 'pre_tokenizer': type 'Whitespace' is not supported"},
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
      {"added flag", [](json& d) { d["added_tokens"][0]["lstrip"] = 1; }, errc::parse_error,
       "field 'added_tokens[0]': 'lstrip' is not true or false"},
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

TEST(bpe_tokenizer_malformed, names_the_split_field_and_reason_of_every_failure) {
  const json good = test::load_fixture_json("tokenizers/tiny_bpe.json");
  const mutation cases[] = {
      {"bad regex",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"Regex", "(?i:'s|'t"}}));
       },
       errc::parse_error,
       "field 'pre_tokenizer.pretokenizers[0].pattern.Regex': does not compile (Oniguruma: end "
       "pattern with unmatched parenthesis)"},
      {"bad class",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"Regex", R"(\p{Nope}+)"}}));
       },
       errc::parse_error,
       "field 'pre_tokenizer.pretokenizers[0].pattern.Regex': does not compile (Oniguruma: "
       "invalid character property name {Nope})"},
      {"unknown behaviour",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"Regex", "a"}}, "Shuffled"));
       },
       errc::unsupported,
       "field 'pre_tokenizer.pretokenizers[0].behavior': 'Shuffled' is not supported (Removed, "
       "Isolated, MergedWithPrevious, MergedWithNext or Contiguous)"},
      {"no behaviour",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"Regex", "a"}}, nullptr));
       },
       errc::parse_error, "field 'pre_tokenizer.pretokenizers[0].behavior': missing"},
      {"pattern kind",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"Glob", "*"}}));
       },
       errc::parse_error, "field 'pre_tokenizer.pretokenizers[0].pattern': needs"},
      {"pattern both",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"Regex", "a"}, {"String", "a"}}));
       },
       errc::parse_error, "field 'pre_tokenizer.pretokenizers[0].pattern': needs"},
      {"pattern type",
       [](json& d) {
         d["pre_tokenizer"] = split_then_byte_level(split_step({{"String", 7}}));
       },
       errc::parse_error, "field 'pre_tokenizer.pretokenizers[0].pattern': needs"},
      {"invert type",
       [](json& d) {
         auto step = split_step({{"Regex", "a"}});
         step["invert"] = "no";
         d["pre_tokenizer"] = split_then_byte_level(step);
       },
       errc::parse_error, "field 'pre_tokenizer.pretokenizers[0]': 'invert' is not true or false"},
      {"byte level first",
       [](json& d) {
         auto sequence = split_then_byte_level(split_step({{"Regex", "a"}}));
         std::swap(sequence["pretokenizers"][0], sequence["pretokenizers"][1]);
         d["pre_tokenizer"] = sequence;
       },
       errc::unsupported,
       "field 'pre_tokenizer.pretokenizers[0]': ByteLevel before another step is not supported"},
      {"split alone",
       [](json& d) {
         d["pre_tokenizer"] = split_step({{"Regex", "a"}});
       },
       errc::unsupported, "field 'pre_tokenizer': the last step is not ByteLevel"},
      {"digits",
       [](json& d) {
         auto sequence = split_then_byte_level(split_step({{"Regex", "a"}}));
         sequence["pretokenizers"][0] = {{"type", "Digits"}, {"individual_digits", true}};
         d["pre_tokenizer"] = sequence;
       },
       errc::unsupported, "field 'pre_tokenizer.pretokenizers[0]': type 'Digits' is not supported"},
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
