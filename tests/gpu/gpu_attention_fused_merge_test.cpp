// The fused split merge (cuda::attention_merge::fused: each item's last
// split block merges the partials itself) against the block merge kernel
// on the same step: the output must be the same bits, for every split walk
// (mma, rows_mma, the register walk; `rows` falls back to the block merge),
// 1 to 16 decode rows of ragged lengths (a position, shorter than a chunk,
// page edges, long ones), GQA groups 1 / 4 / 8 and head_dim 64 / 128 / 256.
// The workspace is reused: three launches in a row, then a captured CUDA
// graph replayed twice, each on a re-poisoned output and partials, must
// give the same bits and leave the arrival counters at zero. The block
// merge runs twice, the second time with the mma walk's rows of one used
// chunk (1 and 5 positions, the short random ones) written by the split
// kernel itself (set_attention_single_direct, split_args::single_direct):
// the same bits as the merge kernel's and the fused merge's. The mma walk
// gathering its tiles with bulk copies (set_attention_mma_bulk) gives the
// bits of its 16-byte cp.async copies, one pass and over the same split
// chunks.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/runtime.hpp"
#include "tests/gpu/attention_harness.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::bytes_of;
using test::gpu::device_vector;
using test::gpu::poisoned;
using test::gpu::upload;
using test_attention::attn_case;
using test_attention::device_table;
using test_attention::owned_table;
using test_attention::row_spec;
using test_attention::variant_scope;

// `count` decode rows: max_len positions (so that even 3 rows are long
// enough on average for the tensor-core walks' 128-position chunks to split:
// the rule's by-length bound), one position, 5 (inside one chunk), 129, then
// random lengths in [1, max_len].
std::vector<row_spec> ragged_rows(std::uint64_t seed, int count, int max_len) {
  std::vector<row_spec> rows;
  const int fixed[] = {max_len, 1, 5, 129};
  std::mt19937_64 engine{seed};
  std::uniform_int_distribution<int> len{1, max_len};
  for (int i = 0; i < count; ++i)
    rows.push_back({(i < 4 ? fixed[i] : len(engine)) - 1, 1});
  return rows;
}

// The cases: groups 1 / 4 / 8, head_dim 64 / 128 / 256, 1 to 16 rows, bf16
// (and one f32 arena, which only the register walk takes). Every one
// splits on an H200 under the default rule.
std::vector<attn_case> fused_cases() {
  using mstar::dtype;
  return {
      {"d128 group 4 one row", 16, 8, 32, 128, dtype::bfloat16, {{2047, 1}}, true},
      {"d128 group 4 4 rows", 16, 8, 32, 128, dtype::bfloat16, ragged_rows(1, 4, 2048), true},
      {"d128 group 4 16 rows", 16, 8, 32, 128, dtype::bfloat16, ragged_rows(2, 16, 2048), true},
      {"d64 group 8 3 rows", 16, 2, 16, 64, dtype::bfloat16, ragged_rows(3, 3, 3000), true},
      {"d64 group 1 9 rows", 8, 4, 4, 64, dtype::bfloat16, ragged_rows(4, 9, 2000), true},
      {"d256 group 1 2 rows", 16, 4, 4, 256, dtype::bfloat16, ragged_rows(5, 2, 2500), true},
      {"d256 group 8 5 rows", 16, 1, 8, 256, dtype::bfloat16, ragged_rows(6, 5, 2000), true},
      {"d128 group 8 12 rows", 16, 2, 16, 128, dtype::bfloat16, ragged_rows(7, 12, 1500), true},
      {"d128 f32 group 4 6 rows", 16, 2, 8, 128, dtype::float32, ragged_rows(8, 6, 2000), true},
  };
}

// A case's step on the device: random pages (every slot valid), its table,
// q, an output and a split workspace whose counters start at zero.
struct device_step {
  device_vector<std::byte> arena;
  std::unique_ptr<device_table> table;
  device_vector<float> q, out, workspace;
  paged_attention_params params{};
  std::size_t workspace_bytes = 0;

