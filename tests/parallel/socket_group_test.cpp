// The socket group: the same collectives as the in-process group (the same
// bits for the sum), over TCP and Unix sockets, with ranks on threads; who
// may join; and every way a group breaks (calls out of step, an abort, a
// rank whose process dies, a rank that never calls), each bounded well under
// the timeout where a peer's end can be seen. Two tests fork a rank into a
// child process; they fork before starting any thread of their own.
#include "parallel/socket_group.hpp"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <future>
#include <gtest/gtest.h>
#include <poll.h>
#include <random>
#include <signal.h>
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "parallel/local_group.hpp"
#include "tests/parallel/group_support.hpp"

namespace mstar::parallel {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using ranks_t = std::vector<std::unique_ptr<communicator>>;

constexpr const char* sg_token = "a-launchers-random-token";

/// A fresh directory for Unix socket paths, removed with what is in it.
class sg_temp_dir {
 public:
  sg_temp_dir() {
    std::string pattern = "/tmp/mstar-sg-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr)
      path_ = pattern;
  }
  ~sg_temp_dir() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  sg_temp_dir(const sg_temp_dir&) = delete;
  sg_temp_dir& operator=(const sg_temp_dir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

socket_group_options sg_options(std::string address, int rank, int size,
                                std::chrono::milliseconds timeout = 5s) {
  socket_group_options o;
  o.address = std::move(address);
  o.rank = rank;
  o.size = size;
  o.token = sg_token;
  o.timeout = timeout;
  return o;
}

// Forms a group of n ranks on threads: rank 0 listens at `address`, then
// accepts on one thread while ranks 1..n-1 join on theirs.
ranks_t sg_form(const std::string& address, int n, std::chrono::milliseconds timeout = 5s) {
  auto listener = socket_group::listen(sg_options(address, 0, n, timeout));
  EXPECT_TRUE(listener.has_value()) << listener.error().message();
  if (!listener)
    return {};
  const std::string bound = listener->address();
  ranks_t ranks(static_cast<std::size_t>(n));
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto c =
          r == 0 ? listener->accept_all() : socket_group::join(sg_options(bound, r, n, timeout));
      if (c)
        ranks[static_cast<std::size_t>(r)] = std::move(*c);
      else
        errors[static_cast<std::size_t>(r)] = c.error().to_string();
    });
  }
  for (auto& t : threads)
    t.join();
  for (const auto& e : errors)
    EXPECT_EQ(e, "");
  return ranks;
}

// Random floats over many magnitudes, signs and a few negative zeros, so a
// sum in another order would differ in the last bits.
std::vector<std::vector<float>> sg_random_rows(int n, std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mantissa(-1.0F, 1.0F);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<std::vector<float>> rows(static_cast<std::size_t>(n), std::vector<float>(count));
  for (auto& row : rows) {
    for (auto& x : row)
      x = std::ldexp(mantissa(gen), exponent(gen));
    row[0] = -0.0F;
  }
  return rows;
}

/// (transport, ranks): every collective test runs over both transports.
struct sg_case {
  bool unix_socket;
  int ranks;
};

class socket_group_collectives : public ::testing::TestWithParam<sg_case> {
 protected:
  ranks_t form(std::chrono::milliseconds timeout = 5s) {
    const auto address = GetParam().unix_socket ? "unix:" + dir_.path() + "/group.sock"
                                                : std::string("tcp:127.0.0.1:0");
    return sg_form(address, GetParam().ranks, timeout);
  }
  sg_temp_dir dir_;
};

TEST_P(socket_group_collectives, all_reduce_sum_gives_the_in_process_groups_bits) {
  const int n = GetParam().ranks;
  constexpr unsigned seed = 20240611;
  const auto rows = sg_random_rows(n, 4099, seed);
  auto mine = rows;
  auto theirs = rows;
  auto ranks = form();
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(n));
  on_every_rank(ranks, [&mine](communicator& c) {
    ASSERT_TRUE(c.all_reduce_sum(mine[static_cast<std::size_t>(c.rank())]).has_value());
  });
  auto local = local_group::make(n);
  ASSERT_TRUE(local.has_value());
  on_every_rank(*local, [&theirs](communicator& c) {
    ASSERT_TRUE(c.all_reduce_sum(theirs[static_cast<std::size_t>(c.rank())]).has_value());
  });
  for (int r = 0; r < n; ++r) {
    const auto& a = mine[static_cast<std::size_t>(r)];
    const auto& b = theirs[static_cast<std::size_t>(r)];
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << "rank " << r << ", seed " << seed;
  }
  EXPECT_FALSE(std::signbit(mine[0][0])) << "0 + -0 + -0 is +0, as in the in-process group";
}

