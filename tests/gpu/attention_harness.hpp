#pragma once

// The paged-attention test harness shared by gpu_attention_test.cpp and
// gpu_attention_prefill_test.cpp: a step's rows over freshly shuffled pages,
// the CPU reference, and the GPU launch (one-pass or split-KV) compared by
// normalised error.
#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>
#include <iostream>
#include <numeric>
#include <random>

#include "kernels/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels::test_attention {

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

inline owned_table make_table(const attn_case& c, std::int32_t num_pages, std::mt19937_64& engine) {
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
// the step must plan a split (else it must not); `repeat`: launch a second
// time on a re-poisoned output (and workspace) and require the same bits.
struct launch_mode {
  bool split = false;
  std::size_t divisor = 1;
  bool planned = true;
  bool repeat = false;
};

// Forces the fast kernels' walk and the split merge (cuda::attention_variant)
// for its lifetime, then puts back the override it found.
class variant_scope {
 public:
  explicit variant_scope(cuda::attention_variant v) : previous_(cuda::set_attention_variant(v)) {}
  ~variant_scope() { static_cast<void>(cuda::set_attention_variant(previous_)); }
  variant_scope(const variant_scope&) = delete;
  variant_scope& operator=(const variant_scope&) = delete;

 private:
  cuda::attention_variant previous_;
};

// Forces the prefill kernel (cuda::attention_prefill) for its lifetime,
// then puts back the override it found.
class prefill_scope {
 public:
  explicit prefill_scope(cuda::attention_prefill k) : previous_(cuda::set_attention_prefill(k)) {}
  ~prefill_scope() { static_cast<void>(cuda::set_attention_prefill(previous_)); }
  prefill_scope(const prefill_scope&) = delete;
  prefill_scope& operator=(const prefill_scope&) = delete;

 private:
  cuda::attention_prefill previous_;
};

// The split overload on a NaN-poisoned workspace (a partial the merge reads
// without its kernel writing it shows as a NaN output), its merge counters
// zeroed as a caller's first use does.
inline void run_split(const paged_attention_params& p, launch_mode mode) {
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
  ASSERT_EQ(cuda::clear_paged_attention_workspace(workspace.data(), workspace.bytes(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::paged_attention(p, workspace.data(), bytes / mode.divisor, nullptr), cudaSuccess);
}

// The launch run_case makes, with the walk and merge it takes printed.
inline void run_launch(const paged_attention_params& p, launch_mode mode) {
  const cuda::attention_variant v = cuda::paged_attention_variant(p, mode.split);
  std::cout << "[ variant  ] " << cuda::to_string(v.walk);
  if (mode.split)
    std::cout << ' ' << cuda::to_string(v.merge);
  const int d = p.arena.geometry.head_dim;
  if (!p.table.is_decode() && p.arena.geometry.dtype == mstar::dtype::bfloat16 &&
      (d == 64 || d == 128 || d == 256))
    std::cout << " prefill " << cuda::to_string(cuda::paged_attention_prefill(p));
  std::cout << '\n';
  if (mode.split)
    ASSERT_NO_FATAL_FAILURE(run_split(p, mode));
  else
    ASSERT_EQ(cuda::paged_attention(p, nullptr), cudaSuccess);
  test::gpu::expect_device_ok();
}

// The tensor-core prefill path (steps without the decode arrays, bf16
// arenas, head_dim 64 / 128 / 256) rounds q and the softmax weights to
// bf16; every other path computes in f32 over the same bf16 K / V values.
inline bool takes_tensor_cores(const attn_case& c) {
  return !c.decode && c.dtype == mstar::dtype::bfloat16 &&
         (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256);
}

inline double attention_budget(const attn_case& c) {
  return takes_tensor_cores(c) ? test::gpu::budget::attention_bf16_q : test::gpu::budget::attention;
}

inline void run_case(const attn_case& c, std::uint64_t seed, launch_mode mode = {}) {
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
  ASSERT_NO_FATAL_FAILURE(run_launch(dev, mode));
  const std::vector<float> got = d_out.download();
  EXPECT_TRUE(test::gpu::within(got, ref, attention_budget(c)));
  if (mode.repeat) {
    auto again = poisoned<float>(q_elems);
    const paged_attention_params dev2{dev_view,  layer, d_table.view(), d_q.data(), again.data(),
                                      c.q_heads, 0.0F};
    ASSERT_NO_FATAL_FAILURE(run_launch(dev2, mode));
    EXPECT_EQ(bytes_of(again.download()), bytes_of(got)) << "a second launch gave other bits";
  }
}

}  // namespace mstar::kernels::test_attention
