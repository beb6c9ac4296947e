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
#include <functional>
#include <future>
#include <gtest/gtest.h>
#include <poll.h>
#include <random>
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "parallel/local_group.hpp"

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

void sg_on_every_rank(ranks_t& ranks, const std::function<void(communicator&)>& body) {
  std::vector<std::thread> threads;
  for (auto& r : ranks) {
    communicator* c = r.get();
    threads.emplace_back([c, &body] { body(*c); });
  }
  for (auto& t : threads)
    t.join();
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
  sg_on_every_rank(ranks, [&mine](communicator& c) {
    ASSERT_TRUE(c.all_reduce_sum(mine[static_cast<std::size_t>(c.rank())]).has_value());
  });
  auto local = local_group::make(n);
  ASSERT_TRUE(local.has_value());
  sg_on_every_rank(*local, [&theirs](communicator& c) {
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
  sg_on_every_rank(ranks, [&](communicator& c) {
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
  sg_on_every_rank(ranks, [](communicator& c) {
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
  constexpr std::size_t count = 3 << 19;  // 6 MiB of floats a rank: many partial writes
  auto ranks = form();
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(n));
  std::vector<std::vector<float>> sums(static_cast<std::size_t>(n));
  std::vector<std::vector<float>> gathered(static_cast<std::size_t>(n));
  sg_on_every_rank(ranks, [&](communicator& c) {
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

}  // namespace
}  // namespace mstar::parallel
