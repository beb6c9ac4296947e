// The same-host paths: an arena in a named segment is mapped by a peer on
// this host and copied directly; with mapping off, the same descriptor goes
// through UCX; a worker reads its own arena over UCX's `self` transport;
// arenas UCX allocates (shared memory its transports map) move byte-exact.
#include <algorithm>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/transport/support.hpp"
#include "transport/agent.hpp"
#include "transport/shm.hpp"

namespace mstar::transport {
namespace {

constexpr std::uint64_t shm_page_bytes = 32 * 1024;
const arena_layout shm_layout{arena_kind::kv_pages, "kv", 1, 32, shm_page_bytes};

std::string deployment() {
  return "shmtest" + std::to_string(::getpid());
}

std::vector<unit_pair> some_pairs() {
  return {{0, 31}, {1, 30}, {5, 6}, {6, 7}, {7, 8}, {20, 0}};
}

void read_and_check(bool map_segments) {
  auto a = test::make_agent("owner", "tcp");
  auto b = test::make_agent("mapper", "tcp", map_segments);
  ASSERT_TRUE(a && b);
  auto segment = create_segment(deployment(), "kv", shm_layout.bytes());
  ASSERT_TRUE(segment) << describe(segment.error());
  test::fill_pattern(segment->data(), shm_layout.bytes(), 11);
  auto s = a->register_segment(*segment, shm_layout);
  ASSERT_TRUE(s) << describe(s.error());
  auto d = a->describe(*s);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->shm_name, segment->name());
  EXPECT_EQ(d->host, host_identity());
  kernels::host_arena dst{shm_layout.bytes()};
  auto local = b->register_arena(dst.data(), shm_layout);
  auto remote = b->attach(*d);
  ASSERT_TRUE(local && remote) << describe(remote.error());
  EXPECT_EQ(b->is_mapped(*remote), map_segments);
  ASSERT_TRUE(a->start_progress_thread());
  auto plan = plan_pages(shm_layout, shm_layout, some_pairs());
  auto h = b->start(direction::read, *plan, {{*local, *remote}}, test::in_seconds(20));
  ASSERT_TRUE(h);
  auto done = b->wait(*h);
  ASSERT_TRUE(done) << describe(done.error());
  for (const auto& p : some_pairs())
    EXPECT_TRUE(test::holds_pattern(dst.data(), p.dst * shm_page_bytes, p.src * shm_page_bytes,
                                    shm_page_bytes, 11));
}

TEST(agent_shm, a_same_host_segment_is_mapped_and_copied_directly) {
  read_and_check(true);
}

TEST(agent_shm, with_mapping_off_the_same_segment_is_read_over_ucx) {
  read_and_check(false);
}

TEST(agent_shm, a_push_into_a_mapped_segment_lands_in_the_owner) {
  auto a = test::make_agent("owner", "tcp");
  auto b = test::make_agent("writer", "tcp");
  ASSERT_TRUE(a && b);
  auto segment = create_segment(deployment(), "push", shm_layout.bytes());
  ASSERT_TRUE(segment);
  auto s = a->register_segment(*segment, shm_layout);
  kernels::host_arena src{shm_layout.bytes()};
  test::fill_pattern(src.data(), src.size(), 12);
  auto local = b->register_arena(src.data(), shm_layout);
  auto remote = b->attach(*a->describe(*s));
  ASSERT_TRUE(s && local && remote);
  ASSERT_TRUE(b->is_mapped(*remote));
  auto plan = plan_pages(shm_layout, shm_layout, std::vector<unit_pair>{{3, 4}, {4, 5}});
  auto h = b->start(direction::write, *plan, {{*local, *remote}}, test::in_seconds(20));
  ASSERT_TRUE(h && b->wait(*h));
  EXPECT_TRUE(test::holds_pattern(segment->data(), 4 * shm_page_bytes, 3 * shm_page_bytes,
                                  2 * shm_page_bytes, 12));
}

TEST(agent_self, a_worker_reads_its_own_arena_over_the_self_transport) {
  auto a = test::make_agent("self", "self");
  ASSERT_TRUE(a);
  kernels::host_arena one{shm_layout.bytes()}, two{shm_layout.bytes()};
  test::fill_pattern(one.data(), one.size(), 13);
  auto s = a->register_arena(one.data(), shm_layout);
  auto d = a->register_arena(two.data(), shm_layout);
  auto r = a->attach(*a->describe(*s));
  ASSERT_TRUE(s && d && r) << describe(r.error());
  auto plan = plan_pages(shm_layout, shm_layout, some_pairs());
  auto h = a->start(direction::read, *plan, {{*d, *r}}, test::in_seconds(20));
  ASSERT_TRUE(h);
  auto done = a->wait(*h);
  ASSERT_TRUE(done) << describe(done.error());
  for (const auto& p : some_pairs())
    EXPECT_TRUE(test::holds_pattern(two.data(), p.dst * shm_page_bytes, p.src * shm_page_bytes,
                                    shm_page_bytes, 13));
}

class agent_ucx_memory : public ::testing::TestWithParam<std::string> {};

TEST_P(agent_ucx_memory, arenas_ucx_allocated_start_zeroed_and_move_byte_exact) {
  auto a = test::make_agent("source", GetParam());
  auto b = test::make_agent("destination", GetParam());
  ASSERT_TRUE(a && b);
  auto s = a->allocate_arena(shm_layout);
  auto d = b->allocate_arena(shm_layout);
  ASSERT_TRUE(s && d) << describe(s ? d.error() : s.error());
  std::byte* src = a->arena_base(*s);
  std::byte* dst = b->arena_base(*d);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(b->arena_base(99), nullptr);
  EXPECT_TRUE(std::all_of(dst, dst + shm_layout.bytes(), [](std::byte x) {
    return x == std::byte{0};
  })) << "a UCX-allocated arena starts zeroed, like every arena";
  test::fill_pattern(src, shm_layout.bytes(), 14);
  auto r = b->attach(*a->describe(*s));
  ASSERT_TRUE(r) << describe(r.error());
  ASSERT_TRUE(a->start_progress_thread());
  auto plan = plan_pages(shm_layout, shm_layout, some_pairs());
  auto h = b->start(direction::read, *plan, {{*d, *r}}, test::in_seconds(20));
  ASSERT_TRUE(h);
  auto done = b->wait(*h);
  ASSERT_TRUE(done) << describe(done.error());
  for (const auto& p : some_pairs())
    EXPECT_TRUE(test::holds_pattern(dst, p.dst * shm_page_bytes, p.src * shm_page_bytes,
                                    shm_page_bytes, 14));
}

INSTANTIATE_TEST_SUITE_P(transports, agent_ucx_memory, ::testing::Values("tcp", "sm"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace mstar::transport
