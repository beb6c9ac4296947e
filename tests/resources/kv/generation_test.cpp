// Generated pages after a prompt (reference §1.10): the vectors written by
// tests/fixtures/make_generation_vectors.py, fed all at once and id by id,
// and the seeds that describe no prompt.
#include "resources/kv/generation.hpp"

#include <gtest/gtest.h>

#include "core/hex.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::resources {
namespace {

using nlohmann::json;

std::vector<prompt_span> spans_of(const json& spans) {
  std::vector<prompt_span> out;
  for (const auto& s : spans) {
    if (s.contains("ids")) {
      out.emplace_back(id_span{s.at("ids").get<std::vector<token_id>>()});
    } else {
      out.emplace_back(item_span{s.at("length").get<std::uint64_t>(),
                                 from_hex(s.at("digest").get<std::string>()).value()});
    }
  }
  return out;
}

std::vector<std::string> whole_page_keys(const page_chain& c) {
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < c.keyed_pages; ++i)
    out.push_back(to_hex(c.keys[static_cast<std::size_t>(i)]));
  return out;
}

TEST(extend_page_chain, keys_every_generation_vector_fed_at_once_or_id_by_id) {
  const auto cases = test::load_fixture_json("vectors/generation_extend.json").at("cases");
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("id").get<std::string>());
    const auto& in = c.at("inputs");
    const auto& expected = c.at("expected");
    const auto ps = in.at("page_size").get<std::int64_t>();
    const auto spans = spans_of(in.at("spans"));
    const auto sampled = in.at("sampled").get<std::vector<token_id>>();
    const auto prompt = key_prompt(spans, ps).value();

    auto at_once = start_page_chain(prompt, ps).value();
    const auto before = at_once.keyed_pages;
    const auto added = extend_page_chain(at_once, sampled, ps).value();
    EXPECT_EQ(at_once.keyed_pages, expected.at("keyed_pages").get<std::int64_t>());
    EXPECT_EQ(added, at_once.keyed_pages - before);
    EXPECT_EQ(json(whole_page_keys(at_once)), expected.at("whole_page_keys"));
    EXPECT_EQ(json(at_once.unkeyed), expected.at("unkeyed"));

    auto by_one = start_page_chain(prompt, ps).value();
    for (const token_id t : sampled)
      ASSERT_TRUE(extend_page_chain(by_one, std::span{&t, 1}, ps));
    EXPECT_EQ(by_one, at_once);
  }
}

TEST(start_page_chain, counts_keyed_pages_as_whole_slots_over_the_page_size) {
  // ps 16: text 10, image 10 -> 20 slots, one whole page; the partial page
  // holds 4 image slots and no ids.
  const std::vector<std::uint8_t> digest(32, 0xab);
  const std::vector<prompt_span> spans = {id_span{std::vector<token_id>(10, 1)},
                                          item_span{10, digest}};
  const auto prompt = key_prompt(spans, 16).value();
  ASSERT_EQ(prompt.keys.size(), 2u);
  ASSERT_TRUE(prompt.tail.empty());
  const auto c = start_page_chain(prompt, 16).value();
  EXPECT_EQ(c.keyed_pages, 1);
  ASSERT_EQ(c.unkeyed_items.size(), 1u);
  EXPECT_EQ(c.unkeyed_items[0], (page_item{0, 6, 10, digest}));
  EXPECT_EQ(item_slots_on_page(c.unkeyed_items), 4u);
}

TEST(start_page_chain, refuses_keys_that_describe_another_prompt) {
  const std::vector<prompt_span> spans = {id_span{{1, 2, 3, 4, 5}}};
  auto prompt = key_prompt(spans, 4).value();
  prompt.keys.push_back(prompt.keys.back());
  const auto c = start_page_chain(prompt, 4);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("3 keys"), std::string::npos) << c.error().message();

  prompt = key_prompt(spans, 4).value();
  prompt.tail.push_back(9);  // 2 ids where the partial page holds 1 slot
  EXPECT_FALSE(start_page_chain(prompt, 4));
  EXPECT_FALSE(start_page_chain(prompt, 0));
}

TEST(start_page_chain, accepts_a_prompt_without_its_partial_page_key) {
  const std::vector<prompt_span> spans = {id_span{{1, 2, 3, 4, 5}}};
  auto full = key_prompt(spans, 4).value();
  auto without = full;
  without.keys.pop_back();
  auto a = start_page_chain(full, 4).value();
  auto b = start_page_chain(without, 4).value();
  const std::vector<token_id> more{6, 7, 8, 9};
  ASSERT_TRUE(extend_page_chain(a, more, 4));
  ASSERT_TRUE(extend_page_chain(b, more, 4));
  EXPECT_EQ(a, b);
}

TEST(extend_page_chain, folds_the_root_into_a_first_generated_page) {
  const std::vector<prompt_span> spans = {id_span{{1, 2}}};
  const std::vector<std::uint8_t> root(32, 7);
  auto rooted = start_page_chain(key_prompt(spans, 4, root).value(), 4, root).value();
  auto unrooted = start_page_chain(key_prompt(spans, 4).value(), 4).value();
  const std::vector<token_id> more{3, 4};
  ASSERT_EQ(extend_page_chain(rooted, more, 4).value(), 1);
  ASSERT_EQ(extend_page_chain(unrooted, more, 4).value(), 1);
  const std::vector<std::vector<token_id>> page = {{1, 2, 3, 4}};
  EXPECT_EQ(rooted.keys[0], chain(page, {}, root).value()[0]);
  EXPECT_NE(rooted.keys[0], unrooted.keys[0]);
}

TEST(extend_page_chain, refuses_a_page_whose_items_leave_no_room) {
  page_chain c;
  c.unkeyed_items = {page_item{0, 0, 4, std::vector<std::uint8_t>(32, 1)}};
  const std::vector<token_id> more{1};
  const auto added = extend_page_chain(c, more, 4);
  ASSERT_FALSE(added);
  EXPECT_NE(added.error().message().find("no room"), std::string::npos);
  EXPECT_TRUE(c.unkeyed.empty());  // refused before anything changed
}

}  // namespace
}  // namespace mstar::resources
