// Paged attention on the GPU (kernels/cuda/attention.hpp) against the CPU
// reference (kernels/attention.hpp): append_kv must leave the arena equal
// byte for byte (bf16 rounding included), and paged_attention must match by
// normalised error, over scrambled pages, cached prefixes, GQA group sizes
// that fill, split and pad the four-head chunks, every fast head_dim and
// two that take the generic kernel, prefill and decode, f32 and bf16 arenas;
// the split-KV decode path the same way, with its workspace poisoned too.
#include <gtest/gtest.h>
#include <random>

#include "kernels/attention.hpp"
#include "tests/gpu/attention_harness.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test_attention::attn_case;
using test_attention::poisoned;
using test_attention::row_spec;
using test_attention::run_case;

// Rows with cached prefixes, rows starting empty, a row that computes
// nothing, page-aligned and ragged lengths.
const std::vector<row_spec> prefill_rows = {{0, 37}, {20, 5}, {16, 0}, {3, 1}, {31, 33}, {0, 1}};

std::vector<row_spec> decode_rows(std::uint64_t seed, int count, int max_len) {
  std::mt19937_64 engine{seed};
  std::uniform_int_distribution<int> len{0, max_len - 1};
  std::vector<row_spec> rows;
  for (int i = 0; i < count; ++i)
    rows.push_back({len(engine), 1});
  return rows;
}

TEST(gpu_attention, prefill_matches_the_cpu_for_every_head_dim_and_group_size) {
  MSTAR_REQUIRE_GPU();
  using mstar::dtype;
  const attn_case cases[] = {
      {"d128 bf16 group 4", 16, 2, 8, 128, dtype::bfloat16, prefill_rows, false},
      {"d128 f32 group 4", 16, 2, 8, 128, dtype::float32, prefill_rows, false},
      {"d64 bf16 group 1", 8, 3, 3, 64, dtype::bfloat16, prefill_rows, false},
      {"d256 f32 group 2", 4, 1, 2, 256, dtype::float32, prefill_rows, false},
      {"d256 bf16 group 8", 16, 1, 8, 256, dtype::bfloat16, prefill_rows, false},
      {"d64 f32 group 3", 16, 2, 6, 64, dtype::float32, prefill_rows, false},
      {"d40 f32 generic", 16, 2, 4, 40, dtype::float32, prefill_rows, false},
      {"d96 bf16 generic", 5, 2, 6, 96, dtype::bfloat16, prefill_rows, false},
  };
  std::uint64_t seed = 400;
  for (const auto& c : cases)
    run_case(c, ++seed);
}

TEST(gpu_attention, decode_fast_path_matches_the_cpu_for_every_head_dim_and_group_size) {
  MSTAR_REQUIRE_GPU();
  using mstar::dtype;
  const attn_case cases[] = {
      {"d128 bf16 group 4", 16, 8, 32, 128, dtype::bfloat16, decode_rows(1, 19, 700), true},
      {"d128 bf16 group 8", 16, 4, 32, 128, dtype::bfloat16, decode_rows(2, 7, 300), true},
      {"d128 f32 group 1", 16, 4, 4, 128, dtype::float32, decode_rows(3, 9, 300), true},
      {"d64 bf16 group 3", 32, 2, 6, 64, dtype::bfloat16, decode_rows(4, 9, 300), true},
      {"d256 f32 group 2", 16, 2, 4, 256, dtype::float32, decode_rows(5, 9, 300), true},
      {"d80 bf16 generic", 16, 2, 8, 80, dtype::bfloat16, decode_rows(6, 9, 300), true},
  };
  std::uint64_t seed = 450;
  for (const auto& c : cases)
    run_case(c, ++seed);
}

// Decode rows for the split path: one token, exactly one page, exactly
// several pages, one past a page, then random lengths in [1, max_len].
std::vector<row_spec> split_rows(std::uint64_t seed, std::int32_t page_size, int random_count,
                                 int max_len) {
  std::vector<row_spec> rows = {{0, 1}, {page_size - 1, 1}, {4 * page_size - 1, 1}, {page_size, 1}};
  for (const auto& r : decode_rows(seed, random_count, max_len))
    rows.push_back(r);
  return rows;
}

