// Two agents in one process, each with its own UCX context and worker, over
// each transport in turn: pages and slots arrive byte-exact, many transfers
// overlap, cancellation and deadlines end transfers cleanly.
#include "transport/agent.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>

#include "tests/support/matchers.hpp"
#include "tests/transport/support.hpp"
#include "transport/checksum.hpp"

namespace mstar::transport {
namespace {

using test::fill_pattern;
using test::holds_pattern;
using test::in_seconds;

constexpr std::uint64_t agent_page_bytes = 48 * 1024;

// Source agent `a` (serving, progress thread on) and destination agent `b`,
// each with a KV arena; `a`'s pages hold the pattern of salt 7.
class agent_pair : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    a_ = test::make_agent("source", GetParam());
    b_ = test::make_agent("destination", GetParam());
    ASSERT_TRUE(a_ && b_);
    src_ = kernels::host_arena{src_layout_.bytes()};
    dst_ = kernels::host_arena{dst_layout_.bytes()};
    fill_pattern(src_.data(), src_.size(), 7);
    auto src_id = a_->register_arena(src_.data(), src_layout_);
    auto dst_id = b_->register_arena(dst_.data(), dst_layout_);
    ASSERT_TRUE(src_id && dst_id);
    auto d = a_->describe(*src_id);
    ASSERT_TRUE(d) << describe(d.error());
    auto remote = b_->attach(*d);
    ASSERT_TRUE(remote) << describe(remote.error());
    binding_ = {arena_pair{*dst_id, *remote}};
    ASSERT_TRUE(a_->start_progress_thread());
  }

  // Pairs with runs, gaps and a reversed stretch, in shuffled order.
  static std::vector<unit_pair> mixed_pairs() {
    std::vector<unit_pair> pairs{{1, 0},  {2, 1},  {3, 2},   {4, 3},   {9, 20},  {10, 21},
                                 {30, 5}, {31, 4}, {12, 12}, {40, 30}, {41, 31}, {0, 39}};
    std::shuffle(pairs.begin(), pairs.end(), std::mt19937{1234});
    return pairs;
  }

  ::testing::AssertionResult landed(const std::vector<unit_pair>& pairs) const {
    for (const auto& p : pairs) {
      auto ok = holds_pattern(dst_.data(), p.dst * agent_page_bytes, p.src * agent_page_bytes,
                              agent_page_bytes, 7);
      if (!ok)
        return ok << " in page " << p.dst << " (source page " << p.src << ")";
    }
    return ::testing::AssertionSuccess();
  }

  const arena_layout src_layout_ =
      arena_layout{arena_kind::kv_pages, "kv", 1, 48, agent_page_bytes};
  const arena_layout dst_layout_ =
      arena_layout{arena_kind::kv_pages, "kv", 1, 40, agent_page_bytes};
  // The arenas outlive the agents that registered them (register_arena):
  // destroyed after the agents have joined their progress threads.
  kernels::host_arena src_, dst_;
  std::unique_ptr<agent> a_, b_;
  std::vector<arena_pair> binding_;
};

TEST_P(agent_pair, reads_pages_byte_exact_with_runs_coalesced_and_chunks_split) {
  const auto pairs = mixed_pairs();
  auto plan = plan_pages(src_layout_, dst_layout_, pairs, plan_options{100 * 1024});
  ASSERT_TRUE(plan);
  auto h = b_->start(direction::read, *plan, binding_, in_seconds(20));
  ASSERT_TRUE(h) << describe(h.error());
  auto done = b_->wait(*h);
  ASSERT_TRUE(done) << describe(done.error());
  EXPECT_EQ(h->bytes_done(), pairs.size() * agent_page_bytes);
  EXPECT_TRUE(landed(pairs));
  EXPECT_EQ(std::to_integer<int>(dst_.data()[6 * agent_page_bytes]), 0)
      << "an unlisted page changed";
}

TEST_P(agent_pair, writes_pages_byte_exact_into_the_peer) {
  // Push: b's arena is the source this time.
  fill_pattern(dst_.data(), dst_.size(), 9);
  const std::vector<unit_pair> pairs{{0, 47}, {1, 46}, {2, 10}, {3, 11}, {4, 12}};
  auto plan = plan_pages(dst_layout_, src_layout_, pairs);
  ASSERT_TRUE(plan);
  auto h = b_->start(direction::write, *plan, binding_, in_seconds(20));
  ASSERT_TRUE(h) << describe(h.error());
  ASSERT_TRUE(b_->wait(*h));
  for (const auto& p : pairs)
    EXPECT_TRUE(holds_pattern(src_.data(), p.dst * agent_page_bytes, p.src * agent_page_bytes,
                              agent_page_bytes, 9));
  EXPECT_TRUE(
      holds_pattern(src_.data(), 5 * agent_page_bytes, 5 * agent_page_bytes, agent_page_bytes, 7));
}

