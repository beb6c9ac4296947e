#include "kernels/shm_arena.hpp"

#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "tests/support/matchers.hpp"

namespace mstar::kernels {
namespace {

// Unique per process and call: ctest runs test cases as parallel processes.
std::string unique_name(const std::string& what) {
  static int counter = 0;
  return "/mstar-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + what;
}

std::uint8_t pattern(std::size_t i, std::uint8_t salt) {
  return static_cast<std::uint8_t>((i * 31U + salt) & 0xFFU);
}

void fill(std::byte* data, std::size_t begin, std::size_t end, std::uint8_t salt) {
  for (std::size_t i = begin; i < end; ++i)
    data[i] = std::byte{pattern(i, salt)};
}

bool holds(const std::byte* data, std::size_t begin, std::size_t end, std::uint8_t salt) {
  for (std::size_t i = begin; i < end; ++i) {
    if (data[i] != std::byte{pattern(i, salt)})
      return false;
  }
  return true;
}

// Runs `child` in a forked process and returns its exit code (or 128 +
// signal). The child arms an alarm first, so this blocking wait is bounded.
template <class Child>
int run_in_child(Child child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(20);
    ::_exit(child());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(shm_arena, create_gives_zeroed_aligned_memory_of_the_requested_size) {
  const std::string name = unique_name("zeroed");
  auto arena = shm_arena::create(name, 10'000);
  ASSERT_TRUE(arena) << arena.error().to_string();
  EXPECT_EQ(arena->size(), 10'000U);
  EXPECT_EQ(arena->name(), name);
  EXPECT_TRUE(arena->owns_name());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(arena->data()) % 64, 0U);
  for (std::size_t i = 0; i < arena->size(); ++i)
    ASSERT_EQ(arena->data()[i], std::byte{0}) << i;
}

TEST(shm_arena, a_forked_process_opens_reads_and_writes_the_segment) {
  constexpr std::size_t bytes = 1 << 20;
  const std::string name = unique_name("fork");
  auto arena = shm_arena::create(name, bytes);
  ASSERT_TRUE(arena) << arena.error().to_string();
  fill(arena->data(), 0, bytes / 2, 7);

  const int code = run_in_child([&] {
    auto peer = shm_arena::open(name);
    if (!peer)
      return 2;
    if (peer->size() != bytes || peer->owns_name())
      return 3;
    if (!holds(peer->data(), 0, bytes / 2, 7))
      return 4;
    fill(peer->data(), bytes / 2, bytes, 9);
    return 0;
  });
  ASSERT_EQ(code, 0) << "2: open failed, 3: wrong size/owner, 4: parent's bytes not seen";
  EXPECT_TRUE(holds(arena->data(), bytes / 2, bytes, 9)) << "child's writes not visible";
  // The child's opener unmapped without removing the name.
  EXPECT_TRUE(shm_arena::open(name));
}

TEST(shm_arena, create_in_another_process_collides_with_an_existing_name) {
  const std::string name = unique_name("collide");
  auto arena = shm_arena::create(name, 4096);
  ASSERT_TRUE(arena);
  const int code = run_in_child([&] {
    auto again = shm_arena::create(name, 4096);
    if (again)
      return 5;
    const bool named = again.error().message().find(name) != std::string::npos &&
                       again.error().message().find("already exists") != std::string::npos;
    return named ? 0 : 6;
  });
  EXPECT_EQ(code, 0) << "5: second create succeeded, 6: error does not name the segment";
}

TEST(shm_arena, create_fails_naming_the_segment_when_it_exists) {
  const std::string name = unique_name("exists");
  auto first = shm_arena::create(name, 64);
  ASSERT_TRUE(first);
  auto second = shm_arena::create(name, 64);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), errc::invalid_argument);
  EXPECT_TRUE(test::contains(second.error().message(), name));
  // The failed create did not remove the existing segment.
  EXPECT_TRUE(shm_arena::open(name));
}

TEST(shm_arena, the_creator_removes_the_name_on_destruction_and_openers_do_not) {
  const std::string name = unique_name("cleanup");
  {
    auto creator = shm_arena::create(name, 128);
    ASSERT_TRUE(creator);
    { auto opener = shm_arena::open(name); }
    EXPECT_TRUE(shm_arena::open(name)) << "an opener removed the name";
  }
  auto gone = shm_arena::open(name);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code(), errc::not_found);
  EXPECT_FALSE(shm_arena::remove(name));
}

TEST(shm_arena, an_opener_keeps_its_mapping_after_the_creator_is_gone) {
  const std::string name = unique_name("outlive");
  auto creator = shm_arena::create(name, 256);
  ASSERT_TRUE(creator);
  fill(creator->data(), 0, 256, 3);
  auto opener = shm_arena::open(name);
  ASSERT_TRUE(opener);
  { auto dropped = std::move(creator).value(); }
  EXPECT_FALSE(shm_arena::open(name));
  EXPECT_TRUE(holds(opener->data(), 0, 256, 3));
}

TEST(shm_arena, moving_transfers_ownership_and_assignment_releases_the_old_segment) {
  const std::string a = unique_name("move-a");
  const std::string b = unique_name("move-b");
  auto first = shm_arena::create(a, 64);
  auto second = shm_arena::create(b, 64);
  ASSERT_TRUE(first && second);
  shm_arena moved = std::move(first).value();
  EXPECT_EQ(moved.name(), a);
  EXPECT_TRUE(shm_arena::open(a)) << "moving removed the name";
  moved = std::move(second).value();
  EXPECT_EQ(moved.name(), b);
  EXPECT_FALSE(shm_arena::open(a)) << "assignment kept the old segment";
  EXPECT_TRUE(shm_arena::open(b));
}

TEST(shm_arena, remove_unlinks_a_name_and_reports_whether_it_existed) {
  const std::string name = unique_name("remove");
  auto arena = shm_arena::create(name, 64);
  ASSERT_TRUE(arena);
  EXPECT_TRUE(shm_arena::remove(name));
  EXPECT_FALSE(shm_arena::open(name));
  EXPECT_FALSE(shm_arena::remove(name));
  arena->data()[0] = std::byte{1};  // the mapping itself is still valid
}

TEST(shm_arena, names_without_a_leading_slash_are_canonicalised) {
  const std::string name = unique_name("slash");
  auto arena = shm_arena::create(name.substr(1), 64);
  ASSERT_TRUE(arena) << arena.error().to_string();
  EXPECT_EQ(arena->name(), name);
  EXPECT_TRUE(shm_arena::open(name));
  EXPECT_TRUE(shm_arena::open(name.substr(1)));
}

TEST(shm_arena, invalid_names_and_sizes_are_rejected_with_the_rule) {
  for (const std::string& bad :
       std::vector<std::string>{"", "/", "a/b", "/..", "sp ace", std::string(201, 'x')}) {
    auto arena = shm_arena::create(bad, 64);
    ASSERT_FALSE(arena) << "'" << bad << "'";
    EXPECT_EQ(arena.error().code(), errc::invalid_argument);
    EXPECT_TRUE(test::contains(arena.error().message(), "shm segment name"));
    EXPECT_FALSE(shm_arena::open(bad));
  }
  auto empty = shm_arena::create(unique_name("empty"), 0);
  ASSERT_FALSE(empty);
  EXPECT_TRUE(test::contains(empty.error().message(), "bytes must be > 0"));
}

TEST(shm_arena, open_of_a_missing_segment_is_not_found) {
  auto missing = shm_arena::open(unique_name("missing"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
}

}  // namespace
}  // namespace mstar::kernels
