// Two "hosts": network namespaces joined by a veth pair, created and removed
// by the test. A source process in one and a destination process in the
// other move 256 MiB of pages over UCX's TCP transport on the veth, and the
// veth's byte counter shows the bytes crossed it. Skipped, with the reason,
// where namespaces cannot be created (no root, no CAP_NET_ADMIN, no `ip`).
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include "tests/support/subprocess.hpp"
#include "tests/transport/multiproc_roles.hpp"

namespace mstar::transport {
namespace {

using namespace std::chrono_literals;

std::string ip_binary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(path, X_OK) == 0)
      return path;
  }
  return {};
}

// Two namespaces and a veth pair between them; removed on destruction.
class netns_pair {
 public:
  netns_pair() {
    const auto id = std::to_string(::getpid() % 100000);
    ns_ = {"mstar-a-" + id, "mstar-b-" + id};
    veth_ = {"mva" + id, "mvb" + id};
    const auto subnet = "10.231." + std::to_string(::getpid() % 250) + ".";
    addr_ = {subnet + "1", subnet + "2"};
    ip_ = ip_binary();
    if (ip_.empty()) {
      skip_ = "no `ip` binary (iproute2) to create network namespaces";
      return;
    }
    if (auto err = ip({"netns", "add", ns_[0]}); !err.empty()) {
      skip_ = "cannot create a network namespace here: " + err;
      return;
    }
    created_ = 1;
    if (auto err = ip({"netns", "add", ns_[1]}); !err.empty()) {
      skip_ = "cannot create a second network namespace: " + err;
      return;
    }
    created_ = 2;
    if (auto err = ip({"link", "add", veth_[0], "type", "veth", "peer", "name", veth_[1]});
        !err.empty()) {
      skip_ = "cannot create a veth pair: " + err;
      return;
    }
    for (int k = 0; k < 2 && error_.empty(); ++k) {
      for (const std::vector<std::string>& step :
           {std::vector<std::string>{"link", "set", veth_[k], "netns", ns_[k]},
            {"-n", ns_[k], "addr", "add", addr_[k] + "/24", "dev", veth_[k]},
            {"-n", ns_[k], "link", "set", veth_[k], "up"},
            {"-n", ns_[k], "link", "set", "lo", "up"}}) {
        if (auto err = ip(step); !err.empty()) {
          error_ = "ip " + step[0] + " ...: " + err;
          break;
        }
      }
    }
  }
  netns_pair(const netns_pair&) = delete;
  netns_pair& operator=(const netns_pair&) = delete;
  ~netns_pair() {
    // Deleting a namespace destroys the veth end inside it, and with it the pair.
    for (int k = 0; k < created_; ++k)
      static_cast<void>(ip({"netns", "del", ns_[k]}));
  }

  const std::string& skip_reason() const { return skip_; }
  const std::string& setup_error() const { return error_; }
  const std::string& ns(int k) const { return ns_[k]; }
  const std::string& veth(int k) const { return veth_[k]; }

 private:
  std::string ip(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{ip_};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto out = mstar::test::run_process(argv, {}, 10s);
    return out.exit_code == 0 ? std::string{} : (out.err.empty() ? "failed" : out.err);
  }
  std::string ip_;
  std::array<std::string, 2> ns_, veth_, addr_;
  std::string skip_, error_;
  int created_ = 0;
};

// In a forked child, before UCX: joins namespace `ns` and, as `ip netns
// exec` does, mounts that namespace's sysfs in a private mount namespace so
// /sys/class/net lists its devices. Returns "" or what failed.
std::string enter_netns(const std::string& ns) {
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "open /run/netns/" + ns;
  const int joined = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (joined != 0)
    return "setns";
  if (::unshare(CLONE_NEWNS) != 0 || ::mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0)
    return "private mount namespace";
  ::umount2("/sys", MNT_DETACH);
  if (::mount(ns.c_str(), "/sys", "sysfs", 0, nullptr) != 0)
    return "mount sysfs";
  return {};
}

std::uint64_t rx_bytes(const std::string& dev) {
  std::ifstream in{"/sys/class/net/" + dev + "/statistics/rx_bytes"};
  std::uint64_t n = 0;
  in >> n;
  return n;
}

test::transfer_spec spec_on(const std::string& dev) {
  test::transfer_spec spec;
  spec.options.ucx.config = {{"TLS", "tcp"}, {"NET_DEVICES", dev}};
  spec.options.map_same_host_segments = false;
  return spec;
}

TEST(two_hosts, pages_move_over_tcp_between_two_network_namespaces_joined_by_a_veth) {
  netns_pair net;
  if (!net.skip_reason().empty())
    GTEST_SKIP() << net.skip_reason();
  ASSERT_EQ(net.setup_error(), "");
  test::channel to_dest, to_source;
  const pid_t source = test::spawn([&] {
    if (auto err = enter_netns(net.ns(0)); !err.empty())
      return std::fprintf(stderr, "source: %s\n", err.c_str()), 30;
    return test::serve_source(spec_on(net.veth(0)), to_dest, to_source);
  });
  const pid_t dest = test::spawn([&] {
    if (auto err = enter_netns(net.ns(1)); !err.empty())
      return std::fprintf(stderr, "destination: %s\n", err.c_str()), 30;
    const auto spec = spec_on(net.veth(1));
    const auto before = rx_bytes(net.veth(1));
    const auto failure = test::pull_and_verify(spec, to_dest, to_source, 60);
    if (!failure.empty())
      return std::fprintf(stderr, "destination: %s\n", failure.c_str()), 31;
    const auto crossed = rx_bytes(net.veth(1)) - before;
    if (crossed < spec.pages * spec.page_bytes)
      return std::fprintf(stderr, "only %llu bytes crossed the veth\n",
                          static_cast<unsigned long long>(crossed)),
             32;
    return 0;
  });
  ASSERT_GT(source, 0);
  ASSERT_GT(dest, 0);
  EXPECT_EQ(test::wait_exit(dest, 90s), 0) << "destination's exit code (stderr says why)";
  EXPECT_EQ(test::wait_exit(source, 30s), 0) << "source's exit code";
}

}  // namespace
}  // namespace mstar::transport
