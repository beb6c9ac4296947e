// KV pool export / import of end keys (reference §1.7): a stream's item
// ends whose page heads the exporter caches travel with it (their copies are
// held by the export and fetched into free pages of the importer), so after
// the import the importer's index holds what the exporter's does for the
// moved pages, and a prompt with the same image and other text after it
// reuses the importer's cache up to the image's end. Nothing leaks on
// either side; an aborted import gives back exactly what it took.
#include <cstring>
#include <gtest/gtest.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/layout.hpp"
#include "tests/resources/kv/kv_pool_fixture.hpp"

namespace mstar::resources {
namespace {
// Its own namespace: a unity batch puts this file beside
// kv_pool_transfer_test.cpp, whose helpers have the same names.
namespace transfer_ends {

using namespace mstar::resources::test;

constexpr std::int32_t ps = 16;

void check(const kv_pool& pool) {
  auto ok = pool.check_invariants();
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

std::unique_ptr<kv_pool> pool_of(std::int64_t pages = 64) {
  return kv_pool::make("kv", small_config(ps, pages), "test-model").value();
}

// Text 20 / image 30 / `after` ids (from `first_after`): the image ends at
// slot 50, inside page 3 (slots 48-63).
std::vector<prompt_span> text_image(std::size_t after, token_id first_after = 500) {
  std::vector<token_id> before(20), tail(after);
  for (std::size_t i = 0; i < before.size(); ++i)
    before[i] = 100 + static_cast<token_id>(i);
  for (std::size_t i = 0; i < tail.size(); ++i)
    tail[i] = first_after + static_cast<token_id>(i);
  return {id_span{before}, item_span{30, std::vector<std::uint8_t>(32, 0x11)}, id_span{tail}};
}

// A prefill of `spans` under `rid`: ingest, probe, run the rest; the probe's answer.
std::int64_t serve(kv_pool& pool, const std::string& rid, const std::vector<prompt_span>& spans) {
  auto keyed = key_prompt(spans, ps).value();
  const auto slots = static_cast<std::int64_t>(keyed.total_slots);
  pool.ingest_request(rid, {{"main", make_prefix_seed(std::move(keyed), ps)}});
  const auto hit = pool.resolve_cached_prefix(rid).value_or(0);
  check(pool);
  kv_step step;
  step.segments = {{rid, "main", slots - hit}};
  step_context ctx;
  EXPECT_TRUE(pool.admit(step, ctx).ok);
  EXPECT_TRUE(pool.plan(step, ctx).has_value());
  EXPECT_TRUE(pool.commit(step, ctx).has_value());
  check(pool);
  return hit;
}

// Distinct bytes in every page the stream holds.
void fill(kv_pool& pool, const std::vector<page_id>& pages) {
  for (const page_id p : pages)
    std::memset(pool.page_data(p), 0x40 + p, pool.geometry().page_bytes());
}

// What the transfer agent does: every fetched page's bytes, end copies too.
void transfer(kv_pool& from, kv_pool& to, const kv_import& taken) {
  for (const auto& pairs : {taken.fetch, taken.end_fetch}) {
    for (const auto& [local, remote] : pairs)
      std::memcpy(to.page_data(local), from.page_data(remote), from.geometry().page_bytes());
  }
}

// Nothing but the cache and the sink is held.
void expect_idle(const kv_pool& pool) {
  check(pool);
  EXPECT_EQ(pool.num_free_pages() + pool.num_cached_pages(), pool.pages().num_pages() - 1);
  EXPECT_EQ(pool.num_evictable_pages(), pool.num_cached_pages());
}

class kv_transfer_ends : public testing::TestWithParam<std::size_t> {};

// After 25 ids the prompt (75 slots) ends on page 4 and the chain travels;
// after 5 (55 slots) it ends on page 3 with the image, whose item is on
// that page: the chain stays behind, and the whole pages' keys and the end
// copy still make the importer's index the exporter's.
TEST_P(kv_transfer_ends, the_end_copy_travels_and_serves_the_image_end_on_the_importer) {
  const std::size_t after = GetParam();
  auto prefill = pool_of();
  auto decode = pool_of();
  EXPECT_EQ(serve(*prefill, "a", text_image(after)), 0);
  fill(*prefill, prefill->stream("a", "main")->pages);
  // The whole pages (four of 75 slots, three of 55) and the end copy.
  ASSERT_EQ(prefill->num_cached_pages(), after == 25 ? 5 : 4);
  const auto out = prefill->export_stream("a", "main").value();
  check(*prefill);
  EXPECT_EQ(out.chain.has_value(), after == 25);
  ASSERT_EQ(out.page_keys.size(), after == 25 ? 4U : 3U);
  ASSERT_EQ(out.ends.size(), 1U);
  EXPECT_EQ(out.ends[0].slot, 50);
  const page_id copy = out.ends[0].page;
  EXPECT_EQ(prefill->pages().owners(copy), 2) << "the index and the export";
  // The copy's bytes, recognisable on the importer.
  std::memset(prefill->page_data(copy), 0x3c, prefill->geometry().page_bytes());

  auto taken = decode->import_stream("a", "main", out);
  ASSERT_TRUE(taken.has_value()) << taken.error().message();
  check(*decode);
  ASSERT_EQ(taken->end_fetch.size(), 1U);
  EXPECT_EQ(taken->end_fetch[0].remote, copy);
  EXPECT_EQ(decode->num_cached_pages(), 0) << "nothing indexed before the bytes land";
  transfer(*prefill, *decode, *taken);
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->num_cached_pages(), static_cast<std::int32_t>(out.page_keys.size()) + 1);
  EXPECT_EQ(decode->pages().owners(taken->end_fetch[0].local), 1) << "the index alone";

  // The prefill node lets go: nothing of "a" is held there any more.
  prefill->remove_request("a");
  ASSERT_TRUE(prefill->release_export("a").has_value());
  expect_idle(*prefill);

  // On the importer, the same image with other text after it: pages 0-2 by
  // their keys, slots 48-49 by the end key, copied from the imported copy.
  EXPECT_EQ(serve(*decode, "b", text_image(after, 900)), 50);
  const auto b = decode->stream("b", "main").value();
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(decode->page_data(b.pages[3])), 0x3c);
  decode->remove_request("a");
  decode->remove_request("b");
  expect_idle(*decode);
}

INSTANTIATE_TEST_SUITE_P(after, kv_transfer_ends, testing::Values(25U, 5U),
                         [](const testing::TestParamInfo<std::size_t>& p) {
                           return p.param == 25 ? "prompt_ends_on_a_later_page"
                                                : "prompt_ends_on_the_image_end_page";
                         });

TEST(kv_transfer, an_aborted_or_removed_import_gives_back_its_end_copies) {
  auto prefill = pool_of();
  auto decode = pool_of();
  serve(*prefill, "a", text_image(25));
  const auto out = prefill->export_stream("a", "main").value();
  ASSERT_EQ(out.ends.size(), 1U);
  const auto list0 = decode->pages().free_list();
  auto taken = decode->import_stream("a", "main", out).value();
  ASSERT_EQ(taken.end_fetch.size(), 1U);
  ASSERT_TRUE(decode->import_stream("a", "cond", out).has_value());
  check(*decode);
  ASSERT_TRUE(decode->abort_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->pages().free_list(), list0) << "end copies and pages, newest first";
  EXPECT_EQ(decode->num_cached_pages(), 0);

  ASSERT_TRUE(decode->import_stream("a", "main", out).has_value());
  decode->remove_request("a");  // a cancelled request mid-transfer
  expect_idle(*decode);
  EXPECT_EQ(decode->num_cached_pages(), 0);
  (void)prefill->release_export("a");
  prefill->remove_request("a");
  expect_idle(*prefill);
}

TEST(kv_transfer, end_copies_come_from_free_pages_and_only_when_not_cached) {
  auto prefill = pool_of();
  serve(*prefill, "a", text_image(25));
  const auto out = prefill->export_stream("a", "main").value();
  ASSERT_EQ(out.ends.size(), 1U);
  // Five usable pages: the stream's own, none left for the copy.
  auto tight = pool_of(6);
  auto taken = tight->import_stream("a", "main", out).value();
  EXPECT_TRUE(taken.end_fetch.empty());
  ASSERT_TRUE(tight->finish_import("a").has_value());
  check(*tight);
  EXPECT_EQ(tight->num_cached_pages(), 4);

  // An importer that caches the end key already fetches no copy.
  auto decode = pool_of();
  ASSERT_EQ(decode->import_stream("a", "main", out).value().end_fetch.size(), 1U);
  ASSERT_TRUE(decode->finish_import("a").has_value());
  const auto cached = decode->num_cached_pages();
  auto again = decode->import_stream("a2", "main", out).value();
  EXPECT_EQ(again.adopted, 4);
  EXPECT_TRUE(again.end_fetch.empty());
  ASSERT_TRUE(decode->finish_import("a2").has_value());
  EXPECT_EQ(decode->num_cached_pages(), cached);
  for (auto* p : {tight.get(), decode.get()}) {
    p->remove_request("a");
    p->remove_request("a2");
    expect_idle(*p);
  }
  ASSERT_TRUE(prefill->release_export("a").has_value());
  prefill->remove_request("a");
  expect_idle(*prefill);
}

TEST(kv_transfer, an_end_copy_on_a_boundary_or_past_the_keys_is_refused) {
  auto prefill = pool_of();
  serve(*prefill, "a", text_image(25));
  const auto out = prefill->export_stream("a", "main").value();
  auto decode = pool_of();
  for (const std::int64_t slot : {48L, 76L, 0L}) {
    auto forged = out;
    forged.ends[0].slot = slot;
    auto taken = decode->import_stream("a", "main", forged);
    ASSERT_FALSE(taken.has_value()) << slot;
    EXPECT_NE(taken.error().message().find("end copy at slot"), std::string::npos)
        << taken.error().message();
  }
  auto unkeyed = out;
  unkeyed.page_keys.resize(2);  // page 3's parent has no key
  EXPECT_FALSE(decode->import_stream("a", "main", unkeyed).has_value());
  expect_idle(*decode);
  ASSERT_TRUE(prefill->release_export("a").has_value());
  prefill->remove_request("a");
  expect_idle(*prefill);
}

}  // namespace transfer_ends
}  // namespace
}  // namespace mstar::resources