TEST_P(socket_group_collectives, all_gather_and_broadcast_from_a_non_zero_root) {
  const int n = GetParam().ranks;
  auto ranks = form();
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(n));
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n),
                                      std::vector<float>(2 * static_cast<std::size_t>(n), -1.0F));
  std::vector<std::vector<std::byte>> bytes(static_cast<std::size_t>(n), std::vector<std::byte>(5));
  on_every_rank(ranks, [&](communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    const std::vector<float> in{static_cast<float>(r), 10.0F + static_cast<float>(r)};
    ASSERT_TRUE(c.all_gather(in, out[r]).has_value());
    std::fill(bytes[r].begin(), bytes[r].end(), std::byte{static_cast<unsigned char>(r + 7)});
    ASSERT_TRUE(c.broadcast(bytes[r], c.size() - 1).has_value());
  });
  std::vector<float> want;
  for (int r = 0; r < n; ++r) {
    want.push_back(static_cast<float>(r));
    want.push_back(10.0F + static_cast<float>(r));
  }
  const std::vector<std::byte> root_bytes(5, std::byte{static_cast<unsigned char>(n - 1 + 7)});
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(out[static_cast<std::size_t>(r)], want) << "rank " << r;
    EXPECT_EQ(bytes[static_cast<std::size_t>(r)], root_bytes) << "rank " << r;
  }
}

TEST_P(socket_group_collectives, many_collectives_in_a_row_stay_in_step) {
  auto ranks = form();
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(GetParam().ranks));
  on_every_rank(ranks, [](communicator& c) {
    const auto n = static_cast<float>(c.size());
    for (int step = 0; step < 200; ++step) {
      std::vector<float> d{1.0F, static_cast<float>(step)};
      ASSERT_TRUE(c.all_reduce_sum(d).has_value()) << "step " << step;
      ASSERT_EQ(d, (std::vector<float>{n, n * static_cast<float>(step)})) << "step " << step;
      std::vector<std::byte> b(1, std::byte{static_cast<unsigned char>(c.rank())});
      const int root = step % c.size();
      ASSERT_TRUE(c.broadcast(b, root).has_value()) << "step " << step;
      ASSERT_EQ(b[0], std::byte{static_cast<unsigned char>(root)}) << "step " << step;
    }
  });
}

