// Device arenas moved between two processes over CUDA IPC (transport/,
// README "Device arenas"). A child process (this binary run again, so it
// starts CUDA afresh: a forked child of a process that has used CUDA may not
// use it) registers a device arena of random pages and sends its descriptor
// and page checksums over a pipe; the parent opens it, pulls the pages into
// its own device arena in a scattered order, and verifies them; then the
// recurrent slots of a block in the same allocation (opened once). One GPU is
// enough: CUDA IPC between processes on one device is allowed. A second
// case kills the child mid-transfer: the transfer fails with peer_failed and
// the mapping is closed, nothing left open.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/gpu/gpu_support.hpp"
#include "tests/support/self_child.hpp"
#include "transport/agent.hpp"
#include "transport/checksum.hpp"
#include "transport/internal/cuda_ipc.hpp"

// A namespace of its own: the GPU tests build as unity sources, and the
// using-directive below must not reach the files compiled after this one.
namespace mstar::transport::cuda_ipc_gpu_test {
namespace {

using namespace std::chrono_literals;

// The child's role comes in this variable: "<read fd>,<write fd>,<pages>,<page bytes>".
constexpr const char* child_env = "MSTAR_CUDA_IPC_CHILD";
constexpr std::uint64_t child_offset = 4096;  // the arena starts this far into its allocation
constexpr std::uint64_t seed = 0x1dc0ffee;

// Length-prefixed messages over one pipe end, with a deadline on reads.
bool send_message(int fd, const std::string& text) {
  const std::uint64_t size = text.size();
  std::string framed(reinterpret_cast<const char*>(&size), sizeof size);
  framed += text;
  return test::write_all(fd, framed);
}

std::optional<std::string> receive_message(int fd, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::uint64_t size = 0;
  if (!test::read_exact(fd, reinterpret_cast<char*>(&size), sizeof size, until))
    return std::nullopt;
  std::string text(size, '\0');
  if (!test::read_exact(fd, text.data(), size, until))
    return std::nullopt;
  return text;
}

agent_options agent_named(std::string name) {
  agent_options o;
  o.name = std::move(name);
  // The worker only publishes an address here: loopback TCP is enough.
  o.ucx.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  return o;
}

arena_layout pages_layout(std::uint64_t pages, std::uint64_t page_bytes) {
  return arena_layout{arena_kind::kv_pages, "kv", 1, pages, page_bytes};
}

// The child process (the test below) serving `pages` of `page_bytes`.
test::self_child start_child(std::uint64_t pages, std::uint64_t page_bytes) {
  return {child_env, std::to_string(pages) + "," + std::to_string(page_bytes),
          "DISABLED_gpu_cuda_ipc_child.serves_a_device_arena"};
}

std::vector<std::uint8_t> random_bytes(std::uint64_t n, std::uint64_t salt = 0) {
  std::mt19937_64 rng{seed + salt};
  std::vector<std::uint8_t> out(n);
  for (std::uint64_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t word = rng();
    std::memcpy(out.data() + i, &word, 8);
  }
  return out;
}

std::vector<std::int32_t> all_pages(std::uint64_t n) {
  std::vector<std::int32_t> ids(n);
  for (std::uint64_t i = 0; i < n; ++i)
    ids[i] = static_cast<std::int32_t>(i);
  return ids;
}

// The recurrent block the child also serves, in the same allocation right
// after its KV arena: 2 layers of 8 slots of 16 KiB.
arena_layout ssm_layout() {
  return arena_layout::recurrent("ssm", 2, 8, 16 << 10);
}
constexpr std::uint64_t ssm_salt = 1;

// What the child sent: its descriptors and their units' checksums.
struct offer {
  arena_descriptor descriptor;
  std::vector<unit_checksum> sums;
  arena_descriptor ssm;
  std::vector<unit_checksum> slot_sums;
};

std::optional<offer> receive_offer(const test::self_child& child) {
  auto text = receive_message(child.read_fd(), 120s);
  if (!text) {
    ADD_FAILURE() << "the child sent no descriptor within 120 s (see its output above)";
    return std::nullopt;
  }
  const auto message = nlohmann::json::parse(*text);
  if (message.contains("error")) {
    ADD_FAILURE() << "the child failed: " << message["error"].get<std::string>();
    return std::nullopt;
  }
  auto d = descriptor_from_json(message["descriptor"].get<std::string>());
  if (!d) {
    ADD_FAILURE() << describe(d.error());
    return std::nullopt;
  }
  auto ssm = descriptor_from_json(message["ssm_descriptor"].get<std::string>());
  if (!ssm) {
    ADD_FAILURE() << describe(ssm.error());
    return std::nullopt;
  }
  offer out{std::move(*d), {}, std::move(*ssm), {}};
  for (const auto& s : message["sums"])
    out.sums.push_back({s[0].get<std::int32_t>(), s[1].get<std::uint64_t>()});
  for (const auto& s : message["slot_sums"])
    out.slot_sums.push_back({s[0].get<std::int32_t>(), s[1].get<std::uint64_t>()});
  return out;
}

// Our own device arena of `pages`, poisoned, registered with `a`.
struct device_arena {
  void* memory = nullptr;
  local_arena_id id = 0;
  ~device_arena() {
    if (memory != nullptr)
      (void)cudaFree(memory);
  }
};

bool make_arena(agent& a, const arena_layout& layout, device_arena& out) {
  if (cudaMalloc(&out.memory, layout.bytes()) != cudaSuccess ||
      cudaMemset(out.memory, 0xff, layout.bytes()) != cudaSuccess) {
    ADD_FAILURE() << "cudaMalloc / cudaMemset of " << layout.bytes() << " bytes failed";
    return false;
  }
  auto id = a.register_arena(static_cast<std::byte*>(out.memory), layout, {}, memory_kind::cuda);
  if (!id) {
    ADD_FAILURE() << describe(id.error());
    return false;
  }
  out.id = *id;
  return true;
}

// The child's side: registers device memory at `base` as an arena of
// `layout` with `a` and describes it for the parent.
caf::expected<arena_descriptor> export_arena(agent& a, std::byte* base,
                                             const arena_layout& layout) {
  auto id = a.register_arena(base, layout, {}, memory_kind::cuda);
  if (!id)
    return id.error();
  return a.describe(*id);
}

// The child: registers a device arena of random pages (starting
// `child_offset` into its allocation, so the offset travels) and a recurrent
// block after it in the same allocation, sends their descriptors and
// checksums, and serves until the parent says "done".
TEST(DISABLED_gpu_cuda_ipc_child, serves_a_device_arena) {
  const char* role = std::getenv(child_env);
  if (role == nullptr)
    GTEST_SKIP() << "run by gpu_cuda_ipc tests as their child process only";
  int read_fd = -1;
  int write_fd = -1;
  unsigned long long pages = 0;
  unsigned long long page_bytes = 0;
  ASSERT_EQ(std::sscanf(role, "%d,%d,%llu,%llu", &read_fd, &write_fd, &pages, &page_bytes), 4);
  const auto fail = [&](const std::string& why) {
    (void)send_message(write_fd, nlohmann::json{{"error", why}}.dump());
    ADD_FAILURE() << why;
  };
  const auto layout = pages_layout(pages, page_bytes);
  const auto ssm = ssm_layout();
  void* allocation = nullptr;
  if (cudaMalloc(&allocation, child_offset + layout.bytes() + ssm.bytes()) != cudaSuccess)
    return fail("cudaMalloc in the child failed");
  auto* arena = static_cast<std::byte*>(allocation) + child_offset;
  auto* ssm_arena = arena + layout.bytes();
  const auto host = random_bytes(layout.bytes());
  const auto ssm_host = random_bytes(ssm.bytes(), ssm_salt);
  if (cudaMemcpy(arena, host.data(), host.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(ssm_arena, ssm_host.data(), ssm_host.size(), cudaMemcpyHostToDevice) !=
          cudaSuccess)
    return fail("cudaMemcpy in the child failed");
  {
    auto a = agent::make(agent_named("prefill-child"));
    if (!a)
      return fail(describe(a.error()));
    auto d = export_arena(**a, arena, layout);
    if (!d)
      return fail(describe(d.error()));
    auto ssm_d = export_arena(**a, ssm_arena, ssm);
    if (!ssm_d)
      return fail(describe(ssm_d.error()));
    const std::byte* ssm_bases[] = {ssm_arena};
    const auto slot_ids = all_pages(ssm.num_units);
    auto slot_sums = checksum_slots_device(std::span{&ssm, 1}, ssm_bases, slot_ids);
    if (!slot_sums)
      return fail(describe(slot_sums.error()));
    const auto ids = all_pages(pages);
    auto sums = checksum_pages_device(layout, arena, ids);
    if (!sums)
      return fail(describe(sums.error()));
    // The staged device checksums are the host ones.
    auto host_sums = checksum_pages(layout, reinterpret_cast<const std::byte*>(host.data()), ids);
    if (!host_sums || *host_sums != *sums)
      return fail("device checksums differ from the host checksums of the same bytes");
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : *sums)
      list.push_back({s.unit, s.xxh3});
    nlohmann::json slot_list = nlohmann::json::array();
    for (const auto& s : *slot_sums)
      slot_list.push_back({s.unit, s.xxh3});
    if (!send_message(write_fd, nlohmann::json{{"descriptor", to_json(*d)},
                                               {"sums", list},
                                               {"ssm_descriptor", to_json(*ssm_d)},
                                               {"slot_sums", slot_list}}
                                    .dump()))
      return fail("cannot write to the parent");
    auto reply = receive_message(read_fd, 300s);
    EXPECT_EQ(reply.value_or("(none)"), "done");
  }
  (void)cudaFree(allocation);
}

TEST(gpu_cuda_ipc, pulls_scattered_pages_from_another_process_and_verifies_them) {
  MSTAR_REQUIRE_GPU();
  constexpr std::uint64_t pages = 64;
  constexpr std::uint64_t page_bytes = 256 << 10;
  auto child = start_child(pages, page_bytes);
  ASSERT_GT(child.pid(), 0);
  auto got = receive_offer(child);
  ASSERT_TRUE(got);
  const auto& remote_d = got->descriptor;
  ASSERT_EQ(remote_d.memory, memory_kind::cuda);
  ASSERT_TRUE(remote_d.cuda_ipc);
  EXPECT_EQ(remote_d.cuda_ipc->offset, child_offset);
  EXPECT_EQ(remote_d.pid, child.pid());

  auto a = agent::make(agent_named("decode-parent"));
  ASSERT_TRUE(a) << describe(a.error());
  const auto layout = pages_layout(pages, page_bytes);
  device_arena mine;
  ASSERT_TRUE(make_arena(**a, layout, mine));
  auto remote = (*a)->attach(remote_d);
  ASSERT_TRUE(remote) << describe(remote.error());
  EXPECT_EQ((*a)->path_of(*remote).value(), attach_path::cuda_ipc);
  EXPECT_EQ(internal::open_ipc_mappings(), 1U);

  // Source page i lands on page (37 i + 11) mod 64: scattered, a permutation.
  std::vector<unit_pair> pairs;
  for (std::uint64_t i = 0; i < pages; ++i)
    pairs.push_back(
        {static_cast<std::int32_t>(i), static_cast<std::int32_t>((37 * i + 11) % pages)});
  auto plan = plan_pages(remote_d.layout, layout, pairs);
  ASSERT_TRUE(plan) << describe(plan.error());
  auto h = (*a)->start(direction::read, *plan, {{mine.id, *remote}}, clock::now() + 60s);
  ASSERT_TRUE(h) << describe(h.error());
  auto ok = (*a)->wait(*h);
  ASSERT_TRUE(ok) << describe(ok.error());
  EXPECT_EQ(h->bytes_done(), layout.bytes());
  const std::byte* bases[] = {static_cast<const std::byte*>(mine.memory)};
  auto verified = verify_units_device(*plan, bases, got->sums);
  EXPECT_TRUE(verified) << describe(verified.error());
  // Byte for byte too, against the child's random bytes.
  const auto want = random_bytes(layout.bytes());
  std::vector<std::uint8_t> landed(layout.bytes());
  ASSERT_EQ(cudaMemcpy(landed.data(), mine.memory, landed.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (const auto& p : pairs) {
    ASSERT_EQ(std::memcmp(landed.data() + p.dst * page_bytes, want.data() + p.src * page_bytes,
                          page_bytes),
              0)
        << "page " << p.dst << " does not hold source page " << p.src;
  }

  // A flipped byte is caught, naming the page.
  const auto bad_page = pairs[5].dst;
  ASSERT_EQ(cudaMemset(static_cast<std::byte*>(mine.memory) + bad_page * page_bytes + 100, 0x5a, 1),
            cudaSuccess);
  auto caught = verify_units_device(*plan, bases, got->sums);
  ASSERT_FALSE(caught);
  EXPECT_TRUE(is(caught.error(), errc::integrity));
  EXPECT_NE(describe(caught.error()).find("page " + std::to_string(bad_page)), std::string::npos)
      << describe(caught.error());

  // A push lands in the child: our copy of source page 0 over its page 1,
  // then pulled back into our page for source 1, which then checks as page 0.
  const std::int32_t ours_of_0 = pairs[0].dst;
  const std::int32_t ours_of_1 = pairs[1].dst;
  auto push = plan_pages(layout, remote_d.layout, std::vector<unit_pair>{{ours_of_0, 1}});
  ASSERT_TRUE(push);
  auto hp = (*a)->start(direction::write, *push, {{mine.id, *remote}}, clock::now() + 30s);
  ASSERT_TRUE(hp) << describe(hp.error());
  ASSERT_TRUE((*a)->wait(*hp));
  auto back = plan_pages(remote_d.layout, layout, std::vector<unit_pair>{{1, ours_of_1}});
  ASSERT_TRUE(back);
  auto hb = (*a)->start(direction::read, *back, {{mine.id, *remote}}, clock::now() + 30s);
  ASSERT_TRUE(hb) << describe(hb.error());
  ASSERT_TRUE((*a)->wait(*hb));
  const unit_checksum page0_as_1[] = {{1, got->sums[0].xxh3}};
  auto pushed = verify_units_device(*back, bases, page0_as_1);
  EXPECT_TRUE(pushed) << describe(pushed.error());

  // Recurrent slots from the block in the same allocation: opened once.
  EXPECT_EQ(got->ssm.cuda_ipc.value_or(cuda_ipc_export{}).offset, child_offset + layout.bytes());
  auto remote_ssm = (*a)->attach(got->ssm);
  ASSERT_TRUE(remote_ssm) << describe(remote_ssm.error());
  EXPECT_EQ(internal::open_ipc_mappings(), 1U) << "one allocation, opened once";
  const auto ssm = ssm_layout();
  device_arena my_ssm;
  ASSERT_TRUE(make_arena(**a, ssm, my_ssm));
  const std::vector<unit_pair> slot_pairs{{0, 5}, {3, 1}, {7, 7}, {6, 0}};
  auto slots = plan_slots(std::span{&got->ssm.layout, 1}, std::span{&ssm, 1}, slot_pairs);
  ASSERT_TRUE(slots) << describe(slots.error());
  auto hs = (*a)->start(direction::read, *slots, {{my_ssm.id, *remote_ssm}}, clock::now() + 30s);
  ASSERT_TRUE(hs) << describe(hs.error());
  auto slots_done = (*a)->wait(*hs);
  ASSERT_TRUE(slots_done) << describe(slots_done.error());
  const std::byte* ssm_bases[] = {static_cast<const std::byte*>(my_ssm.memory)};
  auto slots_ok = verify_units_device(*slots, ssm_bases, got->slot_sums);
  EXPECT_TRUE(slots_ok) << describe(slots_ok.error());

  ASSERT_TRUE((*a)->detach(*remote));
  EXPECT_EQ(internal::open_ipc_mappings(), 1U) << "the block still holds the allocation";
  ASSERT_TRUE((*a)->detach(*remote_ssm));
  EXPECT_EQ(internal::open_ipc_mappings(), 0U);
  ASSERT_TRUE(send_message(child.write_fd(), "done"));
  EXPECT_EQ(child.exit_code(60s).value_or(-1000), 0);
}

TEST(gpu_cuda_ipc, a_child_killed_mid_transfer_fails_it_and_leaves_nothing_open) {
  MSTAR_REQUIRE_GPU();
  constexpr std::uint64_t pages = 256;
  constexpr std::uint64_t page_bytes = 1 << 20;
  auto child = start_child(pages, page_bytes);
  ASSERT_GT(child.pid(), 0);
  auto got = receive_offer(child);
  ASSERT_TRUE(got);

  auto options = agent_named("decode-parent");
  // Small slices and window: the transfer takes many progress rounds.
  options.transfers.copy_slice_bytes = 1 << 20;
  options.transfers.max_inflight_bytes = 2 << 20;
  auto a = agent::make(options);
  ASSERT_TRUE(a) << describe(a.error());
  const auto layout = pages_layout(pages, page_bytes);
  device_arena mine;
  ASSERT_TRUE(make_arena(**a, layout, mine));
  auto remote = (*a)->attach(got->descriptor);
  ASSERT_TRUE(remote) << describe(remote.error());
  auto plan = plan_pages(got->descriptor.layout, layout, [&] {
    std::vector<unit_pair> pairs;
    for (std::uint64_t i = 0; i < pages; ++i)
      pairs.push_back({static_cast<std::int32_t>(i), static_cast<std::int32_t>(pages - 1 - i)});
    return pairs;
  }());
  ASSERT_TRUE(plan);
  auto h = (*a)->start(direction::read, *plan, {{mine.id, *remote}}, clock::now() + 60s);
  ASSERT_TRUE(h) << describe(h.error());
  // No progress thread: the transfer moves only here. One round queues the
  // first slice; then the owner vanishes.
  (void)(*a)->progress();
  EXPECT_LT(h->bytes_done(), layout.bytes());
  child.kill_now();
  EXPECT_EQ(child.exit_code(30s).value_or(0), -SIGKILL);
  auto result = (*a)->wait(*h);
  ASSERT_FALSE(result) << "the transfer finished although its owner was killed";
  EXPECT_TRUE(is(result.error(), errc::peer_failed)) << describe(result.error());
  EXPECT_LT(h->bytes_done(), layout.bytes());
  // Our own device is still usable, and the mapping closes on detach.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE((*a)->detach(*remote));
  EXPECT_EQ(internal::open_ipc_mappings(), 0U);
  // Attaching the dead owner's arena again is refused at once.
  auto again = (*a)->attach(got->descriptor);
  ASSERT_FALSE(again);
  EXPECT_TRUE(is(again.error(), errc::peer_failed)) << describe(again.error());
  EXPECT_EQ(internal::open_ipc_mappings(), 0U);
}

}  // namespace
}  // namespace mstar::transport::cuda_ipc_gpu_test
