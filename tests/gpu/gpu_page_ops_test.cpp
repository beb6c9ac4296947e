// Device page and slot operations (kernels/cuda/page_ops.hpp) against the CPU
// reference (kernels/page_ops.hpp): the same random arena goes through both,
// and the whole arena and every output must match byte for byte. Geometries
// cover the 16-byte, 4-byte and 1-byte copy paths.
#include <algorithm>
#include <gtest/gtest.h>
#include <numeric>
#include <random>

#include "kernels/page_ops.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::bytes_of;
using test::gpu::poisoned;
using test::gpu::upload;

// token_bytes 256 (16-byte path), 12 (4-byte path), 6 (1-byte path): one
// bfloat16 head of token_bytes / 2 elements.
struct geometry {
  std::size_t token_bytes, page_size, num_layers, num_pages;
  [[nodiscard]] kv_geometry layout() const {
    return {static_cast<std::int32_t>(page_size), static_cast<std::int32_t>(num_layers), 1,
            static_cast<std::int32_t>(token_bytes / 2), mstar::dtype::bfloat16};
  }
};
constexpr geometry geometries[] = {{256, 16, 2, 64}, {12, 4, 3, 40}, {6, 3, 1, 33}};

std::vector<std::byte> random_bytes(test::random_tensors& rng, std::size_t n) {
  const auto values = rng.ints(n, 0, 255);
  std::vector<std::byte> out(n);
  std::transform(values.begin(), values.end(), out.begin(),
                 [](std::int32_t v) { return static_cast<std::byte>(v); });
  return out;
}

// `count` distinct page ids in [0, pages), shuffled.
std::vector<std::int32_t> distinct_pages(test::random_tensors& rng, std::size_t pages,
                                         std::size_t count) {
  std::vector<std::int32_t> all(pages);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng.engine());
  all.resize(count);
  return all;
}

// The arena on both sides: host copy for the CPU reference, device copy.
struct arenas {
  std::vector<std::byte> host;
  test::gpu::device_vector<std::byte> device;
};

arenas make_arenas(test::random_tensors& rng, const geometry& g) {
  arenas a;
  a.host = random_bytes(rng, g.num_pages * g.layout().page_bytes());
  a.device = upload(a.host);
  return a;
}

void expect_same(const arenas& a) {
  test::gpu::expect_device_ok();
  EXPECT_EQ(bytes_of(a.device.download()), bytes_of(a.host)) << "arenas differ";
}

TEST(gpu_page_ops, copy_pages_and_copy_slots_match_the_cpu_byte_for_byte) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(101);
  for (const auto& g : geometries) {
    auto a = make_arenas(rng, g);
    const auto ids = distinct_pages(rng, g.num_pages, 12);
    const std::vector<std::int32_t> src(ids.begin(), ids.begin() + 6);
    std::vector<std::int32_t> dst(ids.begin() + 6, ids.end());
    dst.push_back(ids[0]);  // a seventh destination without a source: ignored
    copy_pages(a.host.data(), g.layout(), src, dst);
    const auto d_src = upload(src);
    const auto d_dst = upload(dst);
    EXPECT_EQ(cuda::copy_pages(a.device.data(), g.layout(), d_src.span(), d_dst.span(), nullptr),
              cudaSuccess);
    for (const std::size_t slots : {std::size_t{0}, std::size_t{1}, g.page_size - 1, g.page_size}) {
      copy_slots(a.host.data(), g.layout(), ids[1], ids[2], slots);
      EXPECT_EQ(cuda::copy_slots(a.device.data(), g.layout(), ids[1], ids[2], slots, nullptr),
                cudaSuccess);
    }
    expect_same(a);
  }
}

TEST(gpu_page_ops, copy_pages_with_staging_handles_overlapping_lists) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(102);
  for (const auto& g : geometries) {
    auto a = make_arenas(rng, g);
    // A rotation: every destination is another entry's source.
    const std::vector<std::int32_t> src{3, 4, 5, 6};
    const std::vector<std::int32_t> dst{4, 5, 6, 3};
    copy_pages(a.host.data(), g.layout(), src, dst);
    const auto d_src = upload(src);
    const auto d_dst = upload(dst);
    auto staging = poisoned<std::byte>(src.size() * g.layout().page_bytes());
    EXPECT_EQ(cuda::copy_pages(a.device.data(), g.layout(), d_src.span(), d_dst.span(),
                               staging.data(), nullptr),
              cudaSuccess);
    expect_same(a);
  }
}

TEST(gpu_page_ops, zero_pages_zeroes_exactly_the_listed_pages) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(103);
  for (const auto& g : geometries) {
    auto a = make_arenas(rng, g);
    const auto pages = distinct_pages(rng, g.num_pages, 5);
    zero_pages(a.host.data(), g.layout(), pages);
    const auto d_pages = upload(pages);
    EXPECT_EQ(cuda::zero_pages(a.device.data(), g.layout(), d_pages.span(), nullptr), cudaSuccess);
    expect_same(a);
  }
}