TEST_P(socket_group_collectives, megabytes_go_through_in_pieces) {
  const int n = GetParam().ranks;
  constexpr std::size_t count = 1 << 20;  // 4 MiB of floats a rank: many partial writes
  auto ranks = form();
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(n));
  std::vector<std::vector<float>> sums(static_cast<std::size_t>(n));
  std::vector<std::vector<float>> gathered(static_cast<std::size_t>(n));
  on_every_rank(ranks, [&](communicator& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    auto& d = sums[r];
    d.resize(count);
    for (std::size_t i = 0; i < count; ++i)
      d[i] = static_cast<float>((i + r) % 1024);
    ASSERT_TRUE(c.all_reduce_sum(d).has_value());
    const std::vector<float> in(count / 4, static_cast<float>(r));
    gathered[r].assign(in.size() * static_cast<std::size_t>(c.size()), -1.0F);
    ASSERT_TRUE(c.all_gather(in, gathered[r]).has_value());
  });
  for (std::size_t r = 0; r < sums.size(); ++r) {
    for (std::size_t i = 0; i < count; i += 4099) {
      float want = 0.0F;
      for (std::size_t q = 0; q < static_cast<std::size_t>(n); ++q)
        want += static_cast<float>((i + q) % 1024);
      ASSERT_EQ(sums[r][i], want) << "rank " << r << " element " << i;
    }
    for (std::size_t i = 0; i < gathered[r].size(); i += 997)
      ASSERT_EQ(gathered[r][i], static_cast<float>(i / (count / 4))) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(transports, socket_group_collectives,
                         ::testing::Values(sg_case{false, 2}, sg_case{false, 4}, sg_case{true, 2},
                                           sg_case{true, 4}),
                         [](const ::testing::TestParamInfo<sg_case>& p) {
                           return std::string(p.param.unix_socket ? "unix_" : "tcp_") +
                                  std::to_string(p.param.ranks) + "_ranks";
                         });

std::string sg_error_of(const result<std::unique_ptr<communicator>>& r) {
  return r ? std::string("no error") : r.error().to_string();
}

bool sg_has(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(socket_group, bad_options_are_refused_naming_the_field) {
  const auto field_of = [](socket_group_options o) { return sg_error_of(socket_group::join(o)); };
  EXPECT_TRUE(
      sg_has(field_of(sg_options("tcp:127.0.0.1:1", 0, 0)), "invalid_argument: socket group size"));
  EXPECT_TRUE(sg_has(field_of(sg_options("tcp:127.0.0.1:1", 2, 2)),
                     "socket group rank: 2 is not in [0, 2)"));
  EXPECT_TRUE(sg_has(field_of(sg_options("tcp:127.0.0.1:1", 1, 2, 0ms)), "socket group timeout"));
  EXPECT_TRUE(sg_has(field_of(sg_options("127.0.0.1:1", 1, 2)), "socket group address"));
  EXPECT_TRUE(sg_has(field_of(sg_options("tcp:example.org:1", 1, 2)), "names are not looked up"));
  EXPECT_TRUE(
      sg_has(field_of(sg_options("tcp:127.0.0.1:65536", 1, 2)), "not a number in [0, 65535]"));
  EXPECT_TRUE(sg_has(field_of(sg_options("tcp:127.0.0.1:0", 1, 2)), "only rank 0 may ask"));
  EXPECT_TRUE(sg_has(field_of(sg_options("unix:", 1, 2)), "names no path"));
  auto long_token = sg_options("tcp:127.0.0.1:1", 1, 2);
  long_token.token.assign(2000, 'x');
  EXPECT_TRUE(sg_has(field_of(long_token), "socket group token: 2000 bytes"));
  auto not_rank_0 = socket_group::listen(sg_options("tcp:127.0.0.1:0", 1, 2));
  ASSERT_FALSE(not_rank_0.has_value());
  EXPECT_TRUE(sg_has(not_rank_0.error().message(), "cannot listen; rank 0 does"));
}

TEST(socket_group, a_group_of_one_needs_nobody) {
  auto ranks = sg_form("tcp:127.0.0.1:0", 1);
  ASSERT_EQ(ranks.size(), 1U);
  std::vector<float> d{-0.0F, 2.0F};
  ASSERT_TRUE(ranks[0]->all_reduce_sum(d).has_value());
  EXPECT_EQ(d, (std::vector<float>{0.0F, 2.0F}));
}

TEST(socket_group, a_unix_socket_path_is_new_and_removed_once_the_group_forms) {
  const sg_temp_dir dir;
  const std::string path = dir.path() + "/group.sock";
  { std::ofstream squatter(dir.path() + "/taken"); }
  auto taken = socket_group::listen(sg_options("unix:" + dir.path() + "/taken", 0, 2));
  ASSERT_FALSE(taken.has_value());
  EXPECT_EQ(taken.error().code(), errc::io_error);
  EXPECT_TRUE(sg_has(taken.error().message(), "cannot bind at unix:" + dir.path() + "/taken"))
      << taken.error().message();
  auto ranks = sg_form("unix:" + path, 2);
  ASSERT_EQ(ranks.size(), 2U);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(socket_group, strangers_are_refused_and_the_real_ranks_still_form) {
  auto listener = socket_group::listen(sg_options("tcp:127.0.0.1:0", 0, 3));
  ASSERT_TRUE(listener.has_value()) << listener.error().message();
  const std::string address = listener->address();
  EXPECT_TRUE(sg_has(address, "tcp:127.0.0.1:")) << address;
  EXPECT_FALSE(address.ends_with(":0")) << address;
  auto accepting = std::async(std::launch::async, [&listener] { return listener->accept_all(); });

  auto wrong_token = sg_options(address, 1, 3);
  wrong_token.token = "a guess";
  auto stranger = socket_group::join(wrong_token);
  ASSERT_FALSE(stranger.has_value());
  EXPECT_EQ(stranger.error().code(), errc::invalid_argument);
  EXPECT_TRUE(sg_has(stranger.error().message(), "rank 0 refused it: its token does not match"))
      << stranger.error().message();
  const auto wrong_size = sg_error_of(socket_group::join(sg_options(address, 1, 4)));
  EXPECT_TRUE(sg_has(wrong_size, "group size 4 does not match rank 0's 3")) << wrong_size;

  // Two claim rank 1: the second to arrive is refused while rank 0 still
  // waits for rank 2, which joins only then.
  auto first =
      std::async(std::launch::async, [&] { return socket_group::join(sg_options(address, 1, 3)); });
  auto second =
      std::async(std::launch::async, [&] { return socket_group::join(sg_options(address, 1, 3)); });
  const auto until = clock_type::now() + 5s;
  while (first.wait_for(5ms) != std::future_status::ready &&
         second.wait_for(5ms) != std::future_status::ready && clock_type::now() < until) {
  }
  auto rank2 =
      std::async(std::launch::async, [&] { return socket_group::join(sg_options(address, 2, 3)); });
  auto a = first.get();
  auto b = second.get();
  ASSERT_NE(a.has_value(), b.has_value()) << sg_error_of(a) << " / " << sg_error_of(b);
  EXPECT_TRUE(sg_has(a ? sg_error_of(b) : sg_error_of(a), "rank 1 already joined"))
      << sg_error_of(a) << " / " << sg_error_of(b);

  ranks_t ranks(3);
  auto zero = accepting.get();
  ASSERT_TRUE(zero.has_value()) << zero.error().message();
  ranks[0] = std::move(*zero);
  ranks[1] = a ? std::move(*a) : std::move(*b);
  auto two = rank2.get();
  ASSERT_TRUE(two.has_value()) << two.error().message();
  ranks[2] = std::move(*two);
  on_every_rank(ranks, [](communicator& c) {
    std::vector<float> d{static_cast<float>(c.rank())};
    ASSERT_TRUE(c.all_reduce_sum(d).has_value());
    EXPECT_EQ(d[0], 3.0F);
  });
}

TEST(socket_group, rank_0_gives_up_on_a_rank_that_never_joins) {
  auto listener = socket_group::listen(sg_options("tcp:127.0.0.1:0", 0, 2, 200ms));
  ASSERT_TRUE(listener.has_value()) << listener.error().message();
  const auto start = clock_type::now();
  auto zero = listener->accept_all();
  EXPECT_LT(clock_type::now() - start, 3s);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().message(),
            "tensor parallel join on rank 0: rank 1 did not arrive within 200 ms");
  // The port is closed now: nobody may join a group that gave up.
  EXPECT_TRUE(sg_has(sg_error_of(socket_group::join(sg_options(listener->address(), 1, 2, 100ms))),
                     "nobody accepted"));
}

TEST(socket_group, ranks_out_of_step_all_get_an_error_naming_both_calls) {
  auto ranks = sg_form("tcp:127.0.0.1:0", 3);
  ASSERT_EQ(ranks.size(), 3U);
  std::vector<std::string> errors(3);
  on_every_rank(ranks, [&errors](communicator& c) {
    std::vector<float> d(c.rank() == 2 ? 5 : 4, 1.0F);
    auto ok = c.all_reduce_sum(d);
    ASSERT_FALSE(ok.has_value());
    EXPECT_EQ(ok.error().code(), errc::internal);
    errors[static_cast<std::size_t>(c.rank())] = ok.error().message();
  });
  for (const auto& e : errors) {
    EXPECT_EQ(e,
              "tensor parallel group out of step: rank 0 called all_reduce_sum (count 4, root "
              "-1, call 1) while rank 2 called all_reduce_sum (count 5, root -1, call 1)");
  }
  // Broken for good: the next call fails with the same cause.
  std::vector<float> d(4);
  auto again = ranks[1]->all_reduce_sum(d);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().message(), errors[1]);
}

TEST(socket_group, different_collectives_are_named_on_every_rank) {
  const sg_temp_dir dir;
  auto ranks = sg_form("unix:" + dir.path() + "/group.sock", 2);
  ASSERT_EQ(ranks.size(), 2U);
  std::vector<std::string> errors(2);
  on_every_rank(ranks, [&errors](communicator& c) {
    std::vector<float> d(3, 1.0F), out(6);
    auto ok = c.rank() == 0 ? c.all_reduce_sum(d) : c.all_gather(d, out);
    ASSERT_FALSE(ok.has_value());
    errors[static_cast<std::size_t>(c.rank())] = ok.error().message();
  });
  for (const auto& e : errors)
    EXPECT_TRUE(sg_has(e, "rank 0 called all_reduce_sum (count 3") &&
                sg_has(e, "while rank 1 called all_gather (count 3"))
        << e;
}

// Runs rank `victim`'s `leave` on this thread while the other ranks wait in
// an all_reduce_sum; returns their errors and how long they took.
std::pair<std::vector<std::string>, clock_type::duration> sg_leave_during_a_call(
    ranks_t& ranks, int victim, const std::function<void(ranks_t&)>& leave) {
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  const auto start = clock_type::now();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (static_cast<int>(r) == victim)
      continue;
    communicator* c = ranks[r].get();
    threads.emplace_back([c, &errors, r] {
      std::vector<float> d{1.0F};
      auto ok = c->all_reduce_sum(d);
      errors[r] = ok ? "no error" : ok.error().message();
    });
  }
  leave(ranks);
  for (auto& t : threads)
    t.join();
  return {errors, clock_type::now() - start};
}