TEST_P(agent_pair, many_transfers_in_flight_finish_whatever_order_they_are_waited_in) {
  std::vector<transfer_handle> handles;
  std::vector<std::vector<unit_pair>> all;
  for (int t = 0; t < 8; ++t) {
    std::vector<unit_pair> pairs;
    for (int k = 0; k < 5; ++k)
      pairs.push_back({t * 5 + k, t * 5 + k});
    auto plan = plan_pages(src_layout_, dst_layout_, pairs, plan_options{16 * 1024});
    ASSERT_TRUE(plan);
    auto h = b_->start(direction::read, *plan, binding_, in_seconds(20));
    ASSERT_TRUE(h);
    handles.push_back(*h);
    all.push_back(pairs);
  }
  for (auto it = handles.rbegin(); it != handles.rend(); ++it) {
    auto done = b_->wait(*it);
    EXPECT_TRUE(done) << describe(done.error());
  }
  for (const auto& pairs : all)
    EXPECT_TRUE(landed(pairs));
}

TEST_P(agent_pair, a_progress_thread_drives_transfers_while_the_caller_sleeps_in_wait) {
  ASSERT_TRUE(b_->start_progress_thread());
  const auto pairs = mixed_pairs();
  auto plan = plan_pages(src_layout_, dst_layout_, pairs);
  ASSERT_TRUE(plan);
  auto h = b_->start(direction::read, *plan, binding_, in_seconds(20));
  ASSERT_TRUE(h);
  auto done = b_->wait(*h);
  ASSERT_TRUE(done) << describe(done.error());
  EXPECT_TRUE(h->finished());
  EXPECT_TRUE(landed(pairs));
  b_->stop_progress_thread();
}

TEST_P(agent_pair, checksums_pass_after_a_transfer_and_a_corrupted_page_is_named) {
  const auto pairs = mixed_pairs();
  std::vector<std::int32_t> sources;
  for (const auto& p : pairs)
    sources.push_back(p.src);
  auto sums = checksum_pages(src_layout_, src_.data(), sources);
  ASSERT_TRUE(sums);
  auto plan = plan_pages(src_layout_, dst_layout_, pairs);
  ASSERT_TRUE(plan);
  auto h = b_->start(direction::read, *plan, binding_, in_seconds(20));
  ASSERT_TRUE(h && b_->wait(*h));
  const std::byte* bases[] = {dst_.data()};
  auto ok = verify_units(*plan, bases, *sums);
  EXPECT_TRUE(ok) << describe(ok.error());
  dst_.data()[21 * agent_page_bytes + 100] ^= std::byte{1};  // page 21 came from page 10
  auto bad = verify_units(*plan, bases, *sums);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(is(bad.error(), errc::integrity));
  EXPECT_TRUE(mstar::test::contains(describe(bad.error()), "page 21 (source page 10)"));
}

TEST_P(agent_pair, cancel_stops_issuing_and_finishes_with_cancelled) {
  b_.reset();
  agent_options o;
  o.name = "slow-destination";
  o.ucx = test::ucx_for(GetParam());
  o.transfers.max_inflight_ops = 1;
  o.detect_peer_failure = GetParam() != "sm";
  b_ = std::move(*agent::make(o));
  auto dst_id = b_->register_arena(dst_.data(), dst_layout_);
  auto remote = b_->attach(*a_->describe(0));
  ASSERT_TRUE(dst_id && remote);
  std::vector<unit_pair> pairs;
  for (int i = 0; i < 40; ++i)
    pairs.push_back({i, i});
  auto plan = plan_pages(src_layout_, dst_layout_, pairs, plan_options{4096});
  ASSERT_TRUE(plan);
  auto h = b_->start(direction::read, *plan, {{*dst_id, *remote}}, in_seconds(20));
  ASSERT_TRUE(h);
  h->cancel();
  auto done = b_->wait(*h);
  ASSERT_FALSE(done);
  EXPECT_TRUE(is(done.error(), errc::cancelled)) << describe(done.error());
  EXPECT_LT(h->bytes_done(), h->total_bytes());
}

TEST_P(agent_pair, a_range_outside_either_arena_is_refused_before_anything_moves) {
  const arena_layout bigger{arena_kind::kv_pages, "kv", 1, 400, agent_page_bytes};
  auto plan = plan_pages(bigger, dst_layout_, std::vector<unit_pair>{{300, 0}});
  ASSERT_TRUE(plan);
  auto h = b_->start(direction::read, *plan, binding_, in_seconds(5));
  ASSERT_FALSE(h);
  EXPECT_TRUE(is(h.error(), mstar::errc::out_of_range)) << describe(h.error());
}

INSTANTIATE_TEST_SUITE_P(transports, agent_pair, ::testing::Values("tcp", "sm"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace mstar::transport