  device_step(const attn_case& c, std::uint64_t seed) {
    auto rng = test::gpu::seeded(seed);
    std::int32_t pages = 0;
    for (const auto& r : c.rows)
      pages += (r.cached + r.fresh + c.page_size - 1) / c.page_size;
    pages += 3;
    const owned_table t = test_attention::make_table(c, pages, rng.engine());
    const std::size_t elems =
        static_cast<std::size_t>(pages) * 2 * c.page_size * c.kv_heads * c.head_dim;
    const auto fill = rng.floats(elems, -2.0F, 2.0F);
    std::vector<std::byte> host(elems * size_of(c.dtype));
    if (c.dtype == mstar::dtype::float32) {
      std::memcpy(host.data(), fill.data(), host.size());
    } else {
      for (std::size_t i = 0; i < elems; ++i) {
        const std::uint16_t h = float_to_bf16_bits(fill[i]);
        std::memcpy(host.data() + 2 * i, &h, 2);
      }
    }
    arena = upload(host);
    table = std::make_unique<device_table>(t);
    const std::size_t q_elems = c.rows.size() * static_cast<std::size_t>(c.q_heads) * c.head_dim;
    q = upload(rng.floats(q_elems, -2.0F, 2.0F));
    out = poisoned<float>(q_elems);
    const kv_arena_view view{arena.data(), {c.page_size, 1, c.kv_heads, c.head_dim, c.dtype}};
    params = {view, 0, table->view(), q.data(), out.data(), c.q_heads, 0.0F};
    workspace_bytes = cuda::paged_attention_workspace_bytes(params);
    workspace = poisoned<float>(std::max<std::size_t>(workspace_bytes / sizeof(float), 1));
    EXPECT_EQ(cuda::clear_paged_attention_workspace(workspace.data(), workspace.bytes(), nullptr),
              cudaSuccess);
  }

  // NaN in the output and the partials (not the counters), as a later
  // launch on the same workspace finds them.
  void poison(cudaStream_t stream) const {
    EXPECT_EQ(cudaMemsetAsync(out.data(), 0xff, out.bytes(), stream), cudaSuccess);
    auto* partials =
        reinterpret_cast<std::byte*>(workspace.data()) + cuda::paged_attention_counter_bytes;
    EXPECT_EQ(cudaMemsetAsync(partials, 0xff,
                              workspace.bytes() - cuda::paged_attention_counter_bytes, stream),
              cudaSuccess);
  }

  [[nodiscard]] cudaError_t launch(cudaStream_t stream) const {
    return cuda::paged_attention(params, workspace.data(), workspace_bytes, stream);
  }