TEST(socket_group, an_abort_names_the_rank_and_its_reason_to_every_peer) {
  for (const int victim : {2, 0}) {  // a rank that rank 0 relays, then rank 0 itself
    auto ranks = sg_form("tcp:127.0.0.1:0", 3, 30s);
    ASSERT_EQ(ranks.size(), 3U);
    auto [errors, took] = sg_leave_during_a_call(ranks, victim, [victim](ranks_t& r) {
      r[static_cast<std::size_t>(victim)]->abort("its forward failed");
    });
    EXPECT_LT(took, 5s) << "far below the 30 s timeout";
    for (int r = 0; r < 3; ++r) {
      if (r == victim)
        continue;
      EXPECT_EQ(errors[static_cast<std::size_t>(r)],
                fmt::format("tensor parallel all_reduce_sum on rank {}: rank {} left the group "
                            "(its forward failed)",
                            r, victim));
    }
    std::vector<float> d{1.0F};
    auto own = ranks[static_cast<std::size_t>(victim)]->all_reduce_sum(d);
    ASSERT_FALSE(own.has_value());
    EXPECT_TRUE(sg_has(own.error().message(), "left the group (its forward failed)"));
  }
}

TEST(socket_group, a_destroyed_communicator_is_a_rank_that_left) {
  auto ranks = sg_form("tcp:127.0.0.1:0", 2, 30s);
  ASSERT_EQ(ranks.size(), 2U);
  auto [errors, took] = sg_leave_during_a_call(ranks, 1, [](ranks_t& r) { r[1].reset(); });
  EXPECT_LT(took, 5s);
  EXPECT_EQ(errors[0],
            "tensor parallel all_reduce_sum on rank 0: rank 1 left the group (its "
            "communicator was destroyed)");
}

