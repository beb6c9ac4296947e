// Paged attention on the GPU (kernels/cuda/attention.hpp) against the CPU
// reference (kernels/attention.hpp): append_kv must leave the arena equal
// byte for byte (bf16 rounding included), and paged_attention must match by
// normalised error, over scrambled pages, cached prefixes, GQA group sizes
// that fill, split and pad the four-head chunks, every fast head_dim and
// two that take the generic kernel, prefill and decode, f32 and bf16 arenas;
// the split-KV decode path the same way, with its workspace poisoned too.
#include <algorithm>
#include <gtest/gtest.h>
#include <iostream>
#include <numeric>
#include <random>

#include "kernels/attention.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::bytes_of;
using test::gpu::poisoned;
using test::gpu::upload;
using ints = std::vector<std::int32_t>;

struct row_spec {
  std::int32_t cached = 0;  // positions already in the pages
  std::int32_t fresh = 0;   // tokens this step computes
};

struct attn_case {
  const char* name;
  std::int32_t page_size, kv_heads, q_heads, head_dim;
  mstar::dtype dtype;
  std::vector<row_spec> rows;
  bool decode;  // fill the decode fast-path arrays (every row computes one token)
};

// The step's table over freshly shuffled pages, owned.
struct owned_table {
  ints qo{0}, kv_indptr{0}, kv_indices, last, decode_page, decode_offset;
  [[nodiscard]] kv_page_table view() const {
    return {qo, kv_indptr, kv_indices, last, decode_page, decode_offset};
  }
};

owned_table make_table(const attn_case& c, std::int32_t num_pages, std::mt19937_64& engine) {
  ints pool(static_cast<std::size_t>(num_pages));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), engine);
  owned_table t;
  std::size_t next = 0;
  for (const auto& r : c.rows) {
    const std::int32_t len = r.cached + r.fresh;
    const std::int32_t pages = (len + c.page_size - 1) / c.page_size;
    for (std::int32_t i = 0; i < pages; ++i)
      t.kv_indices.push_back(pool[next++]);
    t.qo.push_back(t.qo.back() + r.fresh);
    t.kv_indptr.push_back(static_cast<std::int32_t>(t.kv_indices.size()));
    t.last.push_back(len == 0 ? 0 : (len % c.page_size == 0 ? c.page_size : len % c.page_size));
    if (c.decode) {
      t.decode_page.push_back(t.kv_indices.back());
      t.decode_offset.push_back(t.last.back() - 1);
    }
  }
  return t;
}

// The device copies of a table; `view` lends them as a kernel table.
struct device_table {
  test::gpu::device_vector<std::int32_t> qo, kv_indptr, kv_indices, last, page, offset;
  explicit device_table(const owned_table& t)
      : qo(upload(t.qo)),
        kv_indptr(upload(t.kv_indptr)),
        kv_indices(upload(t.kv_indices)),
        last(upload(t.last)),
        page(upload(t.decode_page)),
        offset(upload(t.decode_offset)) {}
  [[nodiscard]] kv_page_table view() const {
    return {qo.span(),   kv_indptr.span(), kv_indices.span(),
            last.span(), page.span(),      offset.span()};
  }
};

// Which paged_attention overload run_case calls: the one-pass one, or the
// split one with the workspace it asks for divided by `divisor` (fewer
// chunks per row, or one pass when too little is left); `planned`: whether
// the step must plan a split (else it must not).
struct launch_mode {
  bool split = false;
  std::size_t divisor = 1;
  bool planned = true;
};

