// What the transfer actor learns about a node's pools (actors/pool_regions):
// each arena's memory kind carried from the pools through `regions_of` and
// `merged`, checksums and verification dispatched by it, and the refusals,
// with the reason, where a region in device memory meets what cannot reach
// it (host bytes claimed as device memory, a device arena on another host
// with no CUDA-capable UCX). The device path itself runs in
// tests/gpu/gpu_pd_cuda_ipc_test.cpp.
#include "actors/pool_regions.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <numeric>

#include "actors/runtime.hpp"
#include "actors/transfer_actor.hpp"
#include "models/load.hpp"
#include "tests/support/model_fixtures.hpp"
#include "transport/error.hpp"

// A namespace of its own: the actor tests build as unity sources.
namespace mstar::actors::pool_regions_test {
namespace {

using transport::memory_kind;

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A hand-made region: a small KV arena over `bytes` (host memory whatever
// `memory` claims) and one recurrent block over `block`.
pool_regions hand_made(std::vector<std::byte>& bytes, std::vector<std::byte>& block,
                       memory_kind memory) {
  pool_regions r;
  r.kv = transport::arena_layout{transport::arena_kind::kv_pages, "kv", 1, 4, 256};
  bytes.assign(r.kv.bytes(), std::byte{0});
  r.kv_base = bytes.data();
  r.kv_memory = memory;
  r.blocks.push_back(transport::arena_layout::recurrent("ssm", 2, 3, 64));
  block.assign(r.blocks.back().bytes(), std::byte{0});
  r.block_bases.push_back(block.data());
  r.block_segments.emplace_back();
  r.block_memory.push_back(memory);
  r.block_arenas.push_back(nullptr);
  return r;
}

transfer_setup setup_of(const pool_regions& r) {
  transfer_setup s;
  s.agent.name = "regions-test";
  s.agent.ucx.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  s.regions = r;
  return s;
}

caf::actor_system_config& with_types(caf::actor_system_config& cfg) {
  runtime::add_message_types(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

TEST(pool_regions, carry_each_arenas_memory_kind_and_arena_from_the_pools) {
  auto m = models::load_causal_lm(test::model_dir("nemotron_h_tiny_hybrid"));
  ASSERT_TRUE(m.has_value()) << m.error().message();
  auto rt = runtime::start(std::move(*m), {});
  ASSERT_TRUE(rt.has_value()) << rt.error().message();
  auto [r, keep] = (*rt)->pool_memory();
  ASSERT_NE(r.kv_base, nullptr);
  EXPECT_EQ(r.kv_memory, memory_kind::host);  // the CPU model's pools
  ASSERT_NE(r.kv_arena, nullptr);
  EXPECT_EQ(r.kv_arena->data(), r.kv_base);
  ASSERT_FALSE(r.blocks.empty());
  ASSERT_EQ(r.block_memory.size(), r.blocks.size());
  ASSERT_EQ(r.block_arenas.size(), r.blocks.size());
  for (std::size_t i = 0; i < r.blocks.size(); ++i) {
    EXPECT_EQ(r.block_memory[i], memory_kind::host) << r.blocks[i].name;
    ASSERT_NE(r.block_arenas[i], nullptr);
    EXPECT_EQ(r.block_arenas[i]->data(), r.block_bases[i]) << r.blocks[i].name;
  }
  EXPECT_EQ(memory_of(*r.kv_arena), memory_kind::host);
  (*rt)->stop();
}

TEST(pool_regions, merged_keeps_the_kv_part_of_one_and_every_blocks_memory) {
  std::vector<std::byte> kv_a, block_a, kv_b, block_b;
  const auto device = hand_made(kv_a, block_a, memory_kind::cuda);
  auto host = hand_made(kv_b, block_b, memory_kind::host);
  host.kv_base = nullptr;  // no KV pool: the other's is taken
  const auto m = merged(host, device);
  EXPECT_EQ(m.kv_base, device.kv_base);
  EXPECT_EQ(m.kv_memory, memory_kind::cuda);
  ASSERT_EQ(m.block_memory.size(), 2U);
  EXPECT_EQ(m.block_memory[0], memory_kind::host);
  EXPECT_EQ(m.block_memory[1], memory_kind::cuda);
  EXPECT_EQ(m.block_arenas.size(), 2U);
  // One slot plan moves every block: mixed memory is refused, naming both.
  auto kind = blocks_memory(m);
  ASSERT_FALSE(static_cast<bool>(kind));
  EXPECT_TRUE(transport::is(kind.error(), mstar::errc::invalid_argument));
  EXPECT_TRUE(mentions(transport::describe(kind.error()), "different memory"))
      << transport::describe(kind.error());
  auto one = blocks_memory(device);
  ASSERT_TRUE(static_cast<bool>(one));
  EXPECT_EQ(*one, memory_kind::cuda);
  auto none = blocks_memory(pool_regions{});
  ASSERT_TRUE(static_cast<bool>(none));
  EXPECT_EQ(*none, memory_kind::host);
}

TEST(pool_regions, host_checksums_match_the_transports_and_catch_a_flipped_byte) {
  std::vector<std::byte> kv, block;
  auto r = hand_made(kv, block, memory_kind::host);
  std::iota(reinterpret_cast<unsigned char*>(kv.data()),
            reinterpret_cast<unsigned char*>(kv.data() + kv.size()), 0);
  const std::vector<std::int32_t> pages{1, 3};
  auto sums = checksum_pages(r, pages);
  ASSERT_TRUE(static_cast<bool>(sums)) << transport::describe(sums.error());
  auto direct = transport::checksum_pages(r.kv, r.kv_base, pages);
  ASSERT_TRUE(static_cast<bool>(direct));
  EXPECT_EQ(*sums, *direct);
  auto slot_sums = checksum_slots(r, std::vector<std::int32_t>{2});
  ASSERT_TRUE(static_cast<bool>(slot_sums)) << transport::describe(slot_sums.error());
  EXPECT_EQ(slot_sums->size(), 1U);
  // Pages 1 and 3 "landed" in place (a plan onto themselves): they verify,
  // and one flipped byte is caught.
  const std::vector<transport::unit_pair> pairs{{1, 1}, {3, 3}};
  auto plan = transport::plan_pages(r.kv, r.kv, pairs);
  ASSERT_TRUE(static_cast<bool>(plan));
  std::byte* const bases[] = {r.kv_base};
  kernels::arena* const arenas[] = {nullptr};
  EXPECT_TRUE(static_cast<bool>(verify_landed(*plan, bases, memory_kind::host, *sums)));
  ASSERT_TRUE(static_cast<bool>(corrupt_first_unit(*plan, bases, arenas, memory_kind::host)));
  auto bad = verify_landed(*plan, bases, memory_kind::host, *sums);
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_TRUE(transport::is(bad.error(), transport::errc::integrity));
  // Device memory is flipped through its arena; without one that is refused.
  auto no_arena = corrupt_first_unit(*plan, bases, arenas, memory_kind::cuda);
  ASSERT_FALSE(static_cast<bool>(no_arena));
  EXPECT_TRUE(transport::is(no_arena.error(), mstar::errc::invalid_argument));
}

TEST(transfer_actor, refuses_host_bytes_claimed_as_device_memory_naming_the_arena) {
  std::vector<std::byte> kv, block;
  caf::actor_system_config cfg;
  caf::actor_system sys{with_types(cfg)};
  auto t = spawn_transfer_actor(sys, setup_of(hand_made(kv, block, memory_kind::cuda)));
  ASSERT_FALSE(static_cast<bool>(t));
  // Without CUDA: no export and no CUDA-capable UCX; with CUDA: not device
  // memory. Either way the arena is named.
  const auto why = transport::describe(t.error());
  EXPECT_TRUE(mentions(why, "device arena 'kv'")) << why;
}

TEST(transfer_actor, refuses_a_device_arena_on_another_host_saying_why) {
  std::vector<std::byte> kv, block;
  caf::actor_system_config cfg;
  caf::actor_system sys{with_types(cfg)};
  auto t = spawn_transfer_actor(sys, setup_of(hand_made(kv, block, memory_kind::host)));
  ASSERT_TRUE(static_cast<bool>(t)) << transport::describe(t.error());
  caf::scoped_actor self{sys};
  std::vector<std::string> described;
  self->request(*t, std::chrono::seconds(10), describe_atom_v)
      .receive([&](std::vector<std::string>& d) { described = std::move(d); },
               [&](caf::error& e) { ADD_FAILURE() << transport::describe(e); });
  ASSERT_EQ(described.size(), 2U);  // kv and ssm
  // The KV arena as a prefill node on another host with device pools would
  // describe it: the decode node here has no path to it.
  auto d = transport::descriptor_from_json(described[0]);
  ASSERT_TRUE(static_cast<bool>(d));
  d->memory = memory_kind::cuda;
  d->host = "another-host.invalid";
  d->shm_name.clear();
  pull_order o;
  o.arenas = {transport::to_json(*d)};
  o.pages = {{1, 2}};
  o.kv_sums = {{1, 0}};
  o.timeout = std::chrono::seconds(5);
  std::string why;
  self->request(*t, std::chrono::seconds(10), pull_atom_v, o)
      .receive([&](const pull_result&) { ADD_FAILURE() << "a pull with no path succeeded"; },
               [&](caf::error& e) {
                 EXPECT_TRUE(transport::is(e, mstar::errc::unsupported)) << transport::describe(e);
                 why = transport::describe(e);
               });
  EXPECT_TRUE(mentions(why, "device arena 'kv'")) << why;
  EXPECT_TRUE(mentions(why, "another host")) << why;
  EXPECT_TRUE(mentions(why, "no CUDA transports")) << why;
  self->send_exit(*t, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace mstar::actors::pool_regions_test
