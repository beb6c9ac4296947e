// Deadlines and failures between two agents in one process: a transfer never
// outlives its deadline, a timed-out endpoint is cut off and replaced on the
// next attach, and misuse fails with a named error instead of moving bytes.
#include <gtest/gtest.h>

#include "tests/transport/support.hpp"
#include "transport/agent.hpp"

namespace mstar::transport {
namespace {

constexpr std::uint64_t failure_page_bytes = 64 * 1024;
const arena_layout failure_layout{arena_kind::kv_pages, "kv", 1, 64, failure_page_bytes};

struct two_agents {
  explicit two_agents(const std::string& tls)
      : a(test::make_agent("source", tls)),
        b(test::make_agent("destination", tls)),
        src(failure_layout.bytes()),
        dst(failure_layout.bytes()) {
    test::fill_pattern(src.data(), src.size(), 3);
  }
  std::unique_ptr<agent> a, b;
  kernels::host_arena src, dst;
};

std::vector<unit_pair> all_pages() {
  std::vector<unit_pair> pairs;
  for (int i = 0; i < 64; ++i)
    pairs.push_back({i, i});
  return pairs;
}

class agent_deadline : public ::testing::TestWithParam<std::string> {};

TEST_P(agent_deadline, a_transfer_started_past_its_deadline_fails_with_timed_out) {
  two_agents t{GetParam()};
  ASSERT_TRUE(t.a && t.b);
  auto s = t.a->register_arena(t.src.data(), failure_layout);
  auto d = t.b->register_arena(t.dst.data(), failure_layout);
  auto r = t.b->attach(*t.a->describe(*s));
  ASSERT_TRUE(s && d && r);
  ASSERT_TRUE(t.a->start_progress_thread());
  auto plan = plan_pages(failure_layout, failure_layout, all_pages());
  auto h = t.b->start(direction::read, *plan, {{*d, *r}}, clock::now());
  ASSERT_TRUE(h);
  auto done = t.b->wait(*h);
  ASSERT_FALSE(done);
  EXPECT_TRUE(is(done.error(), errc::timed_out)) << describe(done.error());
}

INSTANTIATE_TEST_SUITE_P(transports, agent_deadline, ::testing::Values("tcp", "sm"),
                         [](const auto& param_info) { return param_info.param; });

// Over TCP, UCX emulates a remote read with messages the target answers from
// its progress loop: a target that never progresses is a hung peer.
TEST(agent_tcp, a_read_from_a_peer_that_never_progresses_times_out_and_reattaching_recovers) {
  two_agents t{"tcp"};
  ASSERT_TRUE(t.a && t.b);
  auto s = t.a->register_arena(t.src.data(), failure_layout);
  auto d = t.b->register_arena(t.dst.data(), failure_layout);
  auto r = t.b->attach(*t.a->describe(*s));
  ASSERT_TRUE(s && d && r);
  auto plan = plan_pages(failure_layout, failure_layout, all_pages());
  const auto started = clock::now();
  auto h = t.b->start(direction::read, *plan, {{*d, *r}}, started + std::chrono::milliseconds{300});
  ASSERT_TRUE(h);
  auto done = t.b->wait(*h);
  const auto took = clock::now() - started;
  ASSERT_FALSE(done);
  EXPECT_TRUE(is(done.error(), errc::timed_out)) << describe(done.error());
  EXPECT_LT(took, std::chrono::milliseconds{1500});

  // The endpoint was cut off: the old attachment refuses, a fresh one works.
  auto stale = t.b->start(direction::read, *plan, {{*d, *r}}, test::in_seconds(5));
  ASSERT_FALSE(stale);
  EXPECT_TRUE(is(stale.error(), errc::closed)) << describe(stale.error());
  ASSERT_TRUE(t.a->start_progress_thread());
  auto again = t.b->attach(*t.a->describe(*s));
  ASSERT_TRUE(again) << describe(again.error());
  auto h2 = t.b->start(direction::read, *plan, {{*d, *again}}, test::in_seconds(20));
  ASSERT_TRUE(h2);
  auto ok = t.b->wait(*h2);
  ASSERT_TRUE(ok) << describe(ok.error());
  EXPECT_TRUE(test::holds_pattern(t.dst.data(), 0, 0, failure_layout.bytes(), 3));
}

TEST(agent_misuse, plans_and_bindings_that_do_not_fit_are_refused_with_a_reason) {
  two_agents t{"tcp"};
  ASSERT_TRUE(t.a && t.b);
  auto s = t.a->register_arena(t.src.data(), failure_layout);
  auto d = t.b->register_arena(t.dst.data(), failure_layout);
  auto r = t.b->attach(*t.a->describe(*s));
  ASSERT_TRUE(s && d && r);
  ASSERT_TRUE(t.a->start_progress_thread());  // so closing the endpoint is quick
  auto plan = plan_pages(failure_layout, failure_layout, all_pages());
  auto two = t.b->start(direction::read, *plan, {{*d, *r}, {*d, *r}}, test::in_seconds(5));
  ASSERT_FALSE(two);
  EXPECT_TRUE(is(two.error(), mstar::errc::invalid_argument)) << describe(two.error());
  auto missing = t.b->start(direction::read, *plan, {{*d, 7}}, test::in_seconds(5));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(is(missing.error(), mstar::errc::not_found)) << describe(missing.error());
  auto slots = plan_slots(std::vector{arena_layout::recurrent("ssm", 1, 64, failure_page_bytes)},
                          std::vector{arena_layout::recurrent("ssm", 1, 64, failure_page_bytes)},
                          std::vector<unit_pair>{{1, 1}});
  ASSERT_TRUE(slots);
  auto kind = t.b->start(direction::read, *slots, {{*d, *r}}, test::in_seconds(5));
  ASSERT_FALSE(kind);
  EXPECT_TRUE(is(kind.error(), mstar::errc::invalid_argument)) << describe(kind.error());
  auto empty = t.b->wait(transfer_handle{});
  EXPECT_FALSE(empty);
  EXPECT_FALSE(t.b->describe(5));
}

TEST(agent_misuse, a_second_progress_thread_is_refused_and_stop_is_idempotent) {
  auto a = test::make_agent("solo", "tcp");
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->start_progress_thread());
  auto again = a->start_progress_thread();
  ASSERT_FALSE(again);
  EXPECT_TRUE(is(again.error(), errc::closed));
  a->stop_progress_thread();
  a->stop_progress_thread();
}

}  // namespace
}  // namespace mstar::transport
