// KV pool export / import (ARCHITECTURE.md "Disaggregated prefill and
// decode"): export holds, adoption of cached pages, all-or-nothing imports,
// exact aborts, and an imported stream that decodes and keys like the
// stream it came from.
#include <cstring>
#include <gtest/gtest.h>
#include <map>

#include "resources/kv/kv_pool.hpp"
#include "tests/resources/kv/kv_pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;

void check(const kv_pool& pool) {
  auto ok = pool.check_invariants();
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

std::unique_ptr<kv_pool> pool_of(std::int64_t pages = 64, std::string model = "test-model",
                                 std::string salt = {}) {
  auto c = small_config(16, pages);
  c.prefix_cache_salt = std::move(salt);
  return kv_pool::make("kv", c, std::move(model)).value();
}

// Admits, plans and commits `step` on `pool`, checking after every call.
admit_outcome run_on(kv_pool& pool, kv_step step, std::shared_ptr<const kv_plan>* plan = nullptr) {
  step_context ctx;
  auto out = pool.admit(step, ctx);
  check(pool);
  if (!out.ok) {
    pool.rollback_admit(step, ctx);
    check(pool);
    return out;
  }
  auto planned = pool.plan(step, ctx);
  EXPECT_TRUE(planned.has_value());
  if (planned && plan != nullptr)
    *plan = std::static_pointer_cast<const kv_plan>(*planned);
  EXPECT_TRUE(pool.commit(step, ctx).has_value());
  check(pool);
  return out;
}

kv_step one(const std::string& rid, std::int64_t span) {
  kv_step s;
  s.segments = {{rid, "main", span}};
  return s;
}

// A request's prefill as the worker runs it: ingest with keys, probe, admit
// the rest of the prompt and commit.
void serve(kv_pool& pool, const std::string& rid, const std::vector<token_id>& ids) {
  pool.ingest_request(rid, {{"main", seed_for(ids, 16)}});
  const auto hit = pool.resolve_cached_prefix(rid).value_or(0);
  ASSERT_TRUE(run_on(pool, one(rid, static_cast<std::int64_t>(ids.size()) - hit)).ok);
}

// What the transfer agent does: the fetched pages' bytes, exporter to importer.
void transfer(kv_pool& from, kv_pool& to, const kv_import& taken) {
  for (const auto& [local, remote] : taken.fetch) {
    std::memcpy(to.page_data(local), from.page_data(remote), from.geometry().page_bytes());
  }
}

void fill_pages(kv_pool& pool, const std::vector<page_id>& pages) {
  for (const page_id p : pages) {
    for (std::size_t b = 0; b < pool.geometry().page_bytes(); ++b)
      pool.page_data(p)[b] = std::byte{static_cast<std::uint8_t>(p * 31 + b)};
  }
}

TEST(kv_transfer, an_export_hold_outlives_remove_request_until_released) {
  auto pool = pool_of(64, "");  // prefix cache closed: every page goes back
  const auto free0 = pool->num_free_pages();
  const auto list0 = pool->pages().free_list();
  serve(*pool, "a", prompt(40));
  auto out = pool->export_stream("a", "main");
  ASSERT_TRUE(out.has_value()) << out.error().message();
  check(*pool);
  EXPECT_EQ(out->stored_len, 40);
  EXPECT_EQ(out->pages.size(), 3u);
  EXPECT_EQ(out->pages, pool->stream("a", "main")->pages);
  EXPECT_TRUE(out->page_keys.empty());  // no cache, no keys
  EXPECT_FALSE(out->chain);
  EXPECT_EQ(std::count(out->pages.begin(), out->pages.end(), sink_page), 0);
  fill_pages(*pool, out->pages);
  std::vector<std::byte> before(pool->page_data(out->pages[2]),
                                pool->page_data(out->pages[2]) + pool->geometry().page_bytes());

  EXPECT_FALSE(pool->export_stream("a", "main").has_value());  // not idempotent
  EXPECT_FALSE(run_on(*pool, one("a", 1)).ok);                 // published pages are frozen
  pool->remove_request("a");
  check(*pool);
  EXPECT_EQ(pool->num_free_pages(), free0 - 3);
  EXPECT_EQ(pool->pages().owners(out->pages[2]), 1);
  EXPECT_EQ(std::memcmp(before.data(), pool->page_data(out->pages[2]), before.size()), 0);

  ASSERT_TRUE(pool->release_export("a").has_value());
  check(*pool);
  EXPECT_EQ(pool->num_free_pages(), free0);
  EXPECT_FALSE(pool->release_export("a").has_value());
  auto list1 = pool->pages().free_list();
  std::sort(list1.begin(), list1.end());
  auto sorted0 = list0;
  std::sort(sorted0.begin(), sorted0.end());
  EXPECT_EQ(list1, sorted0);
}

TEST(kv_transfer, a_cached_export_carries_rooted_keys_and_the_chain) {
  auto pool = pool_of();
  serve(*pool, "a", prompt(40));
  auto out = pool->export_stream("a", "main").value();
  check(*pool);
  ASSERT_EQ(out.page_keys.size(), 2u);  // two whole pages; the third is partial
  ASSERT_TRUE(out.chain);
  EXPECT_EQ(out.chain->keyed_pages, 2);
  EXPECT_EQ(out.chain->unkeyed.size(), 8u);
  EXPECT_EQ(out.root, pool->root());
  EXPECT_EQ(*pool->index()->key_of(out.pages[0]), out.page_keys[0]);
  pool->remove_request("a");
  ASSERT_TRUE(pool->release_export("a").has_value());
  check(*pool);
  EXPECT_EQ(pool->num_cached_pages(), 2);
  EXPECT_EQ(pool->num_free_pages(), 63 - 2);
}

TEST(kv_transfer, a_windowed_stream_is_not_exported) {
  auto pool = pool_of();
  serve(*pool, "a", prompt(40));
  ASSERT_EQ(pool->release_oldest("a", "main", 16).value(), 16);
  auto out = pool->export_stream("a", "main");
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().code(), errc::unsupported);
  EXPECT_FALSE(pool->exported("a"));
  check(*pool);
}

