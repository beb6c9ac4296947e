// The tensor-core prefill path of paged attention (kernels/cuda/
// attention_prefill.cu: steps without the decode arrays on bf16 arenas,
// head_dim 64 / 128 / 256) against the CPU reference: long prompts, many
// rows mixed with short ones (1 .. 70 tokens, shorter than a query tile),
// rows resuming after a cached prefix, rows computing nothing, GQA groups
// 1 / 4 / 8 and 6 (a token's heads split over two query tiles), page sizes
// 16 and 64 (key tiles straddling pages, partial last pages). The budget is
// `budget::attention_bf16_q` (q and the softmax weights rounded to bf16).
// Every case runs on each prefill kernel (`attention_prefill`: mma.sync,
// and wgmma / wgmma_serial / wgmma_lean where they
// take the case: head_dim 64 / 128 on a compute 9.0 device; the others fall
// back to mma.sync and the log's "prefill" says so).
#include <gtest/gtest.h>
#include <random>
#include <string>

#include "tests/gpu/attention_harness.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test_attention::attn_case;
using test_attention::prefill_scope;
using test_attention::row_spec;
using test_attention::run_case;
using test_attention::takes_tensor_cores;

// `long_rows` rows of `long_len` fresh tokens, then `short_count` rows of 1 ..
// 70 fresh tokens after 0 .. 199 cached ones, shuffled.
std::vector<row_spec> mixed_rows(std::uint64_t seed, int long_rows, int long_len, int short_count) {
  std::mt19937_64 engine{seed};
  std::uniform_int_distribution<int> fresh{1, 70};
  std::uniform_int_distribution<int> cached{0, 199};
  std::vector<row_spec> rows;
  for (int i = 0; i < long_rows; ++i)
    rows.push_back({0, long_len});
  for (int i = 0; i < short_count; ++i)
    rows.push_back({cached(engine), fresh(engine)});
  std::shuffle(rows.begin(), rows.end(), engine);
  return rows;
}

// Rows resuming after cached prefixes (kv longer than qo): page-aligned and
// ragged prefixes, exactly one and just over one query tile, one token after
// a long prefix, a row computing nothing.
const std::vector<row_spec> resume_rows = {{500, 100}, {64, 64},   {1000, 1}, {37, 70},
                                           {16, 0},    {127, 129}, {5, 65}};

void run_all(const attn_case* cases, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(takes_tensor_cores(cases[i])) << cases[i].name;
    run_case(cases[i], seed + i);
  }
}

// The prefill kernel each test forces (its parameter).
class gpu_attention_prefill : public ::testing::TestWithParam<cuda::attention_prefill> {};

TEST_P(gpu_attention_prefill, one_long_prompt_matches_the_cpu) {
  MSTAR_REQUIRE_GPU();
  const prefill_scope kernel{GetParam()};
  using mstar::dtype;
  const attn_case cases[] = {
      {"1x2048 d128 group 4 ps16", 16, 2, 8, 128, dtype::bfloat16, {{0, 2048}}, false},
      {"1x2048 d256 group 8 ps64", 64, 1, 8, 256, dtype::bfloat16, {{0, 2048}}, false},
      {"1x2048 d64 group 1 ps16", 16, 2, 2, 64, dtype::bfloat16, {{0, 2048}}, false},
  };
  run_all(cases, std::size(cases), 600);
}

TEST_P(gpu_attention_prefill, long_rows_mixed_with_short_ones_match_the_cpu) {
  MSTAR_REQUIRE_GPU();
  const prefill_scope kernel{GetParam()};
  using mstar::dtype;
  const attn_case cases[] = {
      {"8x300 + 12 short d128 group 4 ps16", 16, 2, 8, 128, dtype::bfloat16,
       mixed_rows(1, 8, 300, 12), false},
      {"8x300 + 12 short d64 group 1 ps64", 64, 3, 3, 64, dtype::bfloat16,
       mixed_rows(2, 8, 300, 12), false},
      {"8x300 + 12 short d256 group 8 ps16", 16, 1, 8, 256, dtype::bfloat16,
       mixed_rows(3, 8, 300, 12), false},
      {"8x300 + 12 short d128 group 6 ps64", 64, 2, 12, 128, dtype::bfloat16,
       mixed_rows(4, 8, 300, 12), false},
      {"only short rows d128 group 8 ps16", 16, 2, 16, 128, dtype::bfloat16,
       mixed_rows(5, 0, 0, 20), false},
  };
  run_all(cases, std::size(cases), 620);
}

TEST_P(gpu_attention_prefill, rows_resuming_after_a_cached_prefix_match_the_cpu) {
  MSTAR_REQUIRE_GPU();
  const prefill_scope kernel{GetParam()};
  using mstar::dtype;
  const attn_case cases[] = {
      {"resume d64 group 4 ps16", 16, 2, 8, 64, dtype::bfloat16, resume_rows, false},
      {"resume d128 group 1 ps64", 64, 2, 2, 128, dtype::bfloat16, resume_rows, false},
      {"resume d256 group 8 ps16", 16, 1, 8, 256, dtype::bfloat16, resume_rows, false},
      {"resume d256 group 1 ps64", 64, 2, 2, 256, dtype::bfloat16, resume_rows, false},
      {"resume d128 group 6 ps16", 16, 1, 6, 128, dtype::bfloat16, resume_rows, false},
  };
  run_all(cases, std::size(cases), 640);
}

// wgmma_lean's other gathers: page sizes 8 and 32 / 256 (slot and place
// in the page by shift and mask; 256: a tile inside one page) and 48 (not
// a power of two: `wgmma` runs it, as paged_attention_prefill reports).
TEST(gpu_attention_prefill_lean, other_page_sizes_match_the_cpu) {
  MSTAR_REQUIRE_GPU();
  const prefill_scope kernel{cuda::attention_prefill::wgmma_lean};
  using mstar::dtype;
  const attn_case cases[] = {
      {"resume d128 group 4 ps8", 8, 2, 8, 128, dtype::bfloat16, resume_rows, false},
      {"resume d64 group 1 ps32", 32, 2, 2, 64, dtype::bfloat16, resume_rows, false},
      {"8x300 + 12 short d128 group 6 ps256", 256, 1, 6, 128, dtype::bfloat16,
       mixed_rows(7, 8, 300, 12), false},
      {"resume d128 group 2 ps48 (wgmma)", 48, 2, 4, 128, dtype::bfloat16, resume_rows, false},
  };
  run_all(cases, std::size(cases), 660);
}

INSTANTIATE_TEST_SUITE_P(kernels, gpu_attention_prefill,
                         ::testing::Values(cuda::attention_prefill::mma,
                                           cuda::attention_prefill::wgmma,
                                           cuda::attention_prefill::wgmma_serial,
                                           cuda::attention_prefill::wgmma_lean),
                         [](const ::testing::TestParamInfo<cuda::attention_prefill>& param_info) {
                           return std::string{cuda::to_string(param_info.param)};
                         });

}  // namespace
}  // namespace mstar::kernels
