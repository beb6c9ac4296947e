// The in-process group: what each collective leaves on every rank, and that
// a rank that never arrives or leaves fails its peers within the timeout.
#include "parallel/local_group.hpp"

#include <chrono>
#include <functional>
#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "tests/parallel/group_support.hpp"

namespace mstar::parallel {
namespace {

using namespace std::chrono_literals;

std::vector<std::unique_ptr<communicator>> group_of(int n, std::chrono::milliseconds t = 10s) {
  auto g = local_group::make(n, t);
  EXPECT_TRUE(g.has_value()) << g.error().message();
  return g ? std::move(*g) : std::vector<std::unique_ptr<communicator>>{};
}

TEST(local_group, all_reduce_sum_leaves_the_same_sum_on_every_rank) {
  auto ranks = group_of(3);
  std::vector<std::vector<float>> data(3);
  on_every_rank(ranks, [&data](communicator& c) {
    auto& d = data[static_cast<std::size_t>(c.rank())];
    for (int step = 0; step < 50; ++step) {
      d = {static_cast<float>(c.rank() + 1), 0.1F * static_cast<float>(c.rank()),
           static_cast<float>(step)};
      ASSERT_TRUE(c.all_reduce_sum(d).has_value());
    }
  });
  for (const auto& d : data) {
    EXPECT_FLOAT_EQ(d[0], 6.0F);
    EXPECT_FLOAT_EQ(d[1], 0.3F);
    EXPECT_FLOAT_EQ(d[2], 3.0F * 49.0F);
    EXPECT_EQ(d, data[0]);  // the same bits everywhere: the sum runs in rank order
  }
}

TEST(local_group, all_gather_puts_each_ranks_part_at_its_rank) {
  auto ranks = group_of(4);
  std::vector<std::vector<float>> out(4, std::vector<float>(8, -1.0F));
  on_every_rank(ranks, [&out](communicator& c) {
    const float r = static_cast<float>(c.rank());
    const std::vector<float> in{r, 10.0F + r};
    ASSERT_TRUE(c.all_gather(in, out[static_cast<std::size_t>(c.rank())]).has_value());
  });
  const std::vector<float> want{0, 10, 1, 11, 2, 12, 3, 13};
  for (const auto& o : out)
    EXPECT_EQ(o, want);
}

TEST(local_group, broadcast_copies_the_roots_bytes_to_every_rank) {
  auto ranks = group_of(3);
  std::vector<std::vector<std::byte>> data(3, std::vector<std::byte>(4));
  on_every_rank(ranks, [&data](communicator& c) {
    auto& d = data[static_cast<std::size_t>(c.rank())];
    std::fill(d.begin(), d.end(), std::byte{static_cast<unsigned char>(c.rank() + 7)});
    ASSERT_TRUE(c.broadcast(d, 1).has_value());
  });
  for (const auto& d : data)
    EXPECT_EQ(d, std::vector<std::byte>(4, std::byte{8}));
}

TEST(local_group, a_rank_that_never_arrives_fails_the_others_with_a_timeout) {
  auto ranks = group_of(3, 100ms);
  std::vector<std::string> errors(3);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // rank 2 never calls
    communicator* c = ranks[static_cast<std::size_t>(r)].get();
    threads.emplace_back([c, &errors] {
      std::vector<float> d{1.0F};
      auto ok = c->all_reduce_sum(d);
      ASSERT_FALSE(ok.has_value());
      EXPECT_EQ(ok.error().code(), errc::internal);
      errors[static_cast<std::size_t>(c->rank())] = ok.error().message();
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("rank 2 did not arrive within 100 ms"),
              std::string::npos)
        << errors[static_cast<std::size_t>(r)];
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("all_reduce_sum"), std::string::npos);
  }
  // The late rank finds the group broken instead of waiting out its own timeout.
  std::vector<float> d{1.0F};
  auto late = ranks[2]->all_reduce_sum(d);
  ASSERT_FALSE(late.has_value());
  EXPECT_NE(late.error().message().find("did not arrive"), std::string::npos);
}

TEST(local_group, a_rank_that_leaves_fails_its_waiting_peer_at_once) {
  auto ranks = group_of(2, 60s);
  std::string message;
  const auto start = std::chrono::steady_clock::now();
  communicator* c0 = ranks[0].get();
  std::thread waiter([c0, &message] {
    std::vector<float> in{1.0F}, out(2);
    auto ok = c0->all_gather(in, out);
    ASSERT_FALSE(ok.has_value());
    message = ok.error().message();
  });
  std::this_thread::yield();
  ranks[1].reset();  // the rank "dies": its communicator goes away
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // far below the 60 s timeout
  EXPECT_NE(message.find("rank 1 left the group"), std::string::npos) << message;
  EXPECT_NE(message.find("all_gather"), std::string::npos) << message;
}

TEST(local_group, ranks_out_of_step_get_an_error_naming_both_calls) {
  auto ranks = group_of(2);
  std::vector<std::string> errors(2);
  on_every_rank(ranks, [&errors](communicator& c) {
    std::vector<float> d(c.rank() == 0 ? 4 : 5, 1.0F);
    auto ok = c.all_reduce_sum(d);
    ASSERT_FALSE(ok.has_value());
    errors[static_cast<std::size_t>(c.rank())] = ok.error().message();
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("out of step"), std::string::npos) << e;
}

TEST(local_group, abort_names_the_reason_to_the_peers) {
  auto ranks = group_of(2, 60s);
  ranks[1]->abort("rank 1's forward failed");
  std::vector<float> d{1.0F};
  auto ok = ranks[0]->all_reduce_sum(d);
  ASSERT_FALSE(ok.has_value());
  EXPECT_NE(ok.error().message().find("rank 1 left the group (rank 1's forward failed)"),
            std::string::npos)
      << ok.error().message();
}

TEST(local_group, refuses_a_size_or_timeout_that_is_not_positive) {
  EXPECT_FALSE(local_group::make(0).has_value());
  auto t = local_group::make(2, 0ms);
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message().find("timeout"), std::string::npos);
}

TEST(local_group, a_group_of_one_returns_its_own_data) {
  auto ranks = group_of(1);
  std::vector<float> d{2.5F};
  ASSERT_TRUE(ranks[0]->all_reduce_sum(d).has_value());
  EXPECT_EQ(d[0], 2.5F);
}

}  // namespace
}  // namespace mstar::parallel
