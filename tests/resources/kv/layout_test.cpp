#include "resources/kv/layout.hpp"

#include <gtest/gtest.h>

#include "core/hex.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::resources {
namespace {

std::vector<token_id> iota_ids(token_id from, std::size_t n) {
  std::vector<token_id> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = from + static_cast<token_id>(i);
  return out;
}

TEST(key_prompt, reproduces_the_published_image_layout_chain) {
  const auto cases = ::mstar::test::load_fixture_json("vectors/page_keys.json").at("cases");
  const nlohmann::json* chain_case = nullptr;
  for (const auto& c : cases) {
    if (c.at("id") == "chain_upstream_image_layout")
      chain_case = &c;
  }
  ASSERT_NE(chain_case, nullptr);
  const auto digest =
      from_hex("f9bba44eba4296de98433e6d1a117a629f8c3366d59e2ed55423d3d0c2eaf87b").value();
  const prompt_span spans[] = {id_span{iota_ids(1, 20)}, item_span{30, digest},
                               id_span{iota_ids(100, 25)}};
  auto keyed = key_prompt(spans, 16);
  ASSERT_TRUE(keyed.has_value()) << keyed.error().message();
  std::vector<std::string> got;
  for (const auto& k : keyed->keys)
    got.push_back(to_hex(k));
  EXPECT_EQ(got, chain_case->at("expected").at("keys").get<std::vector<std::string>>());
  EXPECT_EQ(keyed->tail, iota_ids(114, 11));
  EXPECT_EQ(keyed->total_slots, 75u);
  ASSERT_EQ(keyed->items.size(), 3u);
  EXPECT_EQ(keyed->items.at(2).front().offset, 12u);
}

TEST(key_prompt, has_no_tail_when_page_aligned) {
  const prompt_span spans[] = {id_span{iota_ids(0, 8)}};
  auto keyed = key_prompt(spans, 4).value();
  EXPECT_EQ(keyed.keys.size(), 2u);
  EXPECT_TRUE(keyed.tail.empty());
}

TEST(key_prompt, roots_the_chain_when_given_a_root) {
  const prompt_span spans[] = {id_span{iota_ids(0, 6)}};
  const auto root = fingerprint("pool root");
  EXPECT_NE(key_prompt(spans, 4, root).value().keys, key_prompt(spans, 4).value().keys);
  const std::vector<std::vector<token_id>> pages = {iota_ids(0, 4), iota_ids(4, 2)};
  EXPECT_EQ(key_prompt(spans, 4, root).value().keys, chain(pages, {}, root).value());
}

TEST(key_prompt, refuses_an_empty_item_span_and_a_bad_page_size) {
  const prompt_span empty_item[] = {id_span{{1}}, item_span{0, {1, 2}}};
  auto r = key_prompt(empty_item, 4);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("spans[1]"), std::string::npos);
  const prompt_span ok[] = {id_span{{1}}};
  EXPECT_FALSE(key_prompt(ok, 0).has_value());
}

TEST(key_prompt, keys_a_page_holding_only_an_image) {
  const prompt_span spans[] = {id_span{{1, 2}}, item_span{8, {9}}, id_span{{3}}};
  auto keyed = key_prompt(spans, 4).value();
  ASSERT_EQ(keyed.keys.size(), 3u);  // slots 0-3, 4-7 (image only), 8-10
  EXPECT_EQ(keyed.tail, (std::vector<token_id>{3}));
}

}  // namespace
}  // namespace mstar::resources