TEST(gpu_page_ops, gather_and_scatter_tokens_match_with_later_duplicates_winning) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(104);
  for (const auto& g : geometries) {
    auto a = make_arenas(rng, g);
    std::vector<token_position> tokens;
    for (int i = 0; i < 37; ++i) {
      tokens.push_back({rng.ints(1, 0, static_cast<std::int32_t>(g.num_pages) - 1)[0],
                        rng.ints(1, 0, static_cast<std::int32_t>(g.page_size) - 1)[0]});
    }
    tokens.push_back(tokens[3]);  // listed twice: the later token must win
    tokens.push_back(tokens[10]);
    const std::size_t layer = g.num_layers - 1;
    const auto d_tokens = upload(tokens);
    const std::size_t n = tokens.size() * g.token_bytes;

    std::vector<std::byte> gathered(n);
    gather_tokens(a.host.data(), g.layout(), layer, kv_half::value, tokens, gathered.data());
    auto d_gathered = poisoned<std::byte>(n);
    EXPECT_EQ(cuda::gather_tokens(a.device.data(), g.layout(), layer, kv_half::value,
                                  d_tokens.span(), d_gathered.data(), nullptr),
              cudaSuccess);
    test::gpu::expect_device_ok();
    EXPECT_EQ(bytes_of(d_gathered.download()), bytes_of(gathered));

    const auto fresh = random_bytes(rng, n);
    scatter_tokens(a.host.data(), g.layout(), layer, kv_half::key, tokens, fresh.data());
    const auto d_fresh = upload(fresh);
    EXPECT_EQ(cuda::scatter_tokens(a.device.data(), g.layout(), layer, kv_half::key,
                                   d_tokens.span(), d_fresh.data(), nullptr),
              cudaSuccess);
    expect_same(a);
  }
}

TEST(gpu_page_ops, pack_then_unpack_pages_round_trips_runs_and_scattered_pages) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(105);
  for (const auto& g : geometries) {
    auto a = make_arenas(rng, g);
    std::vector<std::int32_t> pages{7, 8, 9, 2, 20, 21, 0};  // runs and singles
    const std::size_t n = pages.size() * g.layout().page_bytes();
    std::vector<std::byte> staging(n);
    pack_pages(a.host.data(), g.layout(), pages, staging.data());
    const auto d_pages = upload(pages);
    auto d_staging = poisoned<std::byte>(n);
    EXPECT_EQ(
        cuda::pack_pages(a.device.data(), g.layout(), d_pages.span(), d_staging.data(), nullptr),
        cudaSuccess);
    test::gpu::expect_device_ok();
    EXPECT_EQ(bytes_of(d_staging.download()), bytes_of(staging));

    const std::vector<std::int32_t> targets{30, 1, 11, 12, 13, 5, 25};
    const auto incoming = random_bytes(rng, n);
    unpack_pages(a.host.data(), g.layout(), targets, incoming.data());
    const auto d_targets = upload(targets);
    const auto d_incoming = upload(incoming);
    EXPECT_EQ(cuda::unpack_pages(a.device.data(), g.layout(), d_targets.span(), d_incoming.data(),
                                 nullptr),
              cudaSuccess);
    expect_same(a);
  }
}

TEST(gpu_page_ops, slot_copy_zero_pack_and_unpack_match_the_cpu) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(106);
  for (const std::size_t slot_bytes : {std::size_t{4096}, std::size_t{20}, std::size_t{7}}) {
    const std::size_t layers = 3;
    const std::size_t max_slots = 9;
    std::vector<std::byte> host = random_bytes(rng, layers * max_slots * slot_bytes);
    auto device = upload(host);
    copy_slot(host.data(), layers, max_slots, slot_bytes, 2, 5);
    EXPECT_EQ(cuda::copy_slot(device.data(), layers, max_slots, slot_bytes, 2, 5, nullptr),
              cudaSuccess);
    zero_slot(host.data(), layers, max_slots, slot_bytes, 7);
    EXPECT_EQ(cuda::zero_slot(device.data(), layers, max_slots, slot_bytes, 7, nullptr),
              cudaSuccess);
    std::vector<std::byte> packed(layers * slot_bytes);
    pack_slot(host.data(), layers, max_slots, slot_bytes, 5, packed.data());
    auto d_packed = poisoned<std::byte>(packed.size());
    EXPECT_EQ(
        cuda::pack_slot(device.data(), layers, max_slots, slot_bytes, 5, d_packed.data(), nullptr),
        cudaSuccess);
    test::gpu::expect_device_ok();
    EXPECT_EQ(bytes_of(d_packed.download()), bytes_of(packed));
    const auto incoming = random_bytes(rng, packed.size());
    unpack_slot(host.data(), layers, max_slots, slot_bytes, 0, incoming.data());
    const auto d_incoming = upload(incoming);
    EXPECT_EQ(cuda::unpack_slot(device.data(), layers, max_slots, slot_bytes, 0, d_incoming.data(),
                                nullptr),
              cudaSuccess);
    test::gpu::expect_device_ok();
    EXPECT_EQ(bytes_of(device.download()), bytes_of(host));
  }
}

}  // namespace
}  // namespace mstar::kernels