  // Whether every arrival counter is back at zero.
  [[nodiscard]] bool counters_zero() const {
    std::vector<std::uint32_t> host(cuda::paged_attention_counter_bytes / 4);
    EXPECT_EQ(cudaMemcpy(host.data(), workspace.data(), cuda::paged_attention_counter_bytes,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (const std::uint32_t v : host) {
      if (v != 0)
        return false;
    }
    return true;
  }
};

class gpu_attention_fused_merge : public ::testing::TestWithParam<cuda::attention_walk> {};

TEST_P(gpu_attention_fused_merge, equals_the_block_merge_bit_for_bit_over_repeats_and_graphs) {
  MSTAR_REQUIRE_GPU();
  const cuda::attention_walk walk = GetParam();
  std::uint64_t seed = 900;
  for (const auto& c : fused_cases()) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<const device_step> made;
    int splits = 0;
    std::vector<float> block;
    {
      // The plan and workspace are the walk's; the merge does not change them.
      const variant_scope forced{{walk, cuda::attention_merge::block}};
      made = std::make_unique<const device_step>(c, ++seed);
      splits = cuda::paged_attention_splits(made->params);
      ASSERT_GE(splits, 2) << "the case must split";
      const int previous = cuda::set_attention_single_direct(0);
      made->poison(nullptr);
      ASSERT_EQ(made->launch(nullptr), cudaSuccess);
      block = made->out.download();
      // One-chunk rows written by the split kernel (the mma walk; the
      // others ignore it): the merge kernel's bits.
      static_cast<void>(cuda::set_attention_single_direct(1));
      made->poison(nullptr);
      const cudaError_t direct = made->launch(nullptr);
      static_cast<void>(cuda::set_attention_single_direct(previous));
      ASSERT_EQ(direct, cudaSuccess);
      EXPECT_EQ(bytes_of(made->out.download()), bytes_of(block))
          << "one-chunk rows written directly";
    }
    const device_step& step = *made;
    const variant_scope forced{{walk, cuda::attention_merge::fused}};
    const cuda::attention_variant v = cuda::paged_attention_variant(step.params, true);
    std::cout << "[ variant  ] " << cuda::to_string(v.walk) << ' ' << cuda::to_string(v.merge)
              << ", " << splits << " splits\n";
    if (v.walk != cuda::attention_walk::rows) {
      EXPECT_EQ(v.merge, cuda::attention_merge::fused);
    }
    for (int run = 0; run < 3; ++run) {
      step.poison(nullptr);
      ASSERT_EQ(step.launch(nullptr), cudaSuccess);
      EXPECT_EQ(bytes_of(step.out.download()), bytes_of(block)) << "launch " << run;
      EXPECT_TRUE(step.counters_zero()) << "launch " << run;
    }
    test::gpu::expect_device_ok();
    auto stream = cuda::stream::make();
    ASSERT_TRUE(static_cast<bool>(stream));
    const cudaStream_t s = stream->get();
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const cudaError_t launched = step.launch(s);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    ASSERT_EQ(launched, cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
      step.poison(s);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(bytes_of(step.out.download()), bytes_of(block)) << "replay " << replay;
      EXPECT_TRUE(step.counters_zero()) << "replay " << replay;
    }
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  }
}

INSTANTIATE_TEST_SUITE_P(
    every_split_walk, gpu_attention_fused_merge,
    ::testing::Values(cuda::attention_walk::registers, cuda::attention_walk::mma,
                      cuda::attention_walk::rows_mma, cuda::attention_walk::rows),
    [](const auto& param) { return std::string{cuda::to_string(param.param)}; });

// The mma walk's bulk copies (set_attention_mma_bulk, MSTAR_ATTN_MMA_BULK=1)
// and the default choice by grid against its cp.async copies: the same bits
// one pass, and split where the rule gives the same chunks (the barriers' shared memory can leave
// one block fewer an SM at head_dim 64 with 8 heads, so fewer chunks there), for head_dim 64, 128
// and 256, ragged rows (a position, page edges, long ones) included. Puts back, when it goes, the
// override it found.
class bulk_scope {
 public:
  bulk_scope() : previous_(cuda::set_attention_mma_bulk(0)) {}
  ~bulk_scope() { static_cast<void>(cuda::set_attention_mma_bulk(previous_)); }
  bulk_scope(const bulk_scope&) = delete;
  bulk_scope& operator=(const bulk_scope&) = delete;

