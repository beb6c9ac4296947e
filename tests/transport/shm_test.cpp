// Segment names carry deployment and process; start-up cleanup removes the
// segments a dead process of the same deployment left, and nothing else.
#include "transport/shm.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/matchers.hpp"
#include "transport/agent.hpp"

namespace mstar::transport {
namespace {

using mstar::test::contains;

std::string deployment(const std::string& what) {
  return "shm" + what + std::to_string(::getpid());
}

bool exists(const std::string& name) {
  return std::filesystem::exists("/dev/shm" + name);
}

// A process that creates a segment and dies without cleaning up; returns
// the segment's name. The child arms an alarm, so the wait is bounded.
std::string left_by_a_dead_process(const std::string& dep) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);
    auto segment = create_segment(dep, "kv", 4096);
    char ok = segment ? 1 : 0;
    static_cast<void>(::write(fds[1], &ok, 1));
    ::_exit(0);  // no destructors: the segment stays behind
  }
  char ok = 0;
  EXPECT_EQ(::read(fds[0], &ok, 1), 1);
  ::close(fds[0]);
  ::close(fds[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(ok, 1);
  return *segment_name(dep, pid, "kv");
}

TEST(shm_segments, names_carry_deployment_process_and_arena) {
  auto name = segment_name("prod-a", 1234, "kv_0");
  ASSERT_TRUE(name);
  EXPECT_EQ(*name, "/mstar.prod-a.1234.kv_0");
  auto dotted = segment_name("prod.a", 1, "kv");
  ASSERT_FALSE(dotted);
  EXPECT_TRUE(contains(describe(dotted.error()), "deployment name 'prod.a'"));
  EXPECT_FALSE(segment_name("a", 1, ""));
  EXPECT_FALSE(segment_name(std::string(65, 'x'), 1, "kv"));
}

TEST(shm_segments, a_segment_is_removed_when_its_owner_is_destroyed) {
  std::string name;
  {
    auto segment = create_segment(deployment("own"), "kv", 8192);
    ASSERT_TRUE(segment) << describe(segment.error());
    name = segment->name();
    EXPECT_TRUE(exists(name));
    auto again = create_segment(deployment("own"), "kv", 8192);
    EXPECT_FALSE(again) << "two arenas of one process may not share a name";
  }
  EXPECT_FALSE(exists(name));
}

TEST(shm_segments, start_up_cleanup_removes_only_dead_processes_segments_of_its_deployment) {
  const auto dep = deployment("stale");
  const auto other = deployment("other");
  const std::string dead = left_by_a_dead_process(dep);
  const std::string dead_other = left_by_a_dead_process(other);
  auto live = create_segment(dep, "live", 4096);
  ASSERT_TRUE(live);
  ASSERT_TRUE(exists(dead));

  auto removed = remove_stale_segments(dep);
  ASSERT_TRUE(removed) << describe(removed.error());
  EXPECT_EQ(*removed, std::vector<std::string>{dead});
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(live->name())) << "a live process's segment stays";
  EXPECT_TRUE(exists(dead_other)) << "another deployment's segment stays";
  auto cleaned = remove_stale_segments(other);
  ASSERT_TRUE(cleaned);
  EXPECT_FALSE(exists(dead_other));
}

TEST(shm_segments, an_agent_of_a_deployment_cleans_its_dead_processes_segments_at_start_up) {
  const auto dep = deployment("agent");
  const std::string dead = left_by_a_dead_process(dep);
  ASSERT_TRUE(exists(dead));
  agent_options o;
  o.name = "starting";
  o.deployment = dep;
  o.ucx.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  auto a = agent::make(o);
  ASSERT_TRUE(a) << describe(a.error());
  EXPECT_FALSE(exists(dead));
  o.deployment = "bad.name";
  EXPECT_FALSE(agent::make(o));
}

TEST(shm_segments, opening_a_peers_segment_checks_name_and_size) {
  auto segment = create_segment(deployment("open"), "kv", 4096);
  ASSERT_TRUE(segment);
  arena_descriptor d;
  d.owner = "peer";
  d.shm_name = segment->name();
  d.size = 4096;
  auto mapped = open_segment(d);
  ASSERT_TRUE(mapped) << describe(mapped.error());
  segment->data()[10] = std::byte{42};
  EXPECT_EQ(mapped->data()[10], std::byte{42});
  d.size = 8192;
  EXPECT_FALSE(open_segment(d));
  d.shm_name = "/mstar.nobody.1.kv";
  auto missing = open_segment(d);
  ASSERT_FALSE(missing);
  EXPECT_TRUE(is(missing.error(), mstar::errc::not_found));
  d.shm_name.clear();
  EXPECT_FALSE(open_segment(d));
  EXPECT_FALSE(host_identity().empty());
}

}  // namespace
}  // namespace mstar::transport
