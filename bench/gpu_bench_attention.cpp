// Paged attention cases of mstar-gpu-bench (bench/gpu_bench_cases.hpp).
#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <random>

#include "bench/gpu_bench_cases.hpp"
#include "kernels/cuda/attention.hpp"

namespace mstar::bench::gpu {
namespace {

// `rows` rows of `context` cached tokens each on bf16 pages scattered over
// the arena (random contents), their page table in device memory, and q /
// out for `new_tokens` tokens per row: 1 with the decode arrays (decode), or
// `context` (a fresh prompt, every position computed).
struct paged_rows {
  mstar::kernels::kv_geometry geometry;
  cuda::device_buffer arena, qo, indptr, ids, last, page, offset, q, out;
  std::size_t rows = 0, num_ids = 0;

  paged_rows(const attention_case& a, int new_tokens)
      : geometry{a.page_size, 1, a.kv_heads, a.head_dim, mstar::dtype::bfloat16},
        rows(static_cast<std::size_t>(a.rows)) {
    const int pages_per_row = (a.context + a.page_size - 1) / a.page_size;
    const int num_pages = a.rows * pages_per_row;
    arena = alloc(geometry.page_bytes() * num_pages);
    fill_random(arena.data(), geometry.page_bytes() * num_pages, true, 11);
    std::vector<std::int32_t> id(static_cast<std::size_t>(num_pages));
    std::iota(id.begin(), id.end(), 0);
    std::shuffle(id.begin(), id.end(), std::mt19937_64{13});  // scattered pages
    std::vector<std::int32_t> h_qo(1, 0), h_indptr(1, 0), h_last, h_page, h_offset;
    const int last_len = a.context - (pages_per_row - 1) * a.page_size;
    for (int r = 0; r < a.rows; ++r) {
      h_qo.push_back((r + 1) * new_tokens);
      h_indptr.push_back((r + 1) * pages_per_row);
      h_last.push_back(last_len);
      h_page.push_back(id[static_cast<std::size_t>((r + 1) * pages_per_row - 1)]);
      h_offset.push_back(last_len - 1);
    }
    qo = upload(h_qo);
    indptr = upload(h_indptr);
    ids = upload(id);
    last = upload(h_last);
    page = upload(h_page);
    offset = upload(h_offset);
    num_ids = id.size();
    const std::size_t q_elems = std::size_t{1} * a.rows * new_tokens * a.q_heads * a.head_dim;
    q = alloc(q_elems * sizeof(float));
    fill_random(q.data(), q_elems * sizeof(float), false, 17);
    out = alloc(q_elems * sizeof(float));
  }