TEST(gpu_attention, split_decode_matches_the_cpu_for_gqa_and_every_fast_head_dim) {
  MSTAR_REQUIRE_GPU();
  using mstar::dtype;
  const attn_case cases[] = {
      {"d128 bf16 12/4", 16, 4, 12, 128, dtype::bfloat16, split_rows(11, 16, 9, 2000), true},
      {"d128 f32 12/4", 16, 4, 12, 128, dtype::float32, split_rows(12, 16, 9, 2000), true},
      {"d64 bf16 12/4", 16, 4, 12, 64, dtype::bfloat16, split_rows(13, 16, 9, 2000), true},
      {"d64 f32 12/4", 32, 4, 12, 64, dtype::float32, split_rows(14, 32, 9, 2000), true},
      {"d128 bf16 32/8", 16, 8, 32, 128, dtype::bfloat16, split_rows(15, 16, 3, 3000), true},
      {"d256 f32 group 2", 16, 2, 4, 256, dtype::float32, split_rows(16, 16, 5, 1500), true},
      {"d256 bf16 group 1", 8, 3, 3, 256, dtype::bfloat16, split_rows(17, 8, 5, 1500), true},
      {"d64 bf16 group 8", 16, 1, 8, 64, dtype::bfloat16, split_rows(18, 16, 5, 1500), true},
  };
  std::uint64_t seed = 500;
  for (const auto& c : cases)
    run_case(c, ++seed, {true, 1, true});
}

TEST(gpu_attention, split_decode_of_one_long_row_uses_the_most_chunks) {
  MSTAR_REQUIRE_GPU();
  using mstar::dtype;
  // 5000 positions: more chunks than a warp has lanes, the last ones empty.
  const attn_case cases[] = {
      {"d128 bf16 12/4 one row", 16, 4, 12, 128, dtype::bfloat16, {{4999, 1}}, true},
      {"d64 f32 12/4 one row", 16, 4, 12, 64, dtype::float32, {{4999, 1}}, true},
  };
  std::uint64_t seed = 550;
  for (const auto& c : cases)
    run_case(c, ++seed, {true, 1, true});
}

TEST(gpu_attention, split_decode_with_less_workspace_uses_fewer_chunks) {
  MSTAR_REQUIRE_GPU();
  const attn_case c{
      "d128 bf16 12/4", 16, 4, 12, 128, mstar::dtype::bfloat16, split_rows(21, 16, 5, 3000), true};
  // A third of the workspace still splits; far too little runs one pass.
  run_case(c, 561, {true, 3, true});
  run_case(c, 562, {true, 1000000, true});
}

TEST(gpu_attention, split_overload_runs_one_pass_where_it_would_not_split) {
  MSTAR_REQUIRE_GPU();
  using mstar::dtype;
  // Prefill (no decode arrays), a generic head_dim, short rows.
  const attn_case cases[] = {
      {"prefill d128 bf16", 16, 2, 8, 128, dtype::bfloat16, prefill_rows, false},
      {"decode d80 generic", 16, 2, 8, 80, dtype::bfloat16, split_rows(31, 16, 5, 1500), true},
      {"decode short rows", 16, 4, 12, 128, dtype::float32, decode_rows(32, 9, 40), true},
  };
  std::uint64_t seed = 570;
  for (const auto& c : cases)
    run_case(c, ++seed, {true, 1, false});
}

TEST(gpu_attention, unsupported_arena_dtype_or_head_count_is_refused) {
  MSTAR_REQUIRE_GPU();
  auto d = poisoned<std::int32_t>(16);
  const kv_page_table table{d.span().first(2), d.span().first(2), {}, d.span().first(1), {}, {}};
  kv_arena_view arena{reinterpret_cast<std::byte*>(d.data()),
                      {16, 1, 2, 128, mstar::dtype::float16}};
  EXPECT_EQ(cuda::append_kv({arena, 0, table, nullptr, nullptr}, nullptr), cudaErrorInvalidValue);
  arena.geometry.dtype = mstar::dtype::float32;
  EXPECT_EQ(cuda::paged_attention({arena, 0, table, nullptr, nullptr, 3, 0.0F}, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::paged_attention({arena, 0, table, nullptr, nullptr, 3, 0.0F}, d.data(), d.bytes(),
                                  nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::paged_attention_workspace_bytes({arena, 0, table, nullptr, nullptr, 3, 0.0F}),
            0U);
}

}  // namespace
}  // namespace mstar::kernels
