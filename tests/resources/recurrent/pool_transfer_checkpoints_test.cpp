// Recurrent state pool export / import of item-end checkpoints (reference
// §1.7): the state right after an image that ends inside a page, which the
// exporter checkpoints under the end key, travels with the stream's slot
// (held by the export, fetched into a checkpoint slot of the importer), so
// the importer resumes a later prompt with the same image and other text
// after it at the image's end. Nothing leaks; an aborted import gives
// back exactly what it took.
#include <cstring>
#include <gtest/gtest.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/layout.hpp"
#include "resources/recurrent/pool.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources {
namespace {
// Its own namespace: a unity batch may put this file beside
// pool_transfer_test.cpp, whose helpers have the same names.
namespace transfer_checkpoints {

using namespace mstar::resources::test;

void check(const recurrent_state_pool& pool) {
  auto ok = pool.check_invariants();
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

std::unique_ptr<recurrent_state_pool> pool_of(std::int64_t checkpoint_slots = 3) {
  auto c = config_of(6, true, tiny_blocks());
  c.checkpoint_slots = checkpoint_slots;
  c.checkpoint_stride = 4;
  c.checkpoint_page_size = 4;
  return recurrent_state_pool::make("rec", c).value();
}

// 10 ids, an image of 4 slots (it ends at slot 14, inside page 3), then 5
// ids from `after`.
kv_prefix_seed seed_of(token_id after) {
  std::vector<token_id> before(10), tail(5);
  for (std::size_t i = 0; i < before.size(); ++i)
    before[i] = 10 + static_cast<token_id>(i);
  for (std::size_t i = 0; i < tail.size(); ++i)
    tail[i] = after + static_cast<token_id>(i);
  std::vector<prompt_span> spans{id_span{before}, item_span{4, std::vector<std::uint8_t>(32, 0x11)},
                                 id_span{tail}};
  return make_prefix_seed(key_prompt(spans, 4).value(), 4);
}

// The prefill of `rid` in two chunks cut at the image's end (as the
// scheduler cuts it), the slot holding pattern `first + i` after chunk i.
void prefill(recurrent_state_pool& pool, const request_id& rid, std::uint32_t first) {
  const auto seed = seed_of(500);
  pool.ingest_request(rid, &seed);
  const std::int64_t chunks[] = {14, 5};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto s = rstep({{rid, "main", chunks[i]}});
    step_context ctx;
    ASSERT_TRUE(pool.admit(s, ctx).ok);
    ASSERT_TRUE(pool.plan(s, ctx).has_value());
    fill_slot(pool, *pool.slot_of(rid), first + static_cast<std::uint32_t>(i));
    ASSERT_TRUE(pool.commit(s, ctx).has_value());
    check(pool);
  }
}

// What the transfer agent does: the slot's and the checkpoints' bytes.
void transfer(recurrent_state_pool& from, recurrent_state_pool& to, const recurrent_import& in) {
  std::vector<recurrent_checkpoint_pair> pairs{{in.local_slot, in.remote_slot}};
  pairs.insert(pairs.end(), in.checkpoints.begin(), in.checkpoints.end());
  for (const auto& [name, block] : from.config().blocks) {
    for (std::int64_t layer = 0; layer < from.config().num_layers; ++layer) {
      const auto src = from.block(name, layer).value();
      const auto dst = to.block(name, layer).value();
      for (const auto& p : pairs) {
        std::memcpy(dst.data + p.local * dst.strides_bytes[0],
                    src.data + p.remote * src.strides_bytes[0],
                    static_cast<std::size_t>(src.strides_bytes[0]));
      }
    }
  }
}

TEST(recurrent_transfer, an_item_end_checkpoint_travels_and_resumes_the_image_end_there) {
  auto prefill_pool = pool_of();
  auto decode = pool_of();
  prefill(*prefill_pool, "a", 100);
  EXPECT_EQ(prefill_pool->checkpoints().captured, 1) << "at the image's end only";
  const auto key = seed_of(500).ends.at(0).key;
  ASSERT_TRUE(prefill_pool->has_checkpoint(key));
  const auto out = prefill_pool->export_slot("a").value();
  check(*prefill_pool);
  ASSERT_EQ(out.checkpoints.size(), 1U);
  EXPECT_EQ(out.checkpoints[0].key, key);
  EXPECT_EQ(prefill_pool->checkpoints().leased, 1) << "held by the export";

  auto in = decode->import_slot("a", "main", out).value();
  check(*decode);
  ASSERT_EQ(in.checkpoints.size(), 1U);
  EXPECT_EQ(in.checkpoints[0].remote, out.checkpoints[0].slot);
  EXPECT_FALSE(decode->has_checkpoint(key)) << "nothing indexed before the bytes land";
  transfer(*prefill_pool, *decode, in);
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_TRUE(decode->has_checkpoint(key));

  prefill_pool->remove_request("a");
  ASSERT_TRUE(prefill_pool->release_export("a").has_value());
  check(*prefill_pool);
  EXPECT_EQ(prefill_pool->checkpoints().leased, 0);

  // The same image with other text after it resumes on the importer at the
  // image's end, from the state the exporter had there.
  const auto other = seed_of(900);
  decode->ingest_request("b", &other);
  EXPECT_EQ(decode->resolve_cached_prefix("b"), 14);
  EXPECT_EQ(decode->apply_cached_prefix("b", 14), 14);
  check(*decode);
  EXPECT_TRUE(slot_holds(*decode, *decode->slot_of("b"), 100u));
  decode->remove_request("a");
  decode->remove_request("b");
  check(*decode);
  EXPECT_EQ(decode->num_free_slots(), 5);
}

TEST(recurrent_transfer, an_aborted_or_removed_import_gives_back_its_checkpoint_slots) {
  auto prefill_pool = pool_of();
  prefill(*prefill_pool, "a", 100);
  const auto out = prefill_pool->export_slot("a").value();
  ASSERT_EQ(out.checkpoints.size(), 1U);
  auto decode = pool_of();
  const auto free0 = decode->free_list();
  ASSERT_EQ(decode->import_slot("a", "main", out).value().checkpoints.size(), 1U);
  check(*decode);
  ASSERT_TRUE(decode->abort_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->free_list(), free0);
  EXPECT_EQ(decode->checkpoints().held, 0);
  ASSERT_EQ(decode->import_slot("a", "main", out).value().checkpoints.size(), 1U)
      << "the checkpoint slot is free again";
  decode->remove_request("a");  // a cancelled request mid-transfer
  check(*decode);
  EXPECT_EQ(decode->checkpoints().held, 0);

  // An importer without checkpoint slots, or one holding the key already,
  // takes none.
  auto bare = pool_of(0);
  EXPECT_TRUE(bare->import_slot("a", "main", out).value().checkpoints.empty());
  ASSERT_TRUE(bare->abort_import("a").has_value());
  auto twice = pool_of();
  ASSERT_EQ(twice->import_slot("a", "main", out).value().checkpoints.size(), 1U);
  ASSERT_TRUE(twice->finish_import("a").has_value());
  EXPECT_TRUE(twice->import_slot("a2", "main", out).value().checkpoints.empty());
  ASSERT_TRUE(twice->finish_import("a2").has_value());
  twice->remove_request("a");
  twice->remove_request("a2");
  check(*twice);
  EXPECT_EQ(twice->checkpoints().held, 1);
  ASSERT_TRUE(prefill_pool->release_export("a").has_value());
  prefill_pool->remove_request("a");
  check(*prefill_pool);
}

}  // namespace transfer_checkpoints
}  // namespace
}  // namespace mstar::resources
