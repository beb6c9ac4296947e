// Arena descriptors survive a JSON round trip; a malformed one is refused
// naming the field. Errors carry the project category and render by name.
#include "transport/descriptor.hpp"

#include <gtest/gtest.h>

#include "tests/support/matchers.hpp"

namespace mstar::transport {
namespace {

using mstar::test::contains;

arena_descriptor sample() {
  arena_descriptor d;
  d.owner = "prefill-0";
  d.worker_address = {0x01, 0xab, 0x00, 0xff};
  d.packed_key = {0x10, 0x20};
  d.base = 0x7f0000001000ULL;
  d.size = 8 * 4096;
  d.layout = arena_layout::recurrent("ssm", 2, 4, 4096);
  d.memory = memory_kind::host;
  d.host = "boot/mnt:[1]";
  d.shm_name = "/mstar.dep.42.ssm";
  d.pid = 42;
  return d;
}

TEST(arena_descriptor, survives_a_json_round_trip) {
  const auto d = sample();
  auto back = descriptor_from_json(to_json(d));
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(*back, d);
}

TEST(arena_descriptor, a_malformed_descriptor_is_refused_naming_the_field) {
  const auto refuses = [](std::string text, std::string_view part) {
    auto d = descriptor_from_json(text);
    ASSERT_FALSE(d);
    EXPECT_TRUE(contains(describe(d.error()), part));
  };
  refuses("[1,2]", "not a JSON object");
  refuses("{nope", "not valid JSON");
  auto text = to_json(sample());
  refuses(std::string{text}.replace(text.find("\"owner\""), 7, "\"ownr\""), "'owner' is missing");
  refuses(std::string{text}.replace(text.find("01ab00ff"), 8, "01ab00fz"),
          "'worker_address' is not hex");
  refuses(std::string{text}.replace(text.find("\"host\":\"boot"), 8, "\"host\":7,\"x\":\"boot"),
          "'host' has the wrong type");
  auto big = sample();
  big.size = 10;
  refuses(to_json(big), "'layout' describes more bytes");
  auto device = to_json(sample());
  refuses(device.replace(device.find("\"memory\":\"host\""), 15, "\"memory\":\"tpu\""),
          "'memory' is not 'host' or 'cuda'");
}

TEST(arena_layout, validate_names_zero_counts_and_overflow) {
  EXPECT_TRUE(arena_layout::recurrent("ssm", 2, 4, 8).validate());
  auto zero = arena_layout::recurrent("ssm", 0, 4, 8).validate();
  ASSERT_FALSE(zero);
  EXPECT_TRUE(contains(describe(zero.error()), "'ssm'"));
  auto huge = arena_layout::recurrent("ssm", 1ULL << 40, 1ULL << 20, 1ULL << 10).validate();
  ASSERT_FALSE(huge);
  EXPECT_TRUE(contains(describe(huge.error()), "overflows"));
  auto layered_kv = arena_layout{arena_kind::kv_pages, "kv", 2, 4, 8}.validate();
  EXPECT_FALSE(layered_kv);
  // 4096-byte pages: 16 slots of 64-byte tokens, 2 layers, K and V.
  const kernels::kv_geometry g{16, 2, 1, 16, mstar::dtype::float32};
  EXPECT_EQ(arena_layout::kv(g, 10).bytes(), 40960U);
}

TEST(transport_error, errors_carry_the_project_category_and_render_by_name) {
  const auto e = failure(errc::peer_failed, "endpoint to 'x' failed");
  EXPECT_EQ(e.category(), error_category);
  EXPECT_TRUE(is(e, errc::peer_failed));
  EXPECT_FALSE(is(e, errc::timed_out));
  EXPECT_EQ(describe(e), "peer_failed: endpoint to 'x' failed");
  const auto core = from_core(mstar::error{mstar::errc::not_found, "segment '/x'"});
  EXPECT_TRUE(is(core, mstar::errc::not_found));
  EXPECT_EQ(describe(core), "not_found: segment '/x'");
  EXPECT_TRUE(is(ucx_error(UCS_ERR_CONNECTION_RESET, "get"), errc::peer_failed));
  EXPECT_TRUE(is(ucx_error(UCS_ERR_CANCELED, "get"), errc::cancelled));
  EXPECT_TRUE(is(ucx_error(UCS_ERR_NO_MEMORY, "get"), errc::ucx_failure));
  EXPECT_TRUE(contains(describe(ucx_error(UCS_ERR_NO_MEMORY, "ucp_mem_map")), "ucp_mem_map: "));
  EXPECT_EQ(describe(caf::error{}), "no error");
}

}  // namespace
}  // namespace mstar::transport