TEST(kv_transfer, an_import_into_a_fresh_pool_fetches_every_page) {
  auto prefill = pool_of();
  auto decode = pool_of();
  serve(*prefill, "a", prompt(40));
  const auto out = prefill->export_stream("a", "main").value();
  auto taken = decode->import_stream("a", "main", out);
  ASSERT_TRUE(taken.has_value()) << taken.error().message();
  check(*decode);
  EXPECT_EQ(taken->adopted, 0);
  ASSERT_EQ(taken->fetch.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(taken->fetch[i].remote, out.pages[i]);
    EXPECT_EQ(taken->fetch[i].local, taken->pages[i]);
    EXPECT_NE(taken->fetch[i].local, sink_page);
  }
  EXPECT_EQ(decode->stream("a", "main")->stored_len, 40);
  EXPECT_TRUE(decode->importing("a"));
  const auto refused = run_on(*decode, one("a", 1));
  ASSERT_FALSE(refused.ok);
  EXPECT_NE(refusal_message(*refused.reason).find("importing"), std::string::npos);
  EXPECT_FALSE(decode->import_stream("a", "main", out).has_value());  // the stream exists
  EXPECT_EQ(decode->num_cached_pages(), 0);  // nothing indexed before the bytes land
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->num_cached_pages(), 2);
  EXPECT_FALSE(decode->finish_import("a").has_value());
}