  [[nodiscard]] mstar::kernels::paged_attention_params params(const attention_case& a,
                                                              bool decode) const {
    auto span = [](const cuda::device_buffer& b, std::size_t n) {
      return std::span<const std::int32_t>{b.as<const std::int32_t>(), n};
    };
    const std::size_t decode_rows = decode ? rows : 0;
    return {{arena.as<std::byte>(), geometry},
            0,
            {span(qo, rows + 1), span(indptr, rows + 1), span(ids, num_ids), span(last, rows),
             span(page, decode_rows), span(offset, decode_rows)},
            q.as<const float>(),
            out.as<float>(),
            a.q_heads,
            0.0F};
  }
};

// The one-pass case of `p` under the attention variant now in force.
comparison time_one_pass(timer& t, copy_baseline& copy,
                         const mstar::kernels::paged_attention_params& p, const std::string& name,
                         double kv_bytes, int rounds) {
  auto c = measure(
      t, copy, name, "kv_bytes_read_per_s", kv_bytes,
      [&](cudaStream_t s) { return cuda::paged_attention(p, s); }, rounds);
  const cuda::attention_variant v = cuda::paged_attention_variant(p, false);
  c.extra["walk"] = static_cast<double>(v.walk);
  return c;
}

// The split case of `p` (the workspace overload with the workspace it asks
// for) under the attention variant now in force.
comparison time_split(timer& t, copy_baseline& copy,
                      const mstar::kernels::paged_attention_params& p, const std::string& name,
                      double kv_bytes, int rounds) {
  const std::size_t ws_bytes = cuda::paged_attention_workspace_bytes(p);
  auto workspace = alloc(std::max<std::size_t>(ws_bytes, 16));
  // Its merge counters start at zero, as a model's workspace does.
  check(cuda::clear_paged_attention_workspace(workspace.data(), ws_bytes, nullptr),
        "split workspace");
  auto c = measure(
      t, copy, name, "kv_bytes_read_per_s", kv_bytes,
      [&](cudaStream_t s) { return cuda::paged_attention(p, workspace.data(), ws_bytes, s); },
      rounds);
  const cuda::attention_variant v = cuda::paged_attention_variant(p, true);
  c.extra["walk"] = static_cast<double>(v.walk);
  c.extra["merge"] = static_cast<double>(v.merge);
  c.extra["splits"] = cuda::paged_attention_splits(p);
  c.extra["workspace_MiB"] = static_cast<double>(ws_bytes) / (1 << 20);
  return c;
}

constexpr cuda::attention_walk all_walks[] = {
    cuda::attention_walk::registers, cuda::attention_walk::pipeline4,
    cuda::attention_walk::pipeline2, cuda::attention_walk::mma,
    cuda::attention_walk::rows,      cuda::attention_walk::rows_mma};
constexpr cuda::attention_merge all_merges[] = {
    cuda::attention_merge::warp, cuda::attention_merge::block, cuda::attention_merge::fused};

}  // namespace

std::vector<comparison> bench_decode_attention(timer& t, copy_baseline& copy,
                                               const attention_case& a, int rounds, bool variants) {
  const paged_rows pr{a, 1};
  const auto p = pr.params(a, true);
  const double kv_bytes = 2.0 * a.rows * a.context * a.kv_heads * a.head_dim * 2.0;
  const int rows = a.rows;
  std::vector<comparison> results;
  results.push_back(
      time_one_pass(t, copy, p, fmt::format("decode_attention_b{}", rows), kv_bytes, rounds));
  results.push_back(
      time_split(t, copy, p, fmt::format("decode_attention_split_b{}", rows), kv_bytes, rounds));
  if (variants) {
    // Every walk one pass, every (walk, merge) split: forced through the
    // override, the default's restored after. A split case only where the
    // step splits (else it is the one-pass case again).
    const cuda::attention_variant before = cuda::set_attention_variant({});
    for (const auto walk : all_walks) {
      static_cast<void>(cuda::set_attention_variant({walk, cuda::attention_merge::automatic}));
      const char* w = cuda::to_string(walk);
      results.push_back(time_one_pass(t, copy, p, fmt::format("decode_attention_{}_b{}", w, rows),
                                      kv_bytes, rounds));
      if (cuda::paged_attention_splits(p) < 2)
        continue;
      for (const auto merge : all_merges) {
        static_cast<void>(cuda::set_attention_variant({walk, merge}));
        const std::string name =
            fmt::format("decode_attention_split_{}_{}_b{}", w, cuda::to_string(merge), rows);
        results.push_back(time_split(t, copy, p, name, kv_bytes, rounds));
      }
    }
    static_cast<void>(cuda::set_attention_variant(before));
  }
  for (auto& c : results) {
    c.extra["rows"] = a.rows;
    c.extra["context"] = a.context;
  }
  return results;
}

std::vector<comparison> bench_prefill_attention(timer& t, copy_baseline& copy,
                                                const attention_case& a, int rounds) {
  const paged_rows pr{a, a.context};
  const auto p = pr.params(a, false);
  const double tokens = static_cast<double>(a.rows) * a.context;
  const double bytes = 2.0 * tokens * a.kv_heads * a.head_dim * 2.0 +
                       2.0 * tokens * a.q_heads * a.head_dim * sizeof(float);
  const double flops = 4.0 * a.head_dim * a.q_heads * a.rows *
                       (static_cast<double>(a.context) * (a.context + 1) / 2.0);
  const std::string name =
      "prefill_attention_" + std::to_string(a.rows) + "x" + std::to_string(a.context);
  std::vector<comparison> results;
  const auto one = [&](const std::string& label) {
    const char* kernel = cuda::to_string(cuda::paged_attention_prefill(p));
    auto c = measure(
        t, copy, label, "bytes_per_s", bytes,
        [&](cudaStream_t s) { return cuda::paged_attention(p, s); }, rounds);
    c.extra["rows"] = a.rows;
    c.extra["context"] = a.context;
    c.extra["TFLOP_per_s"] = flops / (c.extra["us_per_call"] * 1e-6) / 1e12;
    c.extra["tokens_per_s"] = tokens / (c.extra["us_per_call"] * 1e-6);
    c.extra["wgmma"] = std::string{kernel} != "mma" ? 1.0 : 0.0;
    // The kind that ran, as attention_prefill's value (5: wgmma_lean).
    c.extra["prefill_kind"] = static_cast<double>(cuda::paged_attention_prefill(p));
    results.push_back(std::move(c));
  };
  one(name);
  const cuda::attention_prefill before =
      cuda::set_attention_prefill(cuda::attention_prefill::automatic);
  for (const auto k :
       {cuda::attention_prefill::mma, cuda::attention_prefill::wgmma,
        cuda::attention_prefill::wgmma_serial, cuda::attention_prefill::wgmma_lean}) {
    static_cast<void>(cuda::set_attention_prefill(k));
    one(name + "_" + cuda::to_string(k));
  }
  static_cast<void>(cuda::set_attention_prefill(before));
  return results;
}

}  // namespace mstar::bench::gpu
