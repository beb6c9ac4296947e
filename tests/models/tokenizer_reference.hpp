#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/tokenizer.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::test {

/// The ids of a JSON list.
inline std::vector<models::token_id> ids_of(const nlohmann::json& list) {
  return list.get<std::vector<models::token_id>>();
}

/// Checks `tok` against what the `tokenizers` package reported for the same
/// tokenizer.json (a fixture written by tests/fixtures/make_*.py): the
/// vocabulary size, and per case the ids of `encode(text,
/// add_special_tokens=False)` and both decodings of them.
inline void expect_matches_reference(const models::tokenizer& tok,
                                     const std::string& expected_file) {
  const auto expected = load_fixture_json(expected_file);
  EXPECT_EQ(tok.vocab_size(), expected["vocab_size"].get<std::int64_t>());
  for (const auto& c : expected["cases"]) {
    const auto text = c["text"].get<std::string>();
    EXPECT_EQ(tok.encode(text), ids_of(c["ids"])) << "encoding '" << text << "'";
    EXPECT_EQ(tok.decode(ids_of(c["ids"])), c["decoded"].get<std::string>()) << text;
    EXPECT_EQ(tok.decode(ids_of(c["ids"]), true), c["decoded_skip_special"].get<std::string>())
        << text;
  }
}

}  // namespace mstar::test
