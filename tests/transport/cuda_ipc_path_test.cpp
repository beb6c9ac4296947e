// The CUDA IPC fields of a descriptor survive JSON (and older descriptors
// without them still parse); the attach path is chosen from the descriptor
// and what this process has, and a device arena nothing here can reach is
// refused naming why. Host only: the copies themselves are GPU tests
// (tests/gpu/gpu_cuda_ipc_test.cpp).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "tests/support/matchers.hpp"
#include "tests/transport/support.hpp"
#include "transport/checksum.hpp"
#include "transport/descriptor.hpp"
#include "transport/internal/cuda_ipc.hpp"
#include "transport/path.hpp"
#include "transport/shm.hpp"

namespace mstar::transport {
namespace {

using mstar::test::contains;

arena_descriptor device_sample() {
  arena_descriptor d;
  d.owner = "prefill-0";
  d.worker_address = {0x01, 0xab, 0x00, 0xff};
  d.packed_key = {};
  d.base = 0x7f0000201000ULL;
  d.size = 8 * 65536;
  d.layout = arena_layout{arena_kind::kv_pages, "kv", 1, 8, 65536};
  d.memory = memory_kind::cuda;
  d.host = "boot/mnt:[1]";
  d.pid = 42;
  cuda_ipc_export ipc;
  ipc.handle.resize(cuda_ipc_handle_bytes);
  for (std::size_t i = 0; i < ipc.handle.size(); ++i)
    ipc.handle[i] = static_cast<std::uint8_t>(i * 7 + 1);
  ipc.offset = 4096;
  ipc.pci_bus_id = "0000:3b:00.0";
  d.cuda_ipc = ipc;
  return d;
}

TEST(cuda_ipc_descriptor, the_ipc_fields_survive_a_json_round_trip) {
  const auto d = device_sample();
  const auto text = to_json(d);
  EXPECT_TRUE(contains(text, "\"pci_bus_id\":\"0000:3b:00.0\""));
  auto back = descriptor_from_json(text);
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(*back, d);
  ASSERT_TRUE(back->cuda_ipc);
  EXPECT_EQ(back->cuda_ipc->offset, 4096U);
}

TEST(cuda_ipc_descriptor, a_descriptor_without_them_parses_as_before) {
  auto d = device_sample();
  d.cuda_ipc.reset();
  const auto text = to_json(d);
  EXPECT_FALSE(contains(text, "cuda_ipc"));
  auto back = descriptor_from_json(text);
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_FALSE(back->cuda_ipc);
  EXPECT_EQ(*back, d);
  // An explicit null is the same as absent.
  auto object = nlohmann::json::parse(text);
  object["cuda_ipc"] = nullptr;
  auto nulled = descriptor_from_json(object.dump());
  ASSERT_TRUE(nulled) << describe(nulled.error());
  EXPECT_FALSE(nulled->cuda_ipc);
}

TEST(cuda_ipc_descriptor, malformed_ipc_fields_are_refused_naming_the_field) {
  const auto refuses = [](const nlohmann::json& object, std::string_view part) {
    auto d = descriptor_from_json(object.dump());
    ASSERT_FALSE(d) << object.dump();
    EXPECT_TRUE(contains(describe(d.error()), part)) << describe(d.error());
  };
  const auto good = nlohmann::json::parse(to_json(device_sample()));
  auto short_handle = good;
  short_handle["cuda_ipc"]["handle"] = "0102";
  refuses(short_handle, "'cuda_ipc.handle' is not 64 bytes");
  auto bad_hex = good;
  bad_hex["cuda_ipc"]["handle"] = std::string(128, 'z');
  refuses(bad_hex, "'handle' is not hex");
  auto no_offset = good;
  no_offset["cuda_ipc"].erase("offset");
  refuses(no_offset, "'offset' is missing");
  auto no_bus = good;
  no_bus["cuda_ipc"]["pci_bus_id"] = "";
  refuses(no_bus, "'cuda_ipc.pci_bus_id' is empty");
  auto not_object = good;
  not_object["cuda_ipc"] = 7;
  refuses(not_object, "'cuda_ipc' is not an object");
  auto on_host = good;
  on_host["memory"] = "host";
  refuses(on_host, "'cuda_ipc' is set on a host arena");
}

path_inputs here(const arena_descriptor& d) {
  return {.host = d.host, .map_same_host = true, .ucx_moves_device = false, .cuda_built = true};
}

TEST(cuda_ipc_path, same_host_device_arena_with_a_handle_goes_over_cuda_ipc) {
  const auto d = device_sample();
  auto p = choose_attach_path(d, here(d));
  ASSERT_TRUE(p) << describe(p.error());
  EXPECT_EQ(*p, attach_path::cuda_ipc);
  // Even where UCX could move device memory: on one host IPC is direct.
  auto in = here(d);
  in.ucx_moves_device = true;
  EXPECT_EQ(choose_attach_path(d, in).value(), attach_path::cuda_ipc);
}

TEST(cuda_ipc_path, a_device_arena_nothing_can_reach_is_refused_saying_why) {
  const auto refused = [](const arena_descriptor& d, const path_inputs& in, std::string_view why) {
    auto p = choose_attach_path(d, in);
    ASSERT_FALSE(p) << "chose " << to_string(*p);
    EXPECT_TRUE(is(p.error(), mstar::errc::unsupported));
    const auto text = describe(p.error());
    EXPECT_TRUE(contains(text, "device arena 'kv' of 'prefill-0'")) << text;
    EXPECT_TRUE(contains(text, why)) << text;
  };
  const auto d = device_sample();
  auto other_host = here(d);
  other_host.host = "another-boot/mnt:[1]";
  refused(d, other_host, "on another host");
  auto no_handle = d;
  no_handle.cuda_ipc.reset();
  refused(no_handle, here(d), "carries no CUDA IPC handle");
  auto no_mapping = here(d);
  no_mapping.map_same_host = false;
  refused(d, no_mapping, "same-host mapping is turned off");
  auto no_cuda = here(d);
  no_cuda.cuda_built = false;
  refused(d, no_cuda, "a build without CUDA");
  // Each refusal also names the missing UCX transports, except the build's.
  refused(d, other_host, "UCX here has no CUDA transports");
}

TEST(cuda_ipc_path, with_ucx_cuda_transports_other_hosts_go_over_rma) {
  const auto d = device_sample();
  auto in = here(d);
  in.host = "another-boot/mnt:[1]";
  in.ucx_moves_device = true;
  EXPECT_EQ(choose_attach_path(d, in).value(), attach_path::rma);
}

TEST(cuda_ipc_path, host_arenas_keep_their_paths) {
  auto d = device_sample();
  d.memory = memory_kind::host;
  d.cuda_ipc.reset();
  d.shm_name = "/mstar.dep.42.kv";
  auto in = here(d);
  EXPECT_EQ(choose_attach_path(d, in).value(), attach_path::mapped_segment);
  in.map_same_host = false;
  EXPECT_EQ(choose_attach_path(d, in).value(), attach_path::rma);
  in.map_same_host = true;
  in.host = "elsewhere";
  EXPECT_EQ(choose_attach_path(d, in).value(), attach_path::rma);
  d.shm_name.clear();
  in.host = d.host;
  EXPECT_EQ(choose_attach_path(d, in).value(), attach_path::rma);
}

TEST(cuda_ipc_agent, attaching_a_same_host_device_arena_takes_the_ipc_path_or_says_why_not) {
  auto a = test::make_agent("decode-0", "tcp");
  ASSERT_NE(a, nullptr);
  auto d = device_sample();
  d.host = host_identity();
  d.pid = ::getppid();  // another live process of this host
  auto id = a->attach(d);
  if (internal::cuda_built()) {
    // Built with CUDA but (here) no device or a forged handle: the IPC path
    // is taken and the open fails with CUDA's error or a missing device,
    // never an RMA attach that would fail at transfer time.
    ASSERT_FALSE(id);
    const auto text = describe(id.error());
    EXPECT_TRUE(contains(text, "cudaIpcOpenMemHandle") || contains(text, "no device") ||
                contains(text, "cuda"))
        << text;
    // A process does not open its own handles.
    auto own = d;
    own.pid = ::getpid();
    auto self = a->attach(own);
    ASSERT_FALSE(self);
    EXPECT_TRUE(contains(describe(self.error()), "belongs to this process"))
        << describe(self.error());
  } else {
    ASSERT_FALSE(id);
    EXPECT_TRUE(is(id.error(), mstar::errc::unsupported));
    EXPECT_TRUE(contains(describe(id.error()), "a build without CUDA")) << describe(id.error());
  }
  // From another host, nothing here moves device memory (Debian's UCX).
  d.host = "another-boot/mnt:[1]";
  auto remote = a->attach(d);
  ASSERT_FALSE(remote);
  EXPECT_TRUE(contains(describe(remote.error()), "on another host")) << describe(remote.error());
}

TEST(cuda_ipc_agent, unknown_ids_are_not_found_and_detach_forgets) {
  // The owner outlives the attaching agent, whose endpoint closes first.
  auto owner = test::make_agent("prefill-0", "tcp");
  ASSERT_NE(owner, nullptr);
  ASSERT_TRUE(owner->start_progress_thread());
  auto a = test::make_agent("decode-0", "tcp");
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->path_of(0));
  EXPECT_FALSE(a->detach(0));
  std::vector<std::byte> memory(4 * 4096);
  auto local =
      owner->register_arena(memory.data(), arena_layout{arena_kind::kv_pages, "kv", 1, 4, 4096});
  ASSERT_TRUE(local) << describe(local.error());
  auto id = a->attach(owner->describe(*local).value());
  ASSERT_TRUE(id) << describe(id.error());
  EXPECT_EQ(a->path_of(*id).value(), attach_path::rma);
  ASSERT_TRUE(a->detach(*id));
  EXPECT_FALSE(a->path_of(*id));
  EXPECT_FALSE(a->detach(*id));
  EXPECT_EQ(internal::open_ipc_mappings(), 0U);
  a.reset();
}

TEST(cuda_ipc_agent, a_device_arena_nothing_can_export_or_register_is_refused) {
  auto a = test::make_agent("prefill-0", "tcp");
  ASSERT_NE(a, nullptr);
  // Host memory claimed as device memory: without CUDA nothing can export
  // it and UCX here cannot register it; with CUDA it is not device memory.
  std::vector<std::byte> memory(2 * 4096);
  auto id = a->register_arena(memory.data(), arena_layout{arena_kind::kv_pages, "kv", 1, 2, 4096},
                              {}, memory_kind::cuda);
  ASSERT_FALSE(id);
  const auto text = describe(id.error());
  EXPECT_TRUE(contains(text, "device arena 'kv'")) << text;
  if (!internal::cuda_built()) {
    EXPECT_TRUE(contains(text, "no CUDA transports")) << text;
  }
}

TEST(cuda_ipc_checksum, device_checksums_need_cuda_or_say_so) {
  if (internal::cuda_built())
    GTEST_SKIP() << "built with CUDA: the device checksums are GPU tests";
  const arena_layout layout{arena_kind::kv_pages, "kv", 1, 2, 64};
  const std::int32_t pages[] = {0, 1};
  std::vector<std::byte> memory(128);
  auto sums = checksum_pages_device(layout, memory.data(), pages);
  ASSERT_FALSE(sums);
  EXPECT_TRUE(is(sums.error(), mstar::errc::unsupported));
  EXPECT_TRUE(contains(describe(sums.error()), "no CUDA")) << describe(sums.error());
}

}  // namespace
}  // namespace mstar::transport