// The split overload on a NaN-poisoned workspace (a partial the merge reads
// without its kernel writing it shows as a NaN output).
void run_split(const paged_attention_params& p, launch_mode mode) {
  const int splits = cuda::paged_attention_splits(p);
  const std::size_t bytes = cuda::paged_attention_workspace_bytes(p);
  std::cout << "[ splits   ] " << splits << " per row, workspace " << bytes << " bytes / "
            << mode.divisor << '\n';
  if (mode.planned) {
    ASSERT_GE(splits, 2) << "the case must plan a split";
    ASSERT_GT(bytes, 0U);
  } else {
    ASSERT_EQ(splits, 1) << "the case must not plan a split";
    ASSERT_EQ(bytes, 0U);
  }
  auto workspace = poisoned<float>(std::max<std::size_t>(bytes / sizeof(float), 1));
  ASSERT_EQ(cuda::paged_attention(p, workspace.data(), bytes / mode.divisor, nullptr), cudaSuccess);
}

void run_case(const attn_case& c, std::uint64_t seed, launch_mode mode = {}) {
  SCOPED_TRACE(c.name);
  auto rng = test::gpu::seeded(seed);
  const std::int32_t num_layers = 2;
  const std::int32_t layer = 1;
  std::int32_t pages_needed = 0;
  for (const auto& r : c.rows)
    pages_needed += (r.cached + r.fresh + c.page_size - 1) / c.page_size;
  const std::int32_t num_pages = pages_needed + 5;
  const owned_table table = make_table(c, num_pages, rng.engine());
  const std::int32_t tokens = table.qo.back();
  const std::size_t elems =
      static_cast<std::size_t>(num_pages) * num_layers * 2 * c.page_size * c.kv_heads * c.head_dim;
  // Every slot holds valid data, so cached prefixes read real values.
  const auto fill = rng.floats(elems);
  std::vector<std::byte> arena(elems * size_of(c.dtype));
  if (c.dtype == mstar::dtype::float32) {
    std::memcpy(arena.data(), fill.data(), arena.size());
  } else {
    for (std::size_t i = 0; i < elems; ++i) {
      const std::uint16_t h = float_to_bf16_bits(fill[i]);
      std::memcpy(arena.data() + 2 * i, &h, 2);
    }
  }
  const std::size_t kv_elems = static_cast<std::size_t>(tokens) * c.kv_heads * c.head_dim;
  const std::size_t q_elems = static_cast<std::size_t>(tokens) * c.q_heads * c.head_dim;
  const auto k = rng.floats(kv_elems, -2.0F, 2.0F);
  const auto v = rng.floats(kv_elems, -2.0F, 2.0F);
  const auto q = rng.floats(q_elems, -2.0F, 2.0F);

  auto d_arena = upload(arena);
  const device_table d_table{table};
  const auto d_k = upload(k);
  const auto d_v = upload(v);
  const auto d_q = upload(q);
  auto d_out = poisoned<float>(q_elems);

  kv_arena_view host_view{arena.data(), {c.page_size, num_layers, c.kv_heads, c.head_dim, c.dtype}};
  kv_arena_view dev_view = host_view;
  dev_view.base = d_arena.data();
  append_kv({host_view, layer, table.view(), k.data(), v.data()});
  std::vector<float> ref(q_elems);
  paged_attention({host_view, layer, table.view(), q.data(), ref.data(), c.q_heads, 0.0F});

  ASSERT_EQ(cuda::append_kv({dev_view, layer, d_table.view(), d_k.data(), d_v.data()}, nullptr),
            cudaSuccess);
  test::gpu::expect_device_ok();
  EXPECT_EQ(bytes_of(d_arena.download()), bytes_of(arena)) << "append_kv arenas differ";
  const paged_attention_params dev{dev_view,  layer, d_table.view(), d_q.data(), d_out.data(),
                                   c.q_heads, 0.0F};
  if (mode.split)
    ASSERT_NO_FATAL_FAILURE(run_split(dev, mode));
  else
    ASSERT_EQ(cuda::paged_attention(dev, nullptr), cudaSuccess);
  test::gpu::expect_device_ok();
  EXPECT_TRUE(test::gpu::within(d_out.download(), ref, test::gpu::budget::attention));
}

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
