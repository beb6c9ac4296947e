// Paged attention (kernels/attention.hpp): append_kv then paged_attention over
// scrambled pages equals brute-force dense causal attention per row, with
// cached prefixes (shared prefix pages included), GQA, f32 and bf16 arenas,
// and the decode fast path agreeing with the general path.
#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace mstar::kernels {
namespace {

using ints = std::vector<std::int32_t>;

struct geometry {
  std::int32_t page_size = 4;
  std::int32_t num_layers = 2;
  std::int32_t kv_heads = 2;
  std::int32_t q_heads = 4;
  std::int32_t head_dim = 8;
  std::int32_t layer = 1;
  std::int32_t num_pages = 64;
  mstar::dtype dtype = mstar::dtype::float32;
};

// A row's cached length before the step and the tokens the step computes.
struct row_spec {
  std::int32_t cached = 0;
  std::int32_t fresh = 0;
};

// A plan's arrays, owned; `view` lends them as a kernel table.
struct owned_table {
  ints qo{0}, kv_indptr{0}, kv_indices, last, decode_page, decode_offset;
  [[nodiscard]] kv_page_table view() const {
    return {qo, kv_indptr, kv_indices, last, decode_page, decode_offset};
  }
};

owned_table make_table(const std::vector<ints>& pages, const ints& lengths, const ints& compute,
                       std::int32_t ps, bool decode) {
  owned_table t;
  for (std::size_t r = 0; r < pages.size(); ++r) {
    const std::int32_t len = lengths[r];
    const std::int32_t npages = (len + ps - 1) / ps;
    t.kv_indices.insert(t.kv_indices.end(), pages[r].begin(), pages[r].begin() + npages);
    t.qo.push_back(t.qo.back() + compute[r]);
    t.kv_indptr.push_back(static_cast<std::int32_t>(t.kv_indices.size()));
    t.last.push_back(len == 0 ? 0 : (len % ps == 0 ? ps : len % ps));
    if (decode) {
      t.decode_page.push_back(t.kv_indices.back());
      t.decode_offset.push_back(t.last.back() - 1);
    }
  }
  return t;
}

float round_bf16(float f) {
  return bf16_bits_to_float(float_to_bf16_bits(f));
}

// One step over rows with cached prefixes: every row's K/V for every
// position, its pages (scrambled; row 1 shares row 0's first page when both
// cache a full page), and an arena poisoned with NaN so a read of any slot
// that was never written shows up in the output.
class paged_case {
 public:
  paged_case(geometry g, std::vector<row_spec> rows, std::uint32_t seed)
      : g_(g), rows_(std::move(rows)), rng_(seed) {
    const std::size_t elems =
        static_cast<std::size_t>(g_.num_pages) * g_.num_layers * 2 * g_.page_size * token_elems();
    arena_.resize(elems * size_of(g_.dtype) / sizeof(float));
    std::memset(arena_.data(), 0xff, arena_.size() * sizeof(float));  // NaN as f32 and as bf16
    ints free(static_cast<std::size_t>(g_.num_pages - 1));
    std::iota(free.begin(), free.end(), 1);  // page 0 is the sink
    std::shuffle(free.begin(), free.end(), rng_);
    std::normal_distribution<float> normal;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      const std::int32_t len = length(r);
      pages_.emplace_back();
      for (std::int32_t p = 0; p < (len + g_.page_size - 1) / g_.page_size; ++p) {
        pages_.back().push_back(free.back());
        free.pop_back();
      }
      k_.emplace_back(static_cast<std::size_t>(len) * token_elems());
      v_.emplace_back(k_.back().size());
      for (auto& x : k_.back())
        x = normal(rng_);
      for (auto& x : v_.back())
        x = normal(rng_);
      q_.emplace_back(static_cast<std::size_t>(len) * q_elems());  // a query at every position
      for (auto& x : q_.back())
        x = normal(rng_);
    }
    if (rows_.size() > 1 && rows_[0].cached >= g_.page_size && rows_[1].cached >= g_.page_size) {
      pages_[1][0] = pages_[0][0];  // a shared prefix page holds the same tokens
      const auto n = static_cast<std::size_t>(g_.page_size) * token_elems();
      std::copy_n(k_[0].begin(), n, k_[1].begin());
      std::copy_n(v_[0].begin(), n, v_[1].begin());
    }
    if (g_.dtype == mstar::dtype::bfloat16) {
      for (auto* side : {&k_, &v_}) {
        for (auto& row : *side)
          std::transform(row.begin(), row.end(), row.begin(), round_bf16);
      }
    }
  }