TEST(socket_group, a_rank_that_never_calls_fails_the_others_after_the_timeout) {
  auto ranks = sg_form("tcp:127.0.0.1:0", 3, 300ms);
  ASSERT_EQ(ranks.size(), 3U);
  std::vector<std::string> errors(3);
  const auto start = clock_type::now();
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < 2; ++r) {  // rank 2 never calls
    communicator* c = ranks[r].get();
    threads.emplace_back([c, &errors, r] {
      std::vector<float> d{1.0F};
      auto ok = c->all_reduce_sum(d);
      errors[r] = ok ? "no error" : ok.error().to_string();
    });
  }
  for (auto& t : threads)
    t.join();
  const auto took = clock_type::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], fmt::format("internal: tensor parallel all_reduce_sum on rank {}: rank 2 "
                                     "did not arrive within 300 ms",
                                     r));
  }
  // The late rank reads the verdict rank 0 left for it.
  std::vector<float> d{1.0F};
  auto late = ranks[2]->all_reduce_sum(d);
  ASSERT_FALSE(late.has_value());
  EXPECT_TRUE(sg_has(late.error().message(), "rank 2 did not arrive within 300 ms"))
      << late.error().message();
}

TEST(socket_group, a_rank_0_that_never_calls_is_blamed_after_the_grace) {
  auto ranks = sg_form("tcp:127.0.0.1:0", 2, 200ms);
  ASSERT_EQ(ranks.size(), 2U);
  const auto start = clock_type::now();
  std::vector<float> d{1.0F};
  auto ok = ranks[1]->all_reduce_sum(d);
  const auto took = clock_type::now() - start;
  ASSERT_FALSE(ok.has_value());
  EXPECT_EQ(ok.error().message(),
            "tensor parallel all_reduce_sum on rank 1: rank 0 did not arrive within 200 ms");
  EXPECT_GE(took, 400ms);  // the timeout and the grace of as much again
  EXPECT_LT(took, 3s);
  // Rank 1 said goodbye: rank 0's next call fails at once, naming it.
  auto zero = ranks[0]->all_reduce_sum(d);
  ASSERT_FALSE(zero.has_value());
  EXPECT_TRUE(sg_has(zero.error().message(),
                     "rank 1 left the group (tensor parallel "
                     "all_reduce_sum on rank 1: rank 0 did not arrive"))
      << zero.error().message();
}

