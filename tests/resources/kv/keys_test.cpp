// Page keys against the published vectors, a Python oracle's values and the
// encoding's own rules (reference kv-keys-windowing §1).
#include "resources/kv/keys.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <random>

#include "core/hex.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::resources {
namespace {

using nlohmann::json;

std::vector<std::uint8_t> hex(const std::string& s) {
  return from_hex(s).value();
}

std::string hex_of(const digest256& d) {
  return to_hex(d);
}

std::vector<page_item> items_of(const json& arr) {
  std::vector<page_item> out;
  for (const auto& it : arr) {
    out.push_back(
        page_item{it.at("start").get<std::uint32_t>(), it.at("offset").get<std::uint32_t>(),
                  it.at("length").get<std::uint32_t>(), hex(it.at("digest").get<std::string>())});
  }
  return out;
}

items_by_page items_by_page_of(const json& obj) {
  items_by_page out;
  for (const auto& [k, v] : obj.items())
    out[std::stoul(k)] = items_of(v);
  return out;
}

std::vector<token_id> tokens_of(const json& arr) {
  return to_token_ids(arr.get<std::vector<std::int64_t>>()).value();
}

class published_vectors : public ::testing::Test {
 protected:
  json cases_ = test::load_fixture_json("vectors/page_keys.json").at("cases");
};

TEST_F(published_vectors, all_cases_match_through_the_library) {
  ASSERT_GE(cases_.size(), 9u);
  for (const auto& c : cases_) {
    const auto id = c.at("id").get<std::string>();
    SCOPED_TRACE(id);
    const auto& in = c.at("inputs");
    const auto& expected = c.at("expected");
    const auto fn = c.at("fn").get<std::string>();
    if (fn == "fingerprint") {
      std::vector<std::vector<std::uint8_t>> owned;
      for (const auto& f : in.at("fields")) {
        if (f.at("type") == "bytes") {
          owned.push_back(hex(f.at("value").get<std::string>()));
        } else {
          const auto text = f.at("as_text").get<std::string>();
          owned.emplace_back(text.begin(), text.end());
        }
      }
      const std::vector<byte_view> views(owned.begin(), owned.end());
      EXPECT_EQ(hex_of(fingerprint(std::span{views})), expected.at("digest").get<std::string>());
    } else if (fn == "page_key" || fn == "end_key") {
      auto ids = to_token_ids(in.at("tokens").get<std::vector<std::int64_t>>());
      if (expected.contains("raises")) {
        ASSERT_FALSE(ids.has_value());
        EXPECT_EQ(ids.error().code(), errc::out_of_range);
        continue;
      }
      const auto prev = hex(in.at("prev").get<std::string>());
      const auto items = items_of(in.at("items"));
      auto key = fn == "page_key" ? page_key(prev, *ids, items)
                                  : end_key(prev, *ids, items, in.at("end").get<std::uint64_t>());
      ASSERT_TRUE(key.has_value()) << key.error().message();
      EXPECT_EQ(hex_of(*key), expected.at("key").get<std::string>());
    } else if (fn == "page_items") {
      std::vector<layout_span> spans;
      for (const auto& s : in.at("spans")) {
        layout_span span{s[0].get<std::uint64_t>(), std::nullopt};
        if (!s[1].is_null())
          span.digest = hex(s[1].get<std::string>());
        spans.push_back(span);
      }
      auto items = page_items(spans, in.at("page_size").get<std::int64_t>());
      ASSERT_TRUE(items.has_value());
      EXPECT_EQ(*items, items_by_page_of(expected.at("items_by_page")));
    } else if (fn == "chain") {
      std::vector<std::vector<token_id>> pages;
      for (const auto& p : in.at("pages"))
        pages.push_back(tokens_of(p));
      auto keys = chain(pages, items_by_page_of(in.at("items_by_page")),
                        hex(in.at("root").get<std::string>()));
      ASSERT_TRUE(keys.has_value()) << keys.error().message();
      std::vector<std::string> got;
      for (const auto& k : *keys)
        got.push_back(hex_of(k));
      EXPECT_EQ(got, expected.at("keys").get<std::vector<std::string>>());
    } else {
      ADD_FAILURE() << "vector uses an fn this test does not know: " << fn;
    }
  }
}

TEST(fingerprint, hashes_numbers_booleans_and_none_as_python_str) {
  const std::uint8_t raw[] = {0x00, 0xff};
  // Expected value from Python: fingerprint('model', 128, -5, True, False, None, 500000.0,
  // 1e16, 1e-05, 0.0001, b'\x00\xff', '').
  EXPECT_EQ(hex_of(fingerprint("model", 128, -5, true, false, nullptr, 500000.0, 1e16, 1e-05,
                               0.0001, byte_view{raw}, "")),
            "850ac677e829d36e10f27471bcd010b9b4a1d7b81a37117d32b38cb5a070c336");
}

TEST(fingerprint, with_no_fields_is_sha256_of_nothing) {
  EXPECT_EQ(hex_of(fingerprint()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(fingerprint, keeps_field_boundaries_apart) {
  EXPECT_NE(fingerprint("ab", "c"), fingerprint("a", "bc"));
  EXPECT_EQ(fingerprint("abc"), fingerprint(std::vector<std::uint8_t>{'a', 'b', 'c'}));
}

TEST(python_float_text, matches_python_repr) {
  const std::pair<double, const char*> cases[] = {
      {500000.0, "500000.0"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1.5, "1.5"},
      {-0.0, "-0.0"},
      {0.1, "0.1"},
      {123456789.123, "123456789.123"},
      {2.5e-10, "2.5e-10"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {100.0, "100.0"},
      {1e22, "1e+22"},
      {12345678901234567.0, "1.2345678901234568e+16"},
      {std::numeric_limits<double>::quiet_NaN(), "nan"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
  };
  for (const auto& [value, text] : cases)
    EXPECT_EQ(python_float_text(value), text);
}

TEST(page_key, encodes_an_empty_page_as_twelve_zero_bytes) {
  auto key = page_key({}, {}, {});
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(hex_of(*key), "15ec7bf0b50732b49f8228e07d24365338f9e3ab994b00af08e5a3bffe55fd8b");
}

TEST(page_key, accepts_the_largest_u32_token_id) {
  const token_id ids[] = {0xffffffffu};
  EXPECT_EQ(hex_of(page_key({}, ids).value()),
            "974700f76d5bbae252aa4c900cc3d8101f18765fd1822fae65c615580ed1cbb2");
}

TEST(page_key, tells_an_item_before_an_id_from_an_id_before_an_item) {
  const auto d = fingerprint("image");
  const token_id one[] = {5};
  const page_item item_first[] = {{0, 0, 1, {d.begin(), d.end()}}};
  const page_item item_second[] = {{1, 0, 1, {d.begin(), d.end()}}};
  EXPECT_NE(page_key({}, one, item_first).value(), page_key({}, one, item_second).value());
}

TEST(to_token_ids, rejects_ids_outside_u32_naming_index_and_value) {
  const std::int64_t too_big[] = {1, 4294967296};
  auto r = to_token_ids(too_big);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), errc::out_of_range);
  EXPECT_NE(r.error().message().find("4294967296 at index 1"), std::string::npos);
  const std::int64_t negative[] = {-1};
  EXPECT_FALSE(to_token_ids(negative).has_value());
  const std::int64_t edge[] = {0, 4294967295};
  EXPECT_EQ(to_token_ids(edge).value(), (std::vector<token_id>{0, 4294967295u}));
}

TEST(chain, roots_and_folds_items_like_the_python_oracle) {
  // The oracle rooted the chain at sha256(b"root").
  const auto root_bytes = hex("4813494d137e1631bba301d5acab6e7bb7aa74ce1185d456565ef51d737677b2");
  digest256 r{};
  std::copy(root_bytes.begin(), root_bytes.end(), r.begin());
  const auto d = hex("b29814cf5792e684cd75d6a7fce7a67a11887e312f87ca2ac2496d81f365ff72");
  const std::vector<std::vector<token_id>> pages = {{7, 8}, {}, {9, 10, 11}};
  const items_by_page items = {{0, {{2, 0, 6, d}}}, {1, {{0, 2, 6, d}}}};
  auto keys = chain(pages, items, r);
  ASSERT_TRUE(keys.has_value());
  ASSERT_EQ(keys->size(), 3u);
  EXPECT_EQ(hex_of((*keys)[0]), "ddefe2ba93f52dd6f5e231163e1c3f9c6aea53350f38eb059a7188a980a87cd5");
  EXPECT_EQ(hex_of((*keys)[1]), "23d65f3377562bed92d7941ae1feb4792aeed770b11a963f68bd382cad365d86");
  EXPECT_EQ(hex_of((*keys)[2]), "9b3c51bf1f2599ad3e7c4a0ed1c824624277f625d442b2f828d23a44c25f3974");
}

TEST(chain, of_nothing_is_empty) {
  EXPECT_TRUE(chain({}, {}, {}).value().empty());
}

TEST(chain, rejects_items_on_a_page_it_was_not_given) {
  const std::vector<std::vector<token_id>> pages = {{1, 2}};
  const items_by_page items = {{3, {{0, 0, 4, {1, 2}}}}};
  auto keys = chain(pages, items);
  ASSERT_FALSE(keys.has_value());
  EXPECT_NE(keys.error().message().find("names page 3"), std::string::npos);
}

TEST(chain, equals_page_key_folded_by_hand_for_random_pages) {
  const std::uint32_t seed = 20261130;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng{seed};
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::vector<token_id>> pages(rng() % 6);
    for (auto& p : pages) {
      p.resize(rng() % 20);
      for (auto& t : p)
        t = rng();
    }
    auto keys = chain(pages).value();
    std::vector<std::uint8_t> prev;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      const auto k = page_key(prev, pages[i]).value();
      EXPECT_EQ(k, keys[i]);
      prev.assign(k.begin(), k.end());
    }
  }
}

TEST(page_items, follows_the_upstream_layout_example) {
  const auto d = fingerprint("img");
  const std::vector<std::uint8_t> dv(d.begin(), d.end());
  const layout_span spans[] = {{20, std::nullopt}, {30, dv}, {25, std::nullopt}};
  auto items = page_items(spans, 16).value();
  const items_by_page expected = {
      {1, {{4, 0, 30, dv}}}, {2, {{0, 12, 30, dv}}}, {3, {{0, 28, 30, dv}}}};
  EXPECT_EQ(items, expected);
}

TEST(page_items, zero_length_item_mid_page_yields_one_item_and_on_a_boundary_none) {
  const std::vector<std::uint8_t> d = {0xab};
  const layout_span mid[] = {{3, std::nullopt}, {0, d}};
  EXPECT_EQ(page_items(mid, 4).value(), (items_by_page{{0, {{3, 0, 0, d}}}}));
  const layout_span boundary[] = {{4, std::nullopt}, {0, d}};
  EXPECT_TRUE(page_items(boundary, 4).value().empty());
}

TEST(page_items, rejects_a_page_size_below_one) {
  auto r = page_items({}, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), errc::invalid_argument);
  EXPECT_NE(r.error().message().find("page_size"), std::string::npos);
}

TEST(end_key, rejects_an_end_that_is_not_an_item_end) {
  const token_id ids[] = {1, 2};
  const page_item items[] = {{0, 0, 3, {9}}};
  // Item covers slots 0..2; end 1 would need -2 ids.
  auto r = end_key({}, ids, items, 1);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), errc::invalid_argument);
  // end 5 would need 2 ids after the item: fine; end 6 needs 3: too many.
  EXPECT_TRUE(end_key({}, ids, items, 5).has_value());
  EXPECT_FALSE(end_key({}, ids, items, 6).has_value());
}

TEST(end_key, equals_page_key_of_the_items_and_ids_before_the_end) {
  const token_id ids[] = {1, 2, 3, 4};
  const std::vector<std::uint8_t> d = {7, 7};
  const page_item items[] = {{1, 0, 2, d}, {5, 0, 9, d}};
  // Slots: id 1, item [1,3), ids 2,3 at 3,4, second item from 5: end=5 keeps
  // the first item and ids {1,2,3}.
  const token_id kept[] = {1, 2, 3};
  const page_item kept_items[] = {{1, 0, 2, d}};
  EXPECT_EQ(end_key({}, ids, items, 5).value(), page_key({}, kept, kept_items).value());
}

}  // namespace
}  // namespace mstar::resources
