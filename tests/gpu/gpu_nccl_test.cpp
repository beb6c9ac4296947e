// The NCCL group (parallel/nccl_group.hpp) on real GPUs. With one GPU: a
// group of one (each collective leaves what the rank brought; abort, bad
// arguments and a group that never forms end in errors, not hangs). With two
// or more: one thread per GPU, one rank each (NCCL refuses two ranks on one
// device), sums, gather order, a broadcast from rank 1, and a rank's abort
// failing its peers within their timeout.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_support.hpp"

#ifdef MSTAR_HAVE_NCCL
#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/nccl_group.hpp"
#endif

namespace mstar::test::gpu {
namespace {

#ifndef MSTAR_HAVE_NCCL

TEST(gpu_nccl, needs_a_build_with_nccl) {
  GTEST_SKIP() << "built without NCCL (MSTAR_NCCL_ENABLED is OFF): no NCCL group to test";
}

#else

using namespace std::chrono_literals;
using parallel::nccl_group;
using parallel::nccl_unique_id;

int nccl_test_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

/// Skips (never fails, even under MSTAR_REQUIRE_GPU) below `n` devices.
#define MSTAR_REQUIRE_GPUS(n)                                                                  \
  do {                                                                                         \
    MSTAR_REQUIRE_GPU();                                                                       \
    if (const int have = nccl_test_devices(); have < (n)) {                                    \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices (one NCCL rank each), found " << have; \
    }                                                                                          \
  } while (false)

std::unique_ptr<nccl_group> nccl_group_of_one(std::chrono::milliseconds timeout = 30s) {
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  auto id = nccl_group::make_unique_id();
  EXPECT_TRUE(id.has_value()) << id.error().to_string();
  if (!id)
    return nullptr;
  auto group = nccl_group::create(0, 1, *id, 0, timeout);
  EXPECT_TRUE(group.has_value()) << group.error().to_string();
  return group ? std::move(group).value() : nullptr;
}

std::span<float> nccl_span(device_vector<float>& v) {
  return {v.data(), v.size()};
}

std::span<std::byte> nccl_bytes(device_vector<std::uint8_t>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size()};
}

/// Runs body(group) on one thread per device, rank r on device r, all
/// joined in one group; the groups are destroyed on their threads.
void on_every_gpu(int ranks, std::chrono::milliseconds timeout,
                  const std::function<void(nccl_group&)>& body) {
  auto id = nccl_group::make_unique_id();
  ASSERT_TRUE(id.has_value()) << id.error().to_string();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([r, ranks, timeout, &id, &body] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      auto group = nccl_group::create(r, ranks, *id, r, timeout);
      ASSERT_TRUE(group.has_value()) << "rank " << r << ": " << group.error().to_string();
      body(**group);
    });
  }
  for (auto& t : threads)
    t.join();
}

/// A barrier with a deadline, for the test threads: a rank that never
/// arrives (its create failed) must not hang the others.
class nccl_test_meeting {
 public:
  explicit nccl_test_meeting(int ranks) : ranks_(ranks) {}

