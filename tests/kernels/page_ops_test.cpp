#include "kernels/page_ops.hpp"

#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>
#include <vector>

#include "tests/kernels/random_tensors.hpp"

namespace mstar::kernels {
namespace {

// A small float arena: 6 pages x 3 layers x (K, V) x 4 slots x 2 heads x 3.
constexpr std::size_t pages = 6, layers = 3, page_size = 4, heads = 2, head_dim = 3;
constexpr std::size_t token_floats = heads * head_dim;
constexpr std::size_t page_floats = layers * 2 * page_size * token_floats;

kv_geometry geometry() {
  return {page_size, layers, heads, head_dim, mstar::dtype::float32};
}

// Index of element (head, dim) of one token, written out from the layout
// formula rather than from the kernel's helper.
std::size_t float_index(token_position t, std::size_t layer, kv_half half, std::size_t head,
                        std::size_t dim) {
  const std::size_t h = half == kv_half::key ? 0 : 1;
  return (((static_cast<std::size_t>(t.page) * layers + layer) * 2 + h) * page_size +
          static_cast<std::size_t>(t.offset)) *
             token_floats +
         head * head_dim + dim;
}

std::byte* bytes(std::vector<float>& v) {
  return reinterpret_cast<std::byte*>(v.data());
}
const std::byte* bytes(const std::vector<float>& v) {
  return reinterpret_cast<const std::byte*>(v.data());
}

std::vector<token_position> random_positions(test::random_tensors& rng, std::size_t n) {
  // Distinct positions so scatter's result does not depend on order.
  std::vector<token_position> all;
  for (std::int32_t p = 0; p < static_cast<std::int32_t>(pages); ++p) {
    for (std::int32_t o = 0; o < static_cast<std::int32_t>(page_size); ++o)
      all.push_back({p, o});
  }
  std::shuffle(all.begin(), all.end(), rng.engine());
  all.resize(n);
  return all;
}

TEST(page_ops, gather_tokens_matches_brute_force_indexing) {
  for (const std::uint64_t seed : {1U, 2U, 3U}) {
    test::random_tensors rng{seed};
    const auto arena = rng.floats(pages * page_floats);
    const auto tokens = random_positions(rng, 9);
    for (const std::size_t layer : {0U, 2U}) {
      for (const kv_half half : {kv_half::key, kv_half::value}) {
        auto out = test::poisoned(tokens.size() * token_floats);
        gather_tokens(bytes(arena), geometry(), layer, half, tokens, bytes(out));
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          for (std::size_t h = 0; h < heads; ++h) {
            for (std::size_t d = 0; d < head_dim; ++d) {
              ASSERT_EQ(out[(i * heads + h) * head_dim + d],
                        arena[float_index(tokens[i], layer, half, h, d)])
                  << "token " << i << " layer " << layer;
            }
          }
        }
      }
    }
  }
}

TEST(page_ops, scatter_tokens_writes_exactly_the_listed_positions) {
  for (const std::uint64_t seed : {4U, 5U}) {
    test::random_tensors rng{seed};
    auto arena = rng.floats(pages * page_floats);
    auto expected = arena;
    const auto tokens = random_positions(rng, 7);
    const auto in = rng.floats(tokens.size() * token_floats);
    scatter_tokens(bytes(arena), geometry(), 1, kv_half::value, tokens, bytes(in));
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      for (std::size_t h = 0; h < heads; ++h) {
        for (std::size_t d = 0; d < head_dim; ++d) {
          expected[float_index(tokens[i], 1, kv_half::value, h, d)] =
              in[(i * heads + h) * head_dim + d];
        }
      }
    }
    EXPECT_EQ(arena, expected);
  }
}

TEST(page_ops, scatter_then_gather_round_trips) {
  test::random_tensors rng{6};
  std::vector<float> arena(pages * page_floats, 0.0F);
  const auto tokens = random_positions(rng, 12);
  const auto in = rng.floats(tokens.size() * token_floats);
  scatter_tokens(bytes(arena), geometry(), 2, kv_half::key, tokens, bytes(in));
  auto out = test::poisoned(in.size());
  gather_tokens(bytes(arena), geometry(), 2, kv_half::key, tokens, bytes(out));
  EXPECT_EQ(out, in);
}