// Forks a child that runs `body` with a watchdog alarm and exits with its
// return value, skipping the parent's destructors and gtest's handlers.
template <class Body>
pid_t sg_fork(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    ::_exit(body());
  }
  return pid;
}

// The child's exit code, or -1 when it did not end within `timeout` (then
// it is killed and reaped).
int sg_wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto until = clock_type::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (clock_type::now() >= until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::poll(nullptr, 0, 5);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(socket_group, a_child_process_rank_that_exits_fails_rank_0_at_once) {
  auto listener = socket_group::listen(sg_options("tcp:127.0.0.1:0", 0, 2, 20s));
  ASSERT_TRUE(listener.has_value()) << listener.error().message();
  const std::string address = listener->address();
  const pid_t child = sg_fork([&address] {
    auto one = socket_group::join(sg_options(address, 1, 2, 20s));
    if (!one)
      return 2;
    std::vector<float> d{1.0F, 2.0F};
    if (!(*one)->all_reduce_sum(d) || d != std::vector<float>{11.0F, 22.0F})
      return 3;
    ::_exit(0);  // mid-group: no goodbye, the kernel closes the socket
  });
  ASSERT_GT(child, 0);
  auto zero = listener->accept_all();
  ASSERT_TRUE(zero.has_value()) << zero.error().message();
  std::vector<float> d{10.0F, 20.0F};
  ASSERT_TRUE((*zero)->all_reduce_sum(d).has_value());
  EXPECT_EQ(d, (std::vector<float>{11.0F, 22.0F}));
  const auto start = clock_type::now();
  auto after = (*zero)->all_reduce_sum(d);
  EXPECT_LT(clock_type::now() - start, 5s) << "far below the 20 s timeout";
  ASSERT_FALSE(after.has_value());
  EXPECT_EQ(after.error().message(),
            "tensor parallel all_reduce_sum on rank 0: rank 1 left the "
            "group (its connection closed)");
  EXPECT_EQ(sg_wait_exit(child, 5s), 0);
}

TEST(socket_group, a_child_process_rank_0_that_exits_fails_its_peer_at_once) {
  // The child accepts on the socket the parent bound; the parent only joins.
  auto listener = socket_group::listen(sg_options("tcp:127.0.0.1:0", 0, 2, 20s));
  ASSERT_TRUE(listener.has_value()) << listener.error().message();
  const std::string address = listener->address();
  const pid_t child = sg_fork([&listener] {
    auto zero = listener->accept_all();
    if (!zero)
      return 2;
    std::vector<float> d{1.0F};
    if (!(*zero)->all_reduce_sum(d) || d[0] != 3.0F)
      return 3;
    ::_exit(0);
  });
  ASSERT_GT(child, 0);
  { auto closed_here = std::move(*listener); }
  auto one = socket_group::join(sg_options(address, 1, 2, 20s));
  ASSERT_TRUE(one.has_value()) << one.error().message();
  std::vector<float> d{2.0F};
  ASSERT_TRUE((*one)->all_reduce_sum(d).has_value());
  EXPECT_EQ(d[0], 3.0F);
  const auto start = clock_type::now();
  auto after = (*one)->all_reduce_sum(d);
  EXPECT_LT(clock_type::now() - start, 5s) << "far below the 20 s timeout";
  ASSERT_FALSE(after.has_value());
  EXPECT_EQ(after.error().code(), errc::internal);
  EXPECT_TRUE(sg_has(after.error().message(),
                     "tensor parallel all_reduce_sum on rank 1: rank 0 left the group ("))
      << after.error().message();
  EXPECT_EQ(sg_wait_exit(child, 5s), 0);
}

}  // namespace
}  // namespace mstar::parallel