  // Writes the cached prefixes (as an earlier step would have), then the
  // step's tokens, and runs attention; returns out [T, Hq, D].
  std::vector<float> run(bool decode_path = false, float scale = 0.0f) {
    ints cached;
    ints lengths;
    ints fresh;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      cached.push_back(rows_[r].cached);
      lengths.push_back(length(r));
      fresh.push_back(rows_[r].fresh);
    }
    const owned_table before = make_table(pages_, cached, cached, g_.page_size, false);
    append_kv({arena(), g_.layer, before.view(), packed(k_, token_elems(), true).data(),
               packed(v_, token_elems(), true).data()});
    const owned_table step = make_table(pages_, lengths, fresh, g_.page_size, decode_path);
    append_kv({arena(), g_.layer, step.view(), packed(k_, token_elems(), false).data(),
               packed(v_, token_elems(), false).data()});
    const std::vector<float> q = packed(q_, q_elems(), false);
    std::vector<float> out(q.size(), std::numeric_limits<float>::quiet_NaN());
    paged_attention({arena(), g_.layer, step.view(), q.data(), out.data(), g_.q_heads, scale});
    return out;
  }

  // Brute-force attention of every new token over its row's dense K/V, in double.
  [[nodiscard]] std::vector<float> dense(double scale = 0.0) const {
    const auto d = static_cast<std::size_t>(g_.head_dim);
    if (scale == 0.0)
      scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<float> out;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      for (std::int32_t j = 0; j < rows_[r].fresh; ++j) {
        const std::int32_t pos = rows_[r].cached + j;
        for (std::int32_t h = 0; h < g_.q_heads; ++h) {
          const std::size_t kvh = static_cast<std::size_t>(h / (g_.q_heads / g_.kv_heads));
          const float* q = q_[r].data() + (static_cast<std::size_t>(pos) * g_.q_heads + h) * d;
          std::vector<double> s(static_cast<std::size_t>(pos) + 1);
          for (std::size_t t = 0; t < s.size(); ++t) {
            const float* k = k_[r].data() + t * token_elems() + kvh * d;
            for (std::size_t i = 0; i < d; ++i)
              s[t] += double{q[i]} * double{k[i]} * scale;
          }
          const double top = *std::max_element(s.begin(), s.end());
          double total = 0;
          std::vector<double> acc(d);
          for (std::size_t t = 0; t < s.size(); ++t) {
            const double w = std::exp(s[t] - top);
            total += w;
            const float* v = v_[r].data() + t * token_elems() + kvh * d;
            for (std::size_t i = 0; i < d; ++i)
              acc[i] += w * double{v[i]};
          }
          for (std::size_t i = 0; i < d; ++i)
            out.push_back(static_cast<float>(acc[i] / total));
        }
      }
    }
    return out;
  }

  [[nodiscard]] const std::vector<float>& arena_floats() const { return arena_; }

 private:
  [[nodiscard]] std::size_t token_elems() const {
    return static_cast<std::size_t>(g_.kv_heads) * static_cast<std::size_t>(g_.head_dim);
  }
  [[nodiscard]] std::size_t q_elems() const {
    return static_cast<std::size_t>(g_.q_heads) * static_cast<std::size_t>(g_.head_dim);
  }
  [[nodiscard]] std::int32_t length(std::size_t r) const {
    return rows_[r].cached + rows_[r].fresh;
  }
  kv_arena_view arena() {
    return {reinterpret_cast<std::byte*>(arena_.data()),
            {g_.page_size, g_.num_layers, g_.kv_heads, g_.head_dim, g_.dtype}};
  }
  // Packs every row's cached positions (or its fresh ones), `per` floats each.
  [[nodiscard]] std::vector<float> packed(const std::vector<std::vector<float>>& src,
                                          std::size_t per, bool cached) const {
    std::vector<float> out;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      const auto c = static_cast<std::size_t>(rows_[r].cached);
      const std::size_t from = cached ? 0 : c * per;
      const std::size_t count = (cached ? c : static_cast<std::size_t>(rows_[r].fresh)) * per;
      out.insert(out.end(), src[r].begin() + static_cast<std::ptrdiff_t>(from),
                 src[r].begin() + static_cast<std::ptrdiff_t>(from + count));
    }
    return out;
  }

  geometry g_;
  std::vector<row_spec> rows_;
  std::mt19937 rng_;
  std::vector<ints> pages_;
  std::vector<std::vector<float>> k_, v_, q_;
  std::vector<float> arena_;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