  /// True once every rank arrived, false past `timeout`.
  bool arrive_and_wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (++arrived_ == ranks_)
      cv_.notify_all();
    return cv_.wait_for(lock, timeout, [this] { return arrived_ >= ranks_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int ranks_;
  int arrived_ = 0;
};

int nccl_test_ranks() {
  return std::min(nccl_test_devices(), 8);
}

// --- one GPU: a group of one -------------------------------------------------

TEST(gpu_nccl, a_group_of_one_all_reduces_to_its_own_bits) {
  MSTAR_REQUIRE_GPU();
  auto group = nccl_group_of_one();
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  auto rng = seeded(1801);
  const auto host = rng.floats(100'003);
  auto data = upload(host);
  expect_device_ok();
  ASSERT_TRUE(group->all_reduce_sum(nccl_span(data)).has_value());
  EXPECT_EQ(bytes_of(data.download()), bytes_of(host));
  EXPECT_FALSE(group->broken());
}

TEST(gpu_nccl, a_group_of_one_gathers_a_copy_and_broadcasts_its_own_bytes) {
  MSTAR_REQUIRE_GPU();
  auto group = nccl_group_of_one();
  ASSERT_NE(group, nullptr);
  auto rng = seeded(1802);
  const auto host = rng.floats(4097);
  auto in = upload(host);
  auto out = poisoned<float>(host.size());
  std::vector<std::uint8_t> bytes(1000);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>(i * 7);
  auto d_bytes = upload(bytes);
  expect_device_ok();
  ASSERT_TRUE(group->all_gather(in.span(), nccl_span(out)).has_value());
  EXPECT_EQ(bytes_of(out.download()), bytes_of(host));
  ASSERT_TRUE(group->broadcast(nccl_bytes(d_bytes), 0).has_value());
  EXPECT_EQ(d_bytes.download(), bytes);
  // Empty spans are no-ops, not NCCL calls with null pointers.
  EXPECT_TRUE(group->all_reduce_sum({}).has_value());
  EXPECT_TRUE(group->broadcast({}, 0).has_value());
}

TEST(gpu_nccl, a_borrowed_stream_orders_the_collective_after_the_work_queued_on_it) {
  MSTAR_REQUIRE_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // The model's CUDA backend: its own non-blocking stream, work on it, then
  // the collective on the same stream, with no synchronisation in between.
  auto stream = kernels::cuda::stream::make();
  ASSERT_TRUE(stream.has_value()) << stream.error().to_string();
  auto id = nccl_group::make_unique_id();
  ASSERT_TRUE(id.has_value()) << id.error().to_string();
  auto group = nccl_group::create(0, 1, *id, 0, 30s, stream->get());
  ASSERT_TRUE(group.has_value()) << group.error().to_string();
  EXPECT_EQ((*group)->stream(), stream->get());
  constexpr std::size_t count = 1 << 20;
  auto in = poisoned<float>(count);
  auto out = poisoned<float>(count);
  expect_device_ok();
  ASSERT_EQ(cudaMemsetAsync(in.data(), 0x3f, in.bytes(), stream->get()), cudaSuccess);
  ASSERT_TRUE((*group)->all_gather(in.span(), nccl_span(out)).has_value());
  EXPECT_EQ(out.download(), std::vector<float>(count, std::bit_cast<float>(0x3f3f3f3fU)));
  group->reset();  // before the stream it borrowed
}

TEST(gpu_nccl, after_abort_every_call_fails_naming_the_reason) {
  MSTAR_REQUIRE_GPU();
  auto group = nccl_group_of_one();
  ASSERT_NE(group, nullptr);
  auto data = upload(std::vector<float>{1, 2, 3});
  expect_device_ok();
  group->abort("the step loop stopped on a bad batch");
  for (int i = 0; i < 2; ++i) {
    auto r = group->all_reduce_sum(nccl_span(data));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), errc::internal);
    EXPECT_NE(r.error().message().find("rank 0 aborted (the step loop stopped on a bad batch)"),
              std::string::npos)
        << r.error().message();
  }
  EXPECT_FALSE(group->broadcast({}, 0).has_value());  // even one with nothing to move
  group->abort("again");                              // a second abort changes nothing
  ASSERT_TRUE(group->broken());
  EXPECT_NE(group->broken()->message().find("bad batch"), std::string::npos);
}

TEST(gpu_nccl, bad_arguments_fail_and_break_the_group) {
  MSTAR_REQUIRE_GPU();
  {
    auto group = nccl_group_of_one();
    ASSERT_NE(group, nullptr);
    auto in = upload(std::vector<float>{1, 2});
    auto out = poisoned<float>(3);
    auto r = group->all_gather(in.span(), nccl_span(out));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), errc::invalid_argument);
    EXPECT_NE(r.error().message().find("output holds 3 floats, not 1 ranks x 2"), std::string::npos)
        << r.error().message();
    // Peers would now wait on this rank: the group is broken, with that cause.
    auto again = group->all_reduce_sum(nccl_span(in));
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error(), r.error());
  }
  {
    auto group = nccl_group_of_one();
    ASSERT_NE(group, nullptr);
    auto bytes = upload(std::vector<std::uint8_t>(8, 1));
    auto r = group->broadcast(nccl_bytes(bytes), 1);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("root 1 is not a rank of 1"), std::string::npos)
        << r.error().message();
  }
  {
    // Host memory would fault in NCCL's kernel and poison the CUDA context.
    auto group = nccl_group_of_one();
    ASSERT_NE(group, nullptr);
    std::vector<float> host(16, 1.0F);
    auto r = group->all_reduce_sum(host);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), errc::invalid_argument);
    EXPECT_NE(r.error().message().find("is not device memory of CUDA device 0"), std::string::npos)
        << r.error().message();
  }
  expect_device_ok();  // nothing above left a CUDA error behind
}

