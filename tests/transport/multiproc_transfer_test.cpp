// Two processes (forked before anything touches UCX): a few hundred MB of
// pattern-filled KV pages pulled over TCP and over shared memory and
// verified byte by byte and by checksum; a source killed mid-transfer gives
// an error well within the deadline; a same-host segment is mapped across
// processes.
#include <gtest/gtest.h>

#include "tests/transport/multiproc_roles.hpp"

namespace mstar::transport {
namespace {

using namespace std::chrono_literals;

test::transfer_spec spec_for(const std::string& tls) {
  test::transfer_spec spec;
  spec.options.ucx = test::ucx_for(tls);
  spec.options.detect_peer_failure = tls != "sm";
  return spec;
}

class two_processes : public ::testing::TestWithParam<std::string> {};

TEST_P(two_processes, pull_256_mib_of_pages_byte_exact_with_checksums) {
  const auto spec = spec_for(GetParam());
  test::channel to_parent, to_child;
  const pid_t child = test::spawn([&] { return test::serve_source(spec, to_parent, to_child); });
  ASSERT_GT(child, 0);
  const std::string failure = test::pull_and_verify(spec, to_parent, to_child, 60);
  EXPECT_EQ(failure, "");
  EXPECT_EQ(test::wait_exit(child, 20s), 0);
}

TEST_P(two_processes, a_source_killed_mid_transfer_fails_the_pull_well_within_its_deadline) {
  auto spec = spec_for(GetParam());
  test::channel to_parent, to_child;
  const pid_t child = test::spawn([&] { return test::serve_source(spec, to_parent, to_child); });
  ASSERT_GT(child, 0);
  spec.options.name = "destination";
  spec.options.transfers.max_inflight_ops = 2;  // keep most of it unissued when the kill lands
  auto b = agent::make(spec.options);
  ASSERT_TRUE(b) << describe(b.error());
  const auto layout = spec.layout();
  kernels::host_arena dst{layout.bytes()};
  auto local = (*b)->register_arena(dst.data(), layout);
  const auto text = to_parent.receive(30s);
  ASSERT_TRUE(local && text && to_parent.receive(30s));
  auto remote = (*b)->attach(*descriptor_from_json(*text));
  ASSERT_TRUE(remote) << describe(remote.error());
  auto plan = plan_pages(layout, layout, test::rotated_pairs(spec.pages), plan_options{1 << 20});
  // UCX 1.13's shared-memory transports cannot detect a dead peer: there the
  // deadline is what ends the pull, so keep it short (the whole pull takes
  // well under a second).
  const auto deadline = GetParam() == "tcp" ? 20s : 4s;
  const auto deadline_at = clock::now() + deadline;
  auto h = (*b)->start(direction::read, *plan, {{*local, *remote}}, deadline_at);
  ASSERT_TRUE(h);
  const auto give_up = clock::now() + 20s;
  while (h->bytes_done() == 0 && !h->finished() && clock::now() < give_up)
    (*b)->progress();
  ASSERT_GT(h->bytes_done(), 0U);
  ASSERT_LT(h->bytes_done(), h->total_bytes()) << "finished before the kill: make it bigger";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  const auto killed = clock::now();
  auto done = (*b)->wait(*h);
  const auto took = clock::now() - killed;
  ASSERT_FALSE(done) << "a pull from a killed process succeeded";
  // Cutting off what is in flight at the deadline takes a moment more.
  EXPECT_LT(clock::now(), deadline_at + 1s);
  if (GetParam() == "tcp") {
    EXPECT_TRUE(is(done.error(), errc::peer_failed)) << describe(done.error());
    EXPECT_LT(took, 5s) << "TCP reports a dead peer without waiting for the deadline";
  } else {
    EXPECT_TRUE(is(done.error(), errc::peer_failed) || is(done.error(), errc::timed_out))
        << describe(done.error());
  }
  std::printf("killed source: %s after %.3f s\n", describe(done.error()).c_str(),
              std::chrono::duration<double>(took).count());
  EXPECT_EQ(test::wait_exit(child, 5s), 128 + SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(transports, two_processes, ::testing::Values("tcp", "sm"),
                         [](const auto& param_info) { return param_info.param; });

TEST(two_processes_shm, a_source_in_a_segment_is_mapped_and_copied_across_processes) {
  auto spec = spec_for("tcp");
  spec.deployment = "mp" + std::to_string(::getpid());
  test::channel to_parent, to_child;
  const pid_t child = test::spawn([&] { return test::serve_source(spec, to_parent, to_child); });
  ASSERT_GT(child, 0);
  EXPECT_EQ(test::pull_and_verify(spec, to_parent, to_child, 60), "");
  EXPECT_EQ(test::wait_exit(child, 20s), 0);
  // The source exited cleanly: its segment is gone.
  EXPECT_TRUE(remove_stale_segments(spec.deployment)->empty());
}

}  // namespace
}  // namespace mstar::transport