TEST(paged_attention, matches_dense_causal_attention_over_scrambled_pages_with_cached_prefixes) {
  const std::vector<row_spec> rows{{5, 3}, {9, 4}, {0, 7}, {4, 0}, {0, 1}, {13, 1}};
  for (const std::int32_t page_size : {1, 4, 16}) {
    for (const std::int32_t ratio : {1, 2, 4}) {
      const std::uint32_t seed = 1000U + static_cast<std::uint32_t>(page_size * 10 + ratio);
      SCOPED_TRACE("seed " + std::to_string(seed) + " page_size " + std::to_string(page_size) +
                   " gqa " + std::to_string(ratio));
      geometry g;
      g.page_size = page_size;
      g.q_heads = g.kv_heads * ratio;
      paged_case c(g, rows, seed);
      expect_close(c.run(), c.dense(), 1e-5f);
    }
  }
}

TEST(paged_attention, honours_an_explicit_scale_and_defaults_to_inverse_sqrt_head_dim) {
  const std::uint32_t seed = 77;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<row_spec> rows{{6, 2}, {0, 5}};
  paged_case explicit_scale({}, rows, seed);
  expect_close(explicit_scale.run(false, 0.7f), explicit_scale.dense(0.7), 1e-5f);
  paged_case by_default({}, rows, seed);
  paged_case by_value({}, rows, seed);
  EXPECT_EQ(by_default.run(false, 0.0f), by_value.run(false, 1.0f / std::sqrt(8.0f)));
}

TEST(paged_attention, reads_a_bf16_arena_as_dense_attention_over_rounded_keys_and_values) {
  const std::uint32_t seed = 4242;
  SCOPED_TRACE("seed " + std::to_string(seed));
  geometry g;
  g.dtype = mstar::dtype::bfloat16;
  paged_case c(g, {{7, 3}, {0, 6}, {12, 1}}, seed);
  expect_close(c.run(), c.dense(), 1e-5f);
}

TEST(paged_attention, decode_fast_path_equals_general_path_and_prefill_of_the_last_token) {
  const std::uint32_t seed = 9001;
  SCOPED_TRACE("seed " + std::to_string(seed));
  geometry g;
  g.q_heads = 8;
  // Row 0 caches less than a page, so no prefix page is shared here or below.
  const std::vector<row_spec> decode_rows{{3, 1}, {11, 1}, {0, 1}, {7, 1}};
  paged_case fast(g, decode_rows, seed);
  paged_case general(g, decode_rows, seed);
  const std::vector<float> fast_out = fast.run(true);
  EXPECT_EQ(fast_out, general.run(false));
  EXPECT_EQ(fast.arena_floats().size(), general.arena_floats().size());
  for (std::size_t i = 0; i < fast.arena_floats().size(); ++i) {
    const float a = fast.arena_floats()[i];
    const float b = general.arena_floats()[i];
    ASSERT_TRUE((std::isnan(a) && std::isnan(b)) || a == b) << "arena float " << i;
  }
  expect_close(fast_out, fast.dense(), 1e-5f);
  // The same tokens prefilled whole: each row's last output equals its decode output.
  const std::vector<row_spec> prefill_rows{{0, 4}, {0, 12}, {0, 1}, {0, 8}};
  paged_case prefill(g, prefill_rows, seed);
  const std::vector<float> whole = prefill.run();
  const std::size_t per =
      static_cast<std::size_t>(g.q_heads) * static_cast<std::size_t>(g.head_dim);
  std::size_t end = 0;
  for (std::size_t r = 0; r < prefill_rows.size(); ++r) {
    end += static_cast<std::size_t>(prefill_rows[r].fresh) * per;
    for (std::size_t i = 0; i < per; ++i) {
      ASSERT_FLOAT_EQ(fast_out[r * per + i], whole[end - per + i]) << "row " << r << " elem " << i;
    }
  }
}

TEST(attention_append_kv, writes_only_the_new_tokens_slots_of_its_layer) {
  const std::uint32_t seed = 31337;
  SCOPED_TRACE("seed " + std::to_string(seed));
  geometry g;
  paged_case c(g, {{3, 6}, {0, 2}}, seed);
  (void)c.run();
  const std::size_t page_floats =
      static_cast<std::size_t>(g.num_layers) * 2 * g.page_size * g.kv_heads * g.head_dim;
  const std::size_t layer_floats = page_floats / static_cast<std::size_t>(g.num_layers);
  std::size_t written = 0;
  for (std::size_t i = 0; i < c.arena_floats().size(); ++i) {
    const bool in_layer = (i % page_floats) / layer_floats == static_cast<std::size_t>(g.layer);
    if (!std::isnan(c.arena_floats()[i])) {
      ASSERT_TRUE(in_layer) << "float " << i << " outside layer " << g.layer;
      ++written;
    }
  }
  // 11 tokens, K and V, Hkv * D floats each.
  EXPECT_EQ(written, 11U * 2U * static_cast<std::size_t>(g.kv_heads * g.head_dim));
}

}  // namespace
}  // namespace mstar::kernels