TEST(kv_transfer, pages_the_importer_caches_under_the_same_root_are_adopted) {
  auto prefill = pool_of();
  auto decode = pool_of();
  serve(*decode, "x", prompt(40));  // caches the first two pages of prompt(70)
  const auto cached = decode->stream("x", "main")->pages;
  serve(*prefill, "a", prompt(70));
  const auto out = prefill->export_stream("a", "main").value();
  ASSERT_EQ(out.page_keys.size(), 4u);
  const auto free0 = decode->num_free_pages();
  auto taken = decode->import_stream("a", "main", out).value();
  check(*decode);
  EXPECT_EQ(taken.adopted, 2);
  EXPECT_EQ(taken.pages[0], cached[0]);
  EXPECT_EQ(taken.pages[1], cached[1]);
  ASSERT_EQ(taken.fetch.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(taken.fetch[i].remote, out.pages[i + 2]);
    EXPECT_EQ(taken.fetch[i].local, taken.pages[i + 2]);
  }
  EXPECT_EQ(decode->num_free_pages(), free0 - 3);
  EXPECT_EQ(decode->pages().owners(cached[0]), 3);  // index, x, a
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->num_cached_pages(), 4);
}

TEST(kv_transfer, another_salt_adopts_nothing_and_indexes_nothing) {
  auto prefill = pool_of();
  auto decode = pool_of(64, "test-model", "tenant-b");
  serve(*decode, "x", prompt(40));
  serve(*prefill, "a", prompt(70));
  const auto out = prefill->export_stream("a", "main").value();
  ASSERT_NE(out.root, decode->root());
  const auto cached = decode->num_cached_pages();
  auto taken = decode->import_stream("a", "main", out).value();
  check(*decode);
  EXPECT_EQ(taken.adopted, 0);
  EXPECT_EQ(taken.fetch.size(), 5u);
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->num_cached_pages(), cached);
}

TEST(kv_transfer, a_pool_short_of_pages_refuses_and_changes_nothing) {
  auto prefill = pool_of();
  auto decode = pool_of(5);  // four usable pages
  serve(*prefill, "a", prompt(70));
  const auto out = prefill->export_stream("a", "main").value();
  const auto list0 = decode->pages().free_list();
  auto taken = decode->import_stream("a", "main", out);
  ASSERT_FALSE(taken.has_value());
  EXPECT_EQ(taken.error().code(), errc::out_of_range);
  EXPECT_NE(taken.error().message().find("1 pages short"), std::string::npos)
      << taken.error().message();
  check(*decode);
  EXPECT_EQ(decode->pages().free_list(), list0);
  EXPECT_FALSE(decode->stream("a", "main"));
  EXPECT_FALSE(decode->importing("a"));
}

TEST(kv_transfer, abort_import_gives_back_exactly_what_import_took) {
  auto prefill = pool_of();
  auto decode = pool_of();
  serve(*decode, "x", prompt(40));
  const auto cached = decode->stream("x", "main")->pages;
  serve(*prefill, "a", prompt(70));
  const auto out = prefill->export_stream("a", "main").value();
  const auto list0 = decode->pages().free_list();
  const auto owners0 = decode->pages().owners(cached[0]);
  const auto streams0 = decode->streams().size();
  ASSERT_EQ(decode->import_stream("a", "main", out).value().adopted, 2);
  ASSERT_TRUE(decode->import_stream("a", "cond", out).has_value());
  check(*decode);
  ASSERT_TRUE(decode->abort_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->pages().free_list(), list0);
  EXPECT_EQ(decode->pages().owners(cached[0]), owners0);
  EXPECT_EQ(decode->streams().size(), streams0);
  EXPECT_FALSE(decode->stream("a", "main"));
  EXPECT_FALSE(decode->stream("a", "cond"));
  EXPECT_EQ(decode->num_cached_pages(), 2);
  EXPECT_FALSE(decode->abort_import("a").has_value());
}

TEST(kv_transfer, an_export_naming_the_sink_or_another_geometry_is_refused) {
  auto decode = pool_of();
  kv_export forged;
  forged.stored_len = 20;
  forged.page_size = 16;
  forged.page_bytes = static_cast<std::int64_t>(decode->geometry().page_bytes());
  forged.pages = {sink_page, 5};
  EXPECT_EQ(decode->import_stream("a", "main", forged).error().code(), errc::invalid_argument);
  forged.pages = {4, 5};
  forged.page_size = 8;
  EXPECT_EQ(decode->import_stream("a", "main", forged).error().code(), errc::invalid_argument);
  check(*decode);
  EXPECT_TRUE(decode->streams().empty());
}