 private:
  int previous_;
};

TEST(gpu_attention_mma_bulk, bulk_copies_give_the_bits_of_cp_async) {
  MSTAR_REQUIRE_GPU();
  const variant_scope forced{{cuda::attention_walk::mma, cuda::attention_merge::fused}};
  const bulk_scope restored;
  std::uint64_t seed = 950;
  int compared = 0;
  int compared_split = 0;
  for (const auto& c : fused_cases()) {
    if (c.dtype != mstar::dtype::bfloat16)
      continue;
    SCOPED_TRACE(c.name);
    static_cast<void>(cuda::set_attention_mma_bulk(0));
    const device_step step{c, ++seed};
    const int splits = cuda::paged_attention_splits(step.params);
    step.poison(nullptr);
    ASSERT_EQ(cuda::paged_attention(step.params, nullptr), cudaSuccess);
    const std::vector<float> one_pass = step.out.download();
    step.poison(nullptr);
    ASSERT_EQ(step.launch(nullptr), cudaSuccess);
    const std::vector<float> split = step.out.download();
    static_cast<void>(cuda::set_attention_mma_bulk(1));
    EXPECT_LE(cuda::paged_attention_splits(step.params), splits);
    step.poison(nullptr);
    ASSERT_EQ(cuda::paged_attention(step.params, nullptr), cudaSuccess);
    EXPECT_EQ(bytes_of(step.out.download()), bytes_of(one_pass)) << "one pass";
    if (cuda::paged_attention_splits(step.params) == splits) {
      step.poison(nullptr);
      ASSERT_EQ(step.launch(nullptr), cudaSuccess);
      EXPECT_EQ(bytes_of(step.out.download()), bytes_of(split)) << splits << " splits";
      EXPECT_TRUE(step.counters_zero());
      ++compared_split;
    }
    // The default, by each launch's grid (bulk_pays): the split rule counts
    // the cp.async kernel's blocks, so the chunks are those of cp.async.
    static_cast<void>(cuda::set_attention_mma_bulk(-1));
    if (std::getenv("MSTAR_ATTN_MMA_BULK") == nullptr) {
      EXPECT_EQ(cuda::paged_attention_splits(step.params), splits);
      step.poison(nullptr);
      ASSERT_EQ(cuda::paged_attention(step.params, nullptr), cudaSuccess);
      EXPECT_EQ(bytes_of(step.out.download()), bytes_of(one_pass)) << "one pass, by grid";
      step.poison(nullptr);
      ASSERT_EQ(step.launch(nullptr), cudaSuccess);
      EXPECT_EQ(bytes_of(step.out.download()), bytes_of(split)) << splits << " splits, by grid";
      EXPECT_TRUE(step.counters_zero());
    }
    test::gpu::expect_device_ok();
    ++compared;
  }
  EXPECT_GE(compared, 8);
  EXPECT_GE(compared_split, 6);
}

TEST(gpu_attention_fused_merge_host, takes_the_block_merge_where_it_cannot_fuse) {
  // Host only: what a launch would take, no device needed.
  const std::vector<std::int32_t> ids(17, 0);
  const kv_page_table table{
      ids, ids, ids, std::span{ids}.first(16), std::span{ids}.first(16), std::span{ids}.first(16)};
  const kv_arena_view arena{reinterpret_cast<std::byte*>(std::uintptr_t{256}),
                            {16, 1, 8, 128, mstar::dtype::bfloat16}};
  const paged_attention_params p{arena,   0,  table, reinterpret_cast<const float*>(256),
                                 nullptr, 32, 0.0F};
  {
    const variant_scope forced{{cuda::attention_walk::rows, cuda::attention_merge::fused}};
    EXPECT_EQ(cuda::paged_attention_variant(p, true).merge, cuda::attention_merge::block);
  }
  {
    const variant_scope forced{{cuda::attention_walk::pipeline4, cuda::attention_merge::fused}};
    EXPECT_EQ(cuda::paged_attention_variant(p, true).merge, cuda::attention_merge::block);
  }
  {
    const variant_scope forced{{cuda::attention_walk::mma, cuda::attention_merge::fused}};
    EXPECT_EQ(cuda::paged_attention_variant(p, true).merge, cuda::attention_merge::fused);
  }
  // The default rule (MSTAR_ATTN_SPLIT_MERGE unset): fused for the mma walk
  // (at 2+ rows, where it won on the H200, and at one row, where it wins in
  // a model's step), the block merge for the others.
  if (std::getenv("MSTAR_ATTN_SPLIT_MERGE") == nullptr) {
    {
      const variant_scope forced{{cuda::attention_walk::mma, cuda::attention_merge::automatic}};
      EXPECT_EQ(cuda::paged_attention_variant(p, true).merge, cuda::attention_merge::fused);
    }
    {
      const std::vector<std::int32_t> one(2, 0);
      const kv_page_table single{
          one, one, one, std::span{one}.first(1), std::span{one}.first(1), std::span{one}.first(1)};
      const paged_attention_params p1{arena,   0,  single, reinterpret_cast<const float*>(256),
                                      nullptr, 32, 0.0F};
      const variant_scope forced{{cuda::attention_walk::mma, cuda::attention_merge::automatic}};
      EXPECT_EQ(cuda::paged_attention_variant(p1, true).merge, cuda::attention_merge::fused);
    }
    {
      const variant_scope forced{
          {cuda::attention_walk::rows_mma, cuda::attention_merge::automatic}};
      EXPECT_EQ(cuda::paged_attention_variant(p, true).merge, cuda::attention_merge::block);
    }
  }
  EXPECT_STREQ(cuda::to_string(cuda::attention_merge::fused), "mfused");
}

TEST(gpu_attention_fused_merge_host, kernel_switch_overrides_hand_back_the_previous_one) {
  // Host only: 1 on, 0 off, any other non-negative value on, negative the
  // environment's choice (-1), each call returning the override it replaced.
  for (int (*set)(int) : {&cuda::set_attention_single_direct, &cuda::set_attention_mma_bulk}) {
    const int previous = set(1);
    EXPECT_EQ(set(0), 1);
    EXPECT_EQ(set(5), 0);
    EXPECT_EQ(set(-3), 1);
    EXPECT_EQ(set(previous), -1);
  }
}

}  // namespace
}  // namespace mstar::kernels