TEST(gpu_nccl, create_refuses_bad_ranks_and_a_bad_hex_id) {
  MSTAR_REQUIRE_GPU();
  const nccl_unique_id id{};
  for (const auto& [rank, size] : {std::pair{1, 1}, std::pair{-1, 2}, std::pair{0, 0}}) {
    auto g = nccl_group::create(rank, size, id, 0, 1s);
    ASSERT_FALSE(g.has_value());
    EXPECT_EQ(g.error().code(), errc::invalid_argument) << g.error().message();
  }
  auto g = nccl_group::create(0, 1, id, 0, 0ms);
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code(), errc::invalid_argument);

  // What a launcher holding a mangled id gets: an error before NCCL is asked.
  auto good = nccl_group::make_unique_id();
  ASSERT_TRUE(good.has_value()) << good.error().to_string();
  std::string hex = good->to_hex();
  hex[5] = 'q';
  auto bad = nccl_unique_id::from_hex(hex);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), errc::parse_error);
  auto back = nccl_unique_id::from_hex(good->to_hex());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, *good);
}

// --- two or more GPUs: one thread per rank -----------------------------------

TEST(gpu_nccl, all_reduce_sums_over_every_gpu_with_the_same_bits_everywhere) {
  MSTAR_REQUIRE_GPUS(2);
  const int n = nccl_test_ranks();
  constexpr std::size_t count = 1'000'003;  // several NCCL chunks, not a round size
  std::vector<std::vector<float> > exact(static_cast<std::size_t>(n));
  std::vector<std::vector<float> > noisy(static_cast<std::size_t>(n));
  std::vector<std::vector<float> > inputs(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto rng = seeded(1810 + static_cast<std::uint64_t>(r));
    inputs[static_cast<std::size_t>(r)] = rng.floats(count);
  }
  on_every_gpu(n, 60s, [&](nccl_group& g) {
    const auto r = static_cast<std::size_t>(g.rank());
    // Small integers: the sum is exact in any order.
    std::vector<float> ints(count);
    for (std::size_t i = 0; i < count; ++i)
      ints[i] = static_cast<float>((r + 1) * (i % 13));
    auto d_ints = upload(ints);
    auto d_noisy = upload(inputs[r]);
    expect_device_ok();
    for (int step = 0; step < 3; ++step) {
      auto d = upload(ints);
      expect_device_ok();
      ASSERT_TRUE(g.all_reduce_sum(nccl_span(d)).has_value());
      if (step == 2)
        exact[r] = d.download();
    }
    ASSERT_TRUE(g.all_reduce_sum(nccl_span(d_noisy)).has_value());
    noisy[r] = d_noisy.download();
  });
  const double ranks_sum = n * (n + 1) / 2.0;
  for (std::size_t i = 0; i < count; i += 9973) {
    EXPECT_EQ(exact[0][i], static_cast<float>(ranks_sum * static_cast<double>(i % 13)))
        << "element " << i;
  }
  std::vector<float> ref(count);
  for (std::size_t i = 0; i < count; ++i) {
    double s = 0;
    for (const auto& in : inputs)
      s += in[i];
    ref[i] = static_cast<float>(s);
  }
  EXPECT_TRUE(within(noisy[0], ref, budget::f32_reduction));
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(bytes_of(exact[static_cast<std::size_t>(r)]), bytes_of(exact[0])) << "rank " << r;
    // Whatever order NCCL summed in, every rank got the same bits.
    EXPECT_EQ(bytes_of(noisy[static_cast<std::size_t>(r)]), bytes_of(noisy[0])) << "rank " << r;
  }
}