TEST(page_ops, pack_pages_lays_pages_out_in_list_order) {
  test::random_tensors rng{7};
  const auto arena = rng.floats(pages * page_floats);
  // Two runs of consecutive ids, a backwards step and a repeat.
  const std::vector<std::int32_t> list{3, 4, 5, 1, 0, 2, 3};
  auto staging = test::poisoned(list.size() * page_floats);
  pack_pages(bytes(arena), geometry(), list, bytes(staging));
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto* page = arena.data() + static_cast<std::size_t>(list[i]) * page_floats;
    EXPECT_TRUE(std::equal(page, page + page_floats,
                           staging.begin() + static_cast<std::ptrdiff_t>(i * page_floats)))
        << "staging page " << i;
  }
}

TEST(page_ops, unpack_pages_round_trips_into_another_arena_leaving_other_pages) {
  test::random_tensors rng{8};
  const auto source = rng.floats(pages * page_floats);
  const std::vector<std::int32_t> from{1, 2, 5};
  const std::vector<std::int32_t> to{4, 0, 1};
  std::vector<float> staging(from.size() * page_floats);
  pack_pages(bytes(source), geometry(), from, bytes(staging));

  const auto before = rng.floats(pages * page_floats);
  auto target = before;
  unpack_pages(bytes(target), geometry(), to, bytes(staging));
  for (std::size_t p = 0; p < pages; ++p) {
    const auto it = std::find(to.begin(), to.end(), static_cast<std::int32_t>(p));
    const auto& origin = it == to.end() ? before : source;
    const std::size_t origin_page =
        it == to.end() ? p
                       : static_cast<std::size_t>(from[static_cast<std::size_t>(it - to.begin())]);
    EXPECT_TRUE(std::equal(target.begin() + static_cast<std::ptrdiff_t>(p * page_floats),
                           target.begin() + static_cast<std::ptrdiff_t>((p + 1) * page_floats),
                           origin.begin() + static_cast<std::ptrdiff_t>(origin_page * page_floats)))
        << "page " << p;
  }
}

// Recurrent block [layers][slots][slot_floats].
constexpr std::size_t slots = 5, slot_floats = 4;

std::vector<float> slot_of(const std::vector<float>& block, std::size_t layer, std::size_t slot) {
  const auto begin =
      block.begin() + static_cast<std::ptrdiff_t>((layer * slots + slot) * slot_floats);
  return {begin, begin + static_cast<std::ptrdiff_t>(slot_floats)};
}

TEST(page_ops, copy_slot_copies_every_layer_and_nothing_else) {
  test::random_tensors rng{9};
  auto block = rng.floats(layers * slots * slot_floats);
  const auto before = block;
  copy_slot(bytes(block), layers, slots, slot_floats * sizeof(float), 1, 3);
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t s = 0; s < slots; ++s) {
      EXPECT_EQ(slot_of(block, l, s), slot_of(before, l, s == 3 ? 1 : s)) << l << "," << s;
    }
  }
  copy_slot(bytes(block), layers, slots, slot_floats * sizeof(float), 2, 2);
  EXPECT_EQ(slot_of(block, 0, 2), slot_of(before, 0, 2));
}

TEST(page_ops, zero_slot_zeroes_every_layer_and_nothing_else) {
  test::random_tensors rng{10};
  auto block = rng.floats(layers * slots * slot_floats, 1.0F, 2.0F);
  const auto before = block;
  zero_slot(bytes(block), layers, slots, slot_floats * sizeof(float), 4);
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t s = 0; s < slots; ++s) {
      EXPECT_EQ(slot_of(block, l, s),
                s == 4 ? std::vector<float>(slot_floats, 0.0F) : slot_of(before, l, s));
    }
  }
}

TEST(page_ops, pack_slot_and_unpack_slot_round_trip_between_slots) {
  test::random_tensors rng{11};
  auto block = rng.floats(layers * slots * slot_floats);
  const auto before = block;
  auto staging = test::poisoned(layers * slot_floats);
  pack_slot(bytes(block), layers, slots, slot_floats * sizeof(float), 2, bytes(staging));
  for (std::size_t l = 0; l < layers; ++l) {
    const std::vector<float> packed{
        staging.begin() + static_cast<std::ptrdiff_t>(l * slot_floats),
        staging.begin() + static_cast<std::ptrdiff_t>((l + 1) * slot_floats)};
    EXPECT_EQ(packed, slot_of(before, l, 2));
  }
  unpack_slot(bytes(block), layers, slots, slot_floats * sizeof(float), 0, bytes(staging));
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t s = 0; s < slots; ++s) {
      EXPECT_EQ(slot_of(block, l, s), slot_of(before, l, s == 0 ? 2 : s));
    }
  }
}

}  // namespace
}  // namespace mstar::kernels
