#include "kernels/attention.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.hpp"

namespace mstar::kernels {
namespace {

// Byte addressing of one layer's K or V vector for (page, slot, kv head),
// with the geometry's strides read once: the loops store through std::byte,
// which may alias the geometry, so they would otherwise be recomputed.
struct arena_addr {
  const kv_arena_view& a;
  std::size_t head_bytes = a.geometry.head_bytes();
  std::size_t token_bytes = a.geometry.token_bytes();
  std::size_t half_bytes = a.geometry.half_bytes();  // K or V
  std::size_t page_bytes = a.geometry.page_bytes();

  [[nodiscard]] std::byte* at(std::int32_t layer, int kv, std::int32_t page, std::int32_t slot,
                              std::int32_t head) const {
    return a.base + static_cast<std::size_t>(page) * page_bytes +
           (static_cast<std::size_t>(layer) * 2 + static_cast<std::size_t>(kv)) * half_bytes +
           static_cast<std::size_t>(slot) * token_bytes +
           static_cast<std::size_t>(head) * head_bytes;
  }
};

void store(const kv_arena_view& a, std::byte* dst, const float* src) {
  const auto n = static_cast<std::size_t>(a.geometry.head_dim);
  if (a.geometry.dtype == mstar::dtype::float32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  assert(a.geometry.dtype == mstar::dtype::bfloat16 &&
         "KV arena dtype must be float32 or bfloat16");
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = float_to_bf16_bits(src[i]);
    std::memcpy(dst + i * sizeof h, &h, sizeof h);
  }
}

void load(const kv_arena_view& a, const std::byte* src, float* dst) {
  const auto n = static_cast<std::size_t>(a.geometry.head_dim);
  if (a.geometry.dtype == mstar::dtype::float32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  assert(a.geometry.dtype == mstar::dtype::bfloat16 &&
         "KV arena dtype must be float32 or bfloat16");
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h = 0;
    std::memcpy(&h, src + i * sizeof h, sizeof h);
    dst[i] = bf16_bits_to_float(h);
  }
}

// Positions of row r: its cached-plus-new length and first new position.
struct row_span {
  std::int32_t first_token = 0;  // packed index of the row's first new token
  std::int32_t new_tokens = 0;
  std::int32_t length = 0;
  std::int32_t first_page = 0;  // index into kv_indices
};

row_span row_of(const kv_page_table& t, std::int32_t page_size, std::int32_t r) {
  const auto i = static_cast<std::size_t>(r);
  row_span s;
  s.first_token = t.qo_indptr[i];
  s.new_tokens = t.qo_indptr[i + 1] - t.qo_indptr[i];
  s.first_page = t.kv_indptr[i];
  const std::int32_t pages = t.kv_indptr[i + 1] - t.kv_indptr[i];
  s.length = pages == 0 ? 0 : (pages - 1) * page_size + t.last_page_len[i];
  assert(s.length >= s.new_tokens && "a row computes more tokens than its pages hold");
  return s;
}

std::int32_t page_at(const kv_page_table& t, const row_span& s, std::int32_t page_size,
                     std::int32_t pos) {
  return t.kv_indices[static_cast<std::size_t>(s.first_page + pos / page_size)];
}

}  // namespace

void append_kv(const append_kv_params& p) {
  const arena_addr addr{p.arena};
  const std::int32_t hkv = p.arena.geometry.num_kv_heads;
  const auto token_elems =
      static_cast<std::size_t>(hkv) * static_cast<std::size_t>(p.arena.geometry.head_dim);
  const auto head_elems = static_cast<std::size_t>(p.arena.geometry.head_dim);
  auto write = [&](std::int32_t token, std::int32_t page, std::int32_t slot) {
    const auto base = static_cast<std::size_t>(token) * token_elems;
    for (std::int32_t h = 0; h < hkv; ++h) {
      const std::size_t off = base + static_cast<std::size_t>(h) * head_elems;
      store(p.arena, addr.at(p.layer, 0, page, slot, h), p.k + off);
      store(p.arena, addr.at(p.layer, 1, page, slot, h), p.v + off);
    }
  };
  const std::int32_t rows = p.table.num_rows();
  if (p.table.is_decode()) {
    for (std::int32_t r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r);
      write(r, p.table.decode_page[i], p.table.decode_offset[i]);
    }
    return;
  }
  const std::int32_t ps = p.arena.geometry.page_size;
  for (std::int32_t r = 0; r < rows; ++r) {
    const row_span s = row_of(p.table, ps, r);
    const std::int32_t start = s.length - s.new_tokens;
    for (std::int32_t j = 0; j < s.new_tokens; ++j) {
      const std::int32_t pos = start + j;
      write(s.first_token + j, page_at(p.table, s, ps, pos), pos % ps);
    }
  }
}

void paged_attention(const paged_attention_params& p) {
  const arena_addr addr{p.arena};
  const std::int32_t hq = p.num_qo_heads;
  const std::int32_t hkv = p.arena.geometry.num_kv_heads;
  const std::int32_t ps = p.arena.geometry.page_size;
  const auto d = static_cast<std::size_t>(p.arena.geometry.head_dim);
  assert(hkv > 0 && hq % hkv == 0 && "query heads must be a multiple of kv heads");
  const std::int32_t group = hq / hkv;
  const float scale = p.scale != 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> scores;
  std::vector<float> kbuf(d);
  std::vector<float> acc(d);
  for (std::int32_t r = 0; r < p.table.num_rows(); ++r) {
    const row_span s = row_of(p.table, ps, r);
    scores.resize(static_cast<std::size_t>(s.length));
    for (std::int32_t j = 0; j < s.new_tokens; ++j) {
      const std::int32_t pos = s.length - s.new_tokens + j;
      const auto token = static_cast<std::size_t>(s.first_token + j);
      for (std::int32_t h = 0; h < hq; ++h) {
        const std::int32_t kvh = h / group;
        const float* q =
            p.q + (token * static_cast<std::size_t>(hq) + static_cast<std::size_t>(h)) * d;
        float top = -INFINITY;
        for (std::int32_t t = 0; t <= pos; ++t) {
          load(p.arena, addr.at(p.layer, 0, page_at(p.table, s, ps, t), t % ps, kvh), kbuf.data());
          float dot = 0.0f;
          for (std::size_t i = 0; i < d; ++i)
            dot += q[i] * kbuf[i];
          scores[static_cast<std::size_t>(t)] = dot * scale;
          top = std::max(top, dot * scale);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        float total = 0.0f;
        for (std::int32_t t = 0; t <= pos; ++t) {
          const float w = std::exp(scores[static_cast<std::size_t>(t)] - top);
          total += w;
          load(p.arena, addr.at(p.layer, 1, page_at(p.table, s, ps, t), t % ps, kvh), kbuf.data());
          for (std::size_t i = 0; i < d; ++i)
            acc[i] += w * kbuf[i];
        }
        float* o = p.out + (token * static_cast<std::size_t>(hq) + static_cast<std::size_t>(h)) * d;
        for (std::size_t i = 0; i < d; ++i)
          o[i] = acc[i] / total;
      }
    }
  }
}

}  // namespace mstar::kernels