TEST(gpu_nccl, all_gather_puts_each_ranks_part_at_its_rank) {
  MSTAR_REQUIRE_GPUS(2);
  const int n = nccl_test_ranks();
  constexpr std::size_t part = 12'345;
  std::vector<std::vector<float> > out(static_cast<std::size_t>(n));
  on_every_gpu(n, 60s, [&](nccl_group& g) {
    std::vector<float> in(part);
    for (std::size_t i = 0; i < part; ++i)
      in[i] = static_cast<float>(g.rank() * 100'000) + static_cast<float>(i);
    auto d_in = upload(in);
    auto d_out = poisoned<float>(part * static_cast<std::size_t>(n));
    expect_device_ok();
    ASSERT_TRUE(g.all_gather(d_in.span(), nccl_span(d_out)).has_value());
    out[static_cast<std::size_t>(g.rank())] = d_out.download();
  });
  for (int r = 0; r < n; ++r) {
    const auto& o = out[static_cast<std::size_t>(r)];
    ASSERT_EQ(o.size(), part * static_cast<std::size_t>(n)) << "rank " << r;
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < part; i += 1111) {
        EXPECT_EQ(o[static_cast<std::size_t>(q) * part + i],
                  static_cast<float>(q * 100'000) + static_cast<float>(i))
            << "rank " << r << " part " << q << " element " << i;
      }
    }
  }
}

TEST(gpu_nccl, broadcast_from_rank_1_reaches_every_rank) {
  MSTAR_REQUIRE_GPUS(2);
  const int n = nccl_test_ranks();
  constexpr std::size_t bytes = 65'537;
  std::vector<std::vector<std::uint8_t> > got(static_cast<std::size_t>(n));
  on_every_gpu(n, 60s, [&](nccl_group& g) {
    std::vector<std::uint8_t> mine(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
      mine[i] = static_cast<std::uint8_t>(i * 3 + static_cast<std::size_t>(g.rank()) * 101);
    auto d = upload(mine);
    expect_device_ok();
    ASSERT_TRUE(g.broadcast(nccl_bytes(d), 1).has_value());
    got[static_cast<std::size_t>(g.rank())] = d.download();
  });
  std::vector<std::uint8_t> want(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    want[i] = static_cast<std::uint8_t>(i * 3 + 101);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(got[static_cast<std::size_t>(r)], want) << "rank " << r;
}

TEST(gpu_nccl, a_rank_that_aborts_fails_its_peers_within_their_timeout) {
  MSTAR_REQUIRE_GPUS(2);
  const int n = nccl_test_ranks();
  constexpr auto timeout = 3s;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::chrono::milliseconds> took(static_cast<std::size_t>(n));
  nccl_test_meeting worked(n);
  on_every_gpu(n, timeout, [&](nccl_group& g) {
    const auto r = static_cast<std::size_t>(g.rank());
    auto d = upload(std::vector<float>(1024, 1.0F));
    expect_device_ok();
    const bool ok = g.all_reduce_sum(nccl_span(d)).has_value();  // the group works first
    // Every rank's first collective finished before rank 0 leaves, so only
    // the second can meet the abort.
    ASSERT_TRUE(worked.arrive_and_wait(30s)) << "rank " << r << ": a peer never got this far";
    ASSERT_TRUE(ok) << "rank " << r;
    if (g.rank() == 0)
      g.abort("rank 0 hit an error of its own");
    const auto start = std::chrono::steady_clock::now();
    auto res = g.all_reduce_sum(nccl_span(d));
    took[r] = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    ASSERT_FALSE(res.has_value()) << "rank " << r;
    errors[r] = res.error().message();
    EXPECT_EQ(res.error().code(), errc::internal);
    // Broken for good: the next call fails with the same cause, at once.
    auto again = g.all_reduce_sum(nccl_span(d));
    ASSERT_FALSE(again.has_value());
    EXPECT_EQ(again.error(), res.error());
  });
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    std::cout << "[ abort    ] rank " << r << " after " << took[i].count() << " ms: " << errors[i]
              << '\n';
    // The timeout, plus what ncclCommAbort takes to stop the kernel.
    EXPECT_LT(took[i], timeout + 20s) << "rank " << r;
  }
  EXPECT_NE(errors[0].find("rank 0 hit an error of its own"), std::string::npos) << errors[0];
  if (n == 2 && errors[1].find("did not arrive") != std::string::npos) {
    EXPECT_NE(errors[1].find("rank 0 did not arrive within 3000 ms"), std::string::npos);
  }
}

// --- last, as the slowest to fail: groups that never form --------------------
// (NCCL's init is aborted at the deadline; how long the abort takes is NCCL's.)

TEST(gpu_nccl, a_group_whose_peer_never_joins_fails_create_within_the_timeout) {
  MSTAR_REQUIRE_GPU();
  auto id = nccl_group::make_unique_id();
  ASSERT_TRUE(id.has_value()) << id.error().to_string();
  const auto start = std::chrono::steady_clock::now();
  auto g = nccl_group::create(0, 2, *id, 0, 2s);  // rank 1 never comes
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code(), errc::internal);
  std::cout << "[ create   ] " << g.error().message() << " after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_NE(g.error().message().find("did not form within 2000 ms"), std::string::npos)
      << g.error().message();
  // The 2 s deadline, plus what ncclCommAbort takes to stop the init.
  EXPECT_LT(took, 30s);
  expect_device_ok();
}

TEST(gpu_nccl, an_all_zero_id_fails_create_instead_of_hanging) {
  MSTAR_REQUIRE_GPU();
  // Well-formed hex of nothing: no bootstrap root behind it. A group of two,
  // so that even a NCCL that needs no rendezvous for one rank cannot succeed.
  const auto start = std::chrono::steady_clock::now();
  auto g = nccl_group::create(0, 2, nccl_unique_id{}, 0, 3s);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(g.has_value());
  std::cout << "[ create   ] " << g.error().to_string() << " after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_LT(took, 60s);
}

#endif  // MSTAR_HAVE_NCCL

}  // namespace
}  // namespace mstar::test::gpu
