// Recurrent state pool export / import (ARCHITECTURE.md "Disaggregated
// prefill and decode"): export holds outlive the request, imports take a
// slot all or nothing, abort gives back exactly, finish makes the slot
// resume like one computed locally.
#include <cstring>
#include <gtest/gtest.h>

#include "resources/recurrent/pool.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"

namespace mstar::resources {
namespace {

using namespace mstar::resources::test;

void check(const recurrent_state_pool& pool) {
  auto ok = pool.check_invariants();
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

std::unique_ptr<recurrent_state_pool> pool_of(std::int64_t slots) {
  return recurrent_state_pool::make("rec", config_of(slots, true, tiny_blocks())).value();
}

// Admits, plans and commits `step`, checking after every call; the plan's
// main addressing, or nothing when refused.
std::optional<recurrent_addressing> run_on(recurrent_state_pool& pool, recurrent_step step) {
  step_context ctx;
  auto out = pool.admit(step, ctx);
  check(pool);
  if (!out.ok) {
    pool.rollback_admit(step, ctx);
    check(pool);
    return std::nullopt;
  }
  auto plan = pool.plan(step, ctx).value();
  auto addressing = *std::static_pointer_cast<const recurrent_plan>(plan)->addressing().value();
  EXPECT_TRUE(pool.commit(step, ctx).has_value());
  check(pool);
  return addressing;
}

// What the transfer agent does: one slot's bytes, every block and layer.
void transfer(recurrent_state_pool& from, recurrent_state_pool& to, const recurrent_import& slot) {
  for (const auto& [name, block] : from.config().blocks) {
    for (std::int64_t layer = 0; layer < from.config().num_layers; ++layer) {
      const auto src = from.block(name, layer).value();
      const auto dst = to.block(name, layer).value();
      std::memcpy(dst.data + slot.local_slot * dst.strides_bytes[0],
                  src.data + slot.remote_slot * src.strides_bytes[0],
                  static_cast<std::size_t>(src.strides_bytes[0]));
    }
  }
}

TEST(recurrent_transfer, an_export_hold_keeps_the_slot_and_its_bytes_past_remove_request) {
  auto pool = pool_of(4);
  ASSERT_TRUE(run_on(*pool, rstep({{"a", "main", 5}})));
  const std::int32_t slot = *pool->slot_of("a");
  fill_slot(*pool, slot, 7);
  auto out = pool->export_slot("a");
  ASSERT_TRUE(out.has_value()) << out.error().message();
  check(*pool);
  EXPECT_EQ(out->slot, slot);
  EXPECT_TRUE(out->has_state);
  EXPECT_EQ(out->slot_bytes, static_cast<std::int64_t>(pool->config().slot_bytes()));
  EXPECT_FALSE(pool->export_slot("a").has_value());        // not idempotent
  EXPECT_FALSE(run_on(*pool, rstep({{"a", "main", 1}})));  // published: never written
  pool->remove_request("a");
  check(*pool);
  EXPECT_EQ(pool->num_free_slots(), 2);
  EXPECT_TRUE(slot_holds(*pool, slot, 7u));
  ASSERT_TRUE(pool->release_export("a").has_value());
  check(*pool);
  EXPECT_EQ(pool->num_free_slots(), 3);
  EXPECT_TRUE(slot_holds(*pool, slot, std::nullopt));
  EXPECT_FALSE(pool->release_export("a").has_value());
}

TEST(recurrent_transfer, releasing_an_export_the_request_still_holds_keeps_its_slot) {
  auto pool = pool_of(4);
  ASSERT_TRUE(run_on(*pool, rstep({{"a", "main", 5}})));
  ASSERT_TRUE(pool->export_slot("a").has_value());
  ASSERT_TRUE(pool->release_export("a").has_value());
  check(*pool);
  EXPECT_EQ(pool->num_free_slots(), 2);
  EXPECT_TRUE(run_on(*pool, rstep({{"a", "main", 1}})));  // writable again
}

TEST(recurrent_transfer, a_finished_import_resumes_from_the_transferred_state) {
  auto prefill = pool_of(4);
  auto decode = pool_of(4);
  ASSERT_TRUE(run_on(*decode, rstep({{"x", "main", 3}})));  // the importer's slot differs
  ASSERT_TRUE(run_on(*prefill, rstep({{"a", "main", 5}})));
  fill_slot(*prefill, *prefill->slot_of("a"), 11);
  const auto out = prefill->export_slot("a").value();
  auto taken = decode->import_slot("a", "main", out);
  ASSERT_TRUE(taken.has_value()) << taken.error().message();
  check(*decode);
  EXPECT_EQ(taken->remote_slot, out.slot);
  EXPECT_EQ(taken->local_slot, *decode->slot_of("a"));
  EXPECT_NE(taken->local_slot, recurrent_state_pool::sink_slot);
  EXPECT_TRUE(decode->importing("a"));
  EXPECT_FALSE(run_on(*decode, rstep({{"a", "main", 1}})));  // bytes not landed
  EXPECT_FALSE(decode->has_state("a"));
  transfer(*prefill, *decode, *taken);
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_TRUE(decode->has_state("a"));
  EXPECT_TRUE(slot_holds(*decode, taken->local_slot, 11u));
  const auto row = run_on(*decode, rstep({{"a", "main", 1}}));
  ASSERT_TRUE(row);
  EXPECT_EQ(row->slot_indices[0], taken->local_slot);
  EXPECT_EQ(row->has_state[0], 1);
  EXPECT_FALSE(decode->finish_import("a").has_value());
}

TEST(recurrent_transfer, an_export_without_state_imports_without_state) {
  auto decode = pool_of(4);
  recurrent_export fresh{3, false, 0, static_cast<std::int64_t>(decode->config().slot_bytes()), {}};
  ASSERT_TRUE(decode->import_slot("a", "main", fresh).has_value());
  ASSERT_TRUE(decode->finish_import("a").has_value());
  check(*decode);
  EXPECT_FALSE(decode->has_state("a"));
}

TEST(recurrent_transfer, a_full_pool_or_another_layout_refuses_and_changes_nothing) {
  auto decode = pool_of(2);  // the sink and one slot
  ASSERT_TRUE(run_on(*decode, rstep({{"x", "main", 3}})));
  const auto free0 = decode->free_list();
  recurrent_export from{1, true, 0, static_cast<std::int64_t>(decode->config().slot_bytes()), {}};
  auto taken = decode->import_slot("a", "main", from);
  ASSERT_FALSE(taken.has_value());
  EXPECT_EQ(taken.error().code(), errc::out_of_range);
  EXPECT_EQ(decode->free_list(), free0);
  decode->remove_request("x");
  from.slot_bytes += 1;
  EXPECT_EQ(decode->import_slot("a", "main", from).error().code(), errc::invalid_argument);
  check(*decode);
  EXPECT_FALSE(decode->slot_of("a"));
  EXPECT_FALSE(decode->importing("a"));
}

TEST(recurrent_transfer, abort_import_frees_exactly_what_import_took) {
  auto decode = pool_of(6);
  ASSERT_TRUE(run_on(*decode, rstep({{"x", "main", 3}})));
  const auto free0 = decode->free_list();
  const recurrent_export from{
      2, true, 4, static_cast<std::int64_t>(decode->config().slot_bytes()), {}};
  ASSERT_TRUE(decode->import_slot("a", "main", from).has_value());
  ASSERT_TRUE(decode->import_slot("a", "cond", from).has_value());
  EXPECT_FALSE(decode->import_slot("a", "main", from).has_value());  // holds one already
  check(*decode);
  EXPECT_EQ(decode->generation("a", "cond"), 4u);
  ASSERT_TRUE(decode->abort_import("a").has_value());
  check(*decode);
  EXPECT_EQ(decode->free_list(), free0);
  EXPECT_TRUE(decode->labels("a").empty());
  EXPECT_FALSE(decode->abort_import("a").has_value());
}

}  // namespace
}  // namespace mstar::resources
