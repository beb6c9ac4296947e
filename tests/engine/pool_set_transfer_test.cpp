// pool_set publish / adopt: a hybrid request moves from a prefill set to a
// decode set, one-pool sets publish and adopt their parts (merged), and an
// adoption is all or nothing across pools.
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "engine/pool_set.hpp"
#include "resources/kv/keys.hpp"

namespace mstar::engine {
namespace {

namespace res = mstar::resources;

models::pool_spec spec_of(std::int64_t pages = 32, std::int64_t slots = 4) {
  models::pool_spec spec;
  res::kv_pool_config kv;
  kv.geometry.page_size = 16;
  kv.max_num_pages = pages;
  kv.geometry.num_layers = 2;
  kv.geometry.num_kv_heads = 1;
  kv.geometry.head_dim = 4;
  kv.geometry.dtype = dtype::float32;
  spec.kv = kv;
  res::recurrent_blocks blocks;
  blocks.emplace("state", res::recurrent_block_config({2, 3}, dtype::float32));
  spec.recurrent = res::recurrent_state_config::make(2, std::move(blocks), slots, false).value();
  spec.fingerprint = "test-model";
  return spec;
}

std::unique_ptr<pool_set> set_of(const models::pool_spec& spec,
                                 pool_kinds which = pool_kinds::all) {
  return pool_set::make(spec, which).value();
}

void check(const pool_set& set) {
  auto ok = set.check_invariants();
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

// One step of `span` tokens for `rid` through every pool of `set`.
bool run(pool_set& set, const std::string& rid, std::int64_t span) {
  auto request = std::make_shared<models::step_request>();
  request->kv.emplace();
  request->kv->segments = {{rid, "main", span}};
  request->recurrent.emplace();
  request->recurrent->segments = {{rid, "main", span}};
  step_record step{request, {}, false};
  const bool ok = set.admit(step).ok();
  check(set);
  if (!ok)
    return false;
  EXPECT_TRUE(set.plan(step).has_value());
  EXPECT_TRUE(set.commit(step).has_value());
  check(set);
  return true;
}

std::vector<res::token_id> prompt(std::size_t n) {
  std::vector<res::token_id> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = static_cast<res::token_id>(100 + i);
  return ids;
}

res::kv_prefix_seed seed_for(const std::vector<res::token_id>& ids) {
  std::vector<std::vector<res::token_id>> pages;
  for (std::size_t i = 0; i < ids.size(); i += 16)
    pages.emplace_back(ids.begin() + static_cast<long>(i),
                       ids.begin() + static_cast<long>(std::min(ids.size(), i + 16)));
  res::kv_prefix_seed seed;
  seed.keys = res::chain(pages).value();
  if (ids.size() % 16 != 0)
    seed.tail = pages.back();
  return seed;
}

// `rid`'s 40-token prompt, prefilled on `set`.
void prefill(pool_set& set, const std::string& rid) {
  const auto seed = seed_for(prompt(40));
  (void)set.ingest(rid, &seed);
  ASSERT_TRUE(run(set, rid, 40));
}

TEST(pool_set_transfer, a_hybrid_request_moves_from_a_prefill_set_to_a_decode_set) {
  const auto spec = spec_of();
  auto p = set_of(spec);
  auto d = set_of(spec);
  const auto free0 = p->stats();
  prefill(*p, "a");
  auto pub = p->publish("a");
  ASSERT_TRUE(pub.has_value()) << pub.error().message();
  check(*p);
  ASSERT_EQ(pub->streams.size(), 1u);
  const auto& part = pub->streams.at("main");
  ASSERT_TRUE(part.kv && part.recurrent);
  EXPECT_EQ(part.kv->stored_len, 40);
  EXPECT_TRUE(part.recurrent->has_state);
  EXPECT_FALSE(p->publish("a").has_value());  // still held
  p->remove("a");
  check(*p);

  auto got = d->adopt("a", *pub);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  check(*d);
  const auto& taken = got->streams.at("main");
  ASSERT_TRUE(taken.kv && taken.recurrent);
  EXPECT_EQ(taken.kv->fetch.size(), 3u);
  EXPECT_EQ(taken.recurrent->remote_slot, part.recurrent->slot);
  EXPECT_FALSE(run(*d, "a", 1));  // the bytes have not landed
  ASSERT_TRUE(d->finish_adopt("a").has_value());
  check(*d);
  EXPECT_TRUE(run(*d, "a", 1));
  EXPECT_EQ(d->kv()->stream("a", "main")->stored_len, 41);
  EXPECT_TRUE(d->recurrent()->has_state("a"));

  ASSERT_TRUE(p->release_publication("a").has_value());
  check(*p);
  EXPECT_EQ(p->stats().free_slots, free0.free_slots);
  EXPECT_EQ(p->stats().kv_free_pages, free0.kv_free_pages - p->stats().kv_cached_pages);
  EXPECT_FALSE(p->release_publication("a").has_value());
}

TEST(pool_set_transfer, one_pool_sets_publish_and_adopt_their_parts_which_merge) {
  const auto spec = spec_of();
  auto p_kv = set_of(spec, pool_kinds::kv_only);
  auto p_rec = set_of(spec, pool_kinds::recurrent_only);
  prefill(*p_kv, "a");
  prefill(*p_rec, "a");
  auto pub = p_kv->publish("a").value();
  const auto rec_part = p_rec->publish("a").value();
  EXPECT_TRUE(pub.has_kv());
  EXPECT_FALSE(pub.has_recurrent());
  EXPECT_FALSE(rec_part.has_kv());
  ASSERT_TRUE(pub.merge(rec_part).has_value());
  ASSERT_TRUE(pub.streams.at("main").kv && pub.streams.at("main").recurrent);
  const auto merged = pub;
  EXPECT_FALSE(pub.merge(rec_part).has_value());  // the same part twice
  EXPECT_EQ(pub, merged);                         // and nothing changed

  auto d_kv = set_of(spec, pool_kinds::kv_only);
  auto d_rec = set_of(spec, pool_kinds::recurrent_only);
  auto got = d_kv->adopt("a", pub).value();
  const auto got_rec = d_rec->adopt("a", pub).value();
  EXPECT_FALSE(got.streams.at("main").recurrent);
  EXPECT_FALSE(got_rec.streams.at("main").kv);
  ASSERT_TRUE(got.merge(got_rec).has_value());
  EXPECT_TRUE(got.streams.at("main").kv && got.streams.at("main").recurrent);
  EXPECT_FALSE(got.merge(got_rec).has_value());
  for (auto* set : {d_kv.get(), d_rec.get()}) {
    ASSERT_TRUE(set->finish_adopt("a").has_value());
    check(*set);
  }
  for (auto* set : {p_kv.get(), p_rec.get()}) {
    set->remove("a");
    ASSERT_TRUE(set->release_publication("a").has_value());
    check(*set);
  }
}

TEST(pool_set_transfer, a_refusing_recurrent_pool_aborts_the_kv_import) {
  auto p = set_of(spec_of());
  prefill(*p, "a");
  const auto pub = p->publish("a").value();
  auto d = set_of(spec_of(32, 2));  // the sink and one slot
  ASSERT_TRUE(run(*d, "x", 5));     // takes that slot
  const auto before = d->stats();
  const auto free_list = d->kv()->pages().free_list();
  auto got = d->adopt("a", pub);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), errc::out_of_range);
  check(*d);
  EXPECT_EQ(d->kv()->pages().free_list(), free_list);
  EXPECT_EQ(d->stats().free_slots, before.free_slots);
  EXPECT_FALSE(d->kv()->stream("a", "main"));
  EXPECT_FALSE(d->abort_adopt("a").has_value());  // nothing left to abort
  d->remove("x");
  const auto room = d->kv()->pages().free_list();
  ASSERT_TRUE(d->adopt("a", pub).has_value());  // room now
  ASSERT_TRUE(d->abort_adopt("a").has_value());
  check(*d);
  EXPECT_EQ(d->kv()->pages().free_list(), room);
  EXPECT_EQ(d->stats().free_slots, before.free_slots + 1);
}

TEST(pool_set_transfer, a_publication_lacking_a_part_the_set_keeps_is_refused) {
  const auto spec = spec_of();
  auto p_kv = set_of(spec, pool_kinds::kv_only);
  prefill(*p_kv, "a");
  const auto pub = p_kv->publish("a").value();
  auto d = set_of(spec);
  auto got = d->adopt("a", pub);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), errc::invalid_argument);
  check(*d);
  EXPECT_FALSE(d->kv()->stream("a", "main"));
  EXPECT_FALSE(p_kv->publish("nobody").has_value());
}

}  // namespace
}  // namespace mstar::engine