// Same stream on both pools: every decode step plans the same rows over
// corresponding pages, and the pages they fill get the same keys.
TEST(kv_transfer, a_finished_import_decodes_and_keys_like_the_prefill_pool) {
  auto prefill = pool_of();
  auto decode = pool_of();
  serve(*decode, "x", prompt(20));  // one cached page to adopt
  const auto ids = prompt(40);
  serve(*prefill, "a", ids);
  fill_pages(*prefill, prefill->stream("a", "main")->pages);
  const auto out = prefill->export_stream("a", "main").value();
  const auto taken = decode->import_stream("a", "main", out).value();
  ASSERT_EQ(taken.adopted, 1);
  transfer(*prefill, *decode, taken);
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  for (const auto& [local, remote] : taken.fetch) {
    EXPECT_EQ(std::memcmp(decode->page_data(local), prefill->page_data(remote),
                          decode->geometry().page_bytes()),
              0);
  }
  // The prefill node keeps decoding its own copy once the hold is dropped.
  ASSERT_TRUE(prefill->release_export("a").has_value());
  check(*prefill);

  std::vector<token_id> generated;
  for (token_id t = 0; t < 30; ++t) {
    generated.push_back(7000 + t);
    std::shared_ptr<const kv_plan> pa, pb;
    for (auto* pool : {prefill.get(), decode.get()})
      pool->extend_prefix_chain("a", "main", std::span{&generated.back(), 1});
    ASSERT_TRUE(run_on(*prefill, one("a", 1), &pa).ok);
    ASSERT_TRUE(run_on(*decode, one("a", 1), &pb).ok);
    const auto sa = *prefill->stream("a", "main");
    const auto sb = *decode->stream("a", "main");
    ASSERT_EQ(sa.stored_len, sb.stored_len);
    ASSERT_EQ(sa.pages.size(), sb.pages.size());
    const auto& la = pa->labels.at("main");
    const auto& lb = pb->labels.at("main");
    EXPECT_EQ(la.qo_indptr, lb.qo_indptr);
    EXPECT_EQ(la.kv_indptr, lb.kv_indptr);
    EXPECT_EQ(la.last_page_len, lb.last_page_len);
    EXPECT_EQ(la.decode, lb.decode);
    EXPECT_EQ(la.decode_offset, lb.decode_offset);
    std::map<page_id, page_id> to_prefill;
    for (std::size_t i = 0; i < sb.pages.size(); ++i)
      to_prefill[sb.pages[i]] = sa.pages[i];
    for (std::size_t i = 0; i < lb.kv_indices.size(); ++i)
      EXPECT_EQ(to_prefill.at(lb.kv_indices[i]), la.kv_indices[i]);
    for (std::size_t i = 0; i < sa.pages.size(); ++i) {
      EXPECT_EQ(prefill->index()->key_of(sa.pages[i]), decode->index()->key_of(sb.pages[i]))
          << "page " << i << " after " << t + 1 << " generated ids";
    }
  }
  const auto sb = *decode->stream("a", "main");
  EXPECT_EQ(sb.stored_len, 70);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(decode->index()->key_of(sb.pages[i])) << "page " << i;
  // The next turn hits the same prefix on both.
  auto next_turn = ids;
  next_turn.insert(next_turn.end(), generated.begin(), generated.end());
  next_turn.push_back(7);
  for (auto* pool : {prefill.get(), decode.get()}) {
    pool->ingest_request("n", {{"main", seed_for(next_turn, 16)}});
    EXPECT_EQ(pool->resolve_cached_prefix("n"), 64);
    check(*pool);
  }
}

}  // namespace
}  // namespace mstar::resources
