// Incremental detokenization: UTF-8 never split, stop strings held back
// until they can no longer match, matched text never returned.
#include "engine/text_stream.hpp"

#include <gtest/gtest.h>

namespace mstar::engine {
namespace {

// Byte ids: byte b is id b + 3, as the fixture models declare.
std::vector<token_id> bytes_of(std::string_view s) {
  std::vector<token_id> ids;
  for (const char c : s)
    ids.push_back(static_cast<unsigned char>(c) + 3U);
  return ids;
}

models::byte_tokenizer tokenizer() {
  return models::byte_tokenizer::make(3, 512).value();
}

TEST(text_stream, never_splits_a_utf8_sequence_across_pieces) {
  const auto tok = tokenizer();
  text_stream s{&tok, {}};
  const auto ids = bytes_of("a\xC3\xA9\xE2\x82\xAC!");  // a, e-acute (2 bytes), euro (3 bytes), !
  std::vector<std::string> pieces;
  for (const auto id : ids)
    pieces.push_back(s.push(std::span{&id, 1}).text);
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "\xC3\xA9", "", "", "\xE2\x82\xAC", "!"}));
  EXPECT_EQ(s.flush(), "");
}

TEST(text_stream, flushes_a_cut_tail_as_a_replacement_character) {
  const auto tok = tokenizer();
  text_stream s{&tok, {}};
  const auto ids = bytes_of("x\xE2\x82");
  EXPECT_EQ(s.push(ids).text, "x");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");
}

TEST(text_stream, matches_a_stop_string_across_tokens_and_drops_it) {
  const auto tok = tokenizer();
  text_stream s{&tok, {"STOP"}};
  std::string shown;
  bool stopped = false;
  for (const auto id : bytes_of("go ST"))
    shown += s.push(std::span{&id, 1}).text;
  EXPECT_EQ(shown, "go ");  // "ST" may begin "STOP": held back
  for (const auto id : bytes_of("OP tail")) {
    auto p = s.push(std::span{&id, 1});
    shown += p.text;
    stopped = stopped || p.stopped;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(shown, "go ");
  EXPECT_EQ(s.flush(), "");
}

TEST(text_stream, releases_held_text_when_the_stop_string_does_not_complete) {
  const auto tok = tokenizer();
  text_stream s{&tok, {"STOP", "xyz"}};
  std::string shown;
  for (const auto id : bytes_of("a STO"))
    shown += s.push(std::span{&id, 1}).text;
  EXPECT_EQ(shown, "a ");
  for (const auto id : bytes_of("RE"))
    shown += s.push(std::span{&id, 1}).text;
  EXPECT_EQ(shown, "a STORE");
  for (const auto id : bytes_of("xy"))
    shown += s.push(std::span{&id, 1}).text;
  EXPECT_EQ(shown, "a STORE");
  shown += s.flush();
  EXPECT_EQ(shown, "a STORExy");
}

TEST(text_stream, finds_the_earliest_of_several_stop_strings) {
  const auto tok = tokenizer();
  text_stream s{&tok, {"cd", "b"}};
  auto p = s.push(bytes_of("abcd"));
  EXPECT_TRUE(p.stopped);
  EXPECT_EQ(p.text, "a");
}

TEST(text_stream, complete_utf8_prefix_leaves_out_only_an_incomplete_tail) {
  EXPECT_EQ(complete_utf8_prefix("abc"), 3U);
  EXPECT_EQ(complete_utf8_prefix("ab\xC3"), 2U);
  EXPECT_EQ(complete_utf8_prefix("ab\xF0\x9F\x98"), 2U);
  EXPECT_EQ(complete_utf8_prefix("ab\xF0\x9F\x98\x80"), 6U);
  EXPECT_EQ(complete_utf8_prefix("\x80\x80"), 2U);  // stray continuation bytes stand alone
}

}  // namespace
}  // namespace mstar::engine
