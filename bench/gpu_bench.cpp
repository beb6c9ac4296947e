// GPU memory-bound kernels against the device's own copy bandwidth, measured
// in the same run: cudaMemcpy device-to-device (bytes read + written per
// second) is the ceiling; Qwen3.5's gated delta rule (decode: state read +
// written; a 4,096-token prefill, timed), decode paged attention one-pass and split-KV (K/V
// bytes read; the split's partials are not counted), the SSD
// one-token update (state read + written) and page pack/unpack (read +
// written) report bytes per second and their ratio to it. Timed with CUDA
// events, subject and copy interleaved round by round, medians reported.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>

#include "bench/harness.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/device.hpp"

namespace {

namespace cuda = mstar::kernels::cuda;
using mstar::bench::comparison;

// Exits with the message when a CUDA call fails: a benchmark has no recovery.
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "gpu bench: %s\n", cuda::cuda_error(err, what).to_string().c_str());
    std::exit(1);
  }
}

template <class T>
T must(mstar::result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "gpu bench: %s: %s\n", what, r.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

cuda::device_buffer alloc(std::size_t bytes) {
  return must(cuda::device_buffer::make(bytes), "cudaMalloc");
}

// Fills `bytes` of device memory with random floats in [-1, 1) (or their bf16
// halves): a random block uploaded once, then tiled (never zeros, METHOD.md).
void fill_random(void* dst, std::size_t bytes, bool bf16, std::uint64_t seed) {
  constexpr std::size_t block = 16U << 20U;
  std::vector<float> host(block / sizeof(float));
  std::mt19937_64 engine{seed};
  std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
  for (auto& v : host)
    v = dist(engine);
  auto staging = alloc(block);
  if (bf16) {
    auto wide = alloc(block * 2);
    check(cudaMemcpy(wide.data(), host.data(), block, cudaMemcpyHostToDevice), "upload");
    check(cuda::to_bf16(wide.as<float>(), staging.as<std::uint16_t>(),
                        static_cast<std::int64_t>(host.size()), nullptr),
          "to_bf16");
  } else {
    check(cudaMemcpy(staging.data(), host.data(), block, cudaMemcpyHostToDevice), "upload");
  }
  const std::size_t tile = bf16 ? block / 2 : block;
  for (std::size_t off = 0; off < bytes; off += tile) {
    check(cudaMemcpy(static_cast<std::byte*>(dst) + off, staging.data(),
                     std::min(tile, bytes - off), cudaMemcpyDeviceToDevice),
          "tile");
  }
  check(cudaDeviceSynchronize(), "fill");
}

template <class T>
cuda::device_buffer upload(const std::vector<T>& host) {
  auto d = alloc(std::max<std::size_t>(host.size() * sizeof(T), 1));
  check(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "upload");
  return d;
}

// Milliseconds per call of `fn`, timed with events over `reps` calls.
struct timer {
  cuda::stream stream = must(cuda::stream::make(), "stream");
  cuda::event start = must(cuda::event::make(), "event");
  cuda::event stop = must(cuda::event::make(), "event");

  double ms_per_call(const std::function<cudaError_t(cudaStream_t)>& fn, int reps) {
    check(cudaEventRecord(start.get(), stream.get()), "record");
    for (int i = 0; i < reps; ++i)
      check(fn(stream.get()), "launch");
    check(cudaEventRecord(stop.get(), stream.get()), "record");
    check(cudaEventSynchronize(stop.get()), "sync");
    return double{must(cuda::event::elapsed_ms(start, stop), "elapsed")} / reps;
  }
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The copy ceiling beside every case: one large device-to-device copy.
struct copy_baseline {
  std::size_t bytes;
  cuda::device_buffer src, dst;
  explicit copy_baseline(std::size_t n) : bytes(n), src(alloc(n)), dst(alloc(n)) {
    fill_random(src.data(), n, false, 7);
  }
  cudaError_t operator()(cudaStream_t s) const {
    return cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s);
  }
  [[nodiscard]] double moved() const { return 2.0 * static_cast<double>(bytes); }
};

// Times `subject` (moving `bytes` per call) against the copy, interleaved.
comparison measure(timer& t, copy_baseline& copy, const std::string& name,
                   const std::string& metric, double bytes,
                   const std::function<cudaError_t(cudaStream_t)>& subject, int rounds) {
  const double probe = t.ms_per_call(subject, 1);  // also the warm-up
  const int reps = std::clamp(static_cast<int>(5.0 / std::max(probe, 1e-3)), 3, 200);
  const double copy_probe = t.ms_per_call(std::cref(copy), 1);
  const int copy_reps = std::clamp(static_cast<int>(5.0 / std::max(copy_probe, 1e-3)), 3, 200);
  std::vector<double> ms, copy_ms;
  for (int r = 0; r < rounds; ++r) {
    ms.push_back(t.ms_per_call(subject, reps));
    copy_ms.push_back(t.ms_per_call(std::cref(copy), copy_reps));
  }
  const double m = median(ms);
  const double cm = median(copy_ms);
  comparison c{
      "gpu", name, metric, "B/s", "d2d_copy", bytes / (m * 1e-3), copy.moved() / (cm * 1e-3), {}};
  c.extra["us_per_call"] = m * 1e3;
  c.extra["GB_per_s"] = c.value / 1e9;
  c.extra["copy_GB_per_s"] = c.baseline_value / 1e9;
  return c;
}

struct attention_case {
  int rows, context, kv_heads, q_heads, head_dim, page_size;
};

// The one-pass kernel ("decode_attention_b<rows>") and the split-KV path
// with the workspace it asks for ("decode_attention_split_b<rows>"; the
// same kernel where the step does not split) on the same pages.
std::vector<comparison> bench_attention(timer& t, copy_baseline& copy, const attention_case& a,
                                        int rounds) {
  const int pages_per_row = (a.context + a.page_size - 1) / a.page_size;
  const int num_pages = a.rows * pages_per_row;
  const mstar::kernels::kv_geometry geometry{a.page_size, 1, a.kv_heads, a.head_dim,
                                             mstar::dtype::bfloat16};
  const std::size_t page_bytes = geometry.page_bytes();
  auto arena = alloc(page_bytes * num_pages);
  fill_random(arena.data(), page_bytes * num_pages, true, 11);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64{13});  // scattered pages
  std::vector<std::int32_t> qo(1, 0), indptr(1, 0), last, page, offset;
  const int last_len = a.context - (pages_per_row - 1) * a.page_size;
  for (int r = 0; r < a.rows; ++r) {
    qo.push_back(r + 1);
    indptr.push_back((r + 1) * pages_per_row);
    last.push_back(last_len);
    page.push_back(ids[static_cast<std::size_t>((r + 1) * pages_per_row - 1)]);
    offset.push_back(last_len - 1);
  }
  const auto d_qo = upload(qo), d_indptr = upload(indptr), d_ids = upload(ids),
             d_last = upload(last), d_page = upload(page), d_offset = upload(offset);
  const std::size_t q_elems = std::size_t{1} * a.rows * a.q_heads * a.head_dim;
  auto q = alloc(q_elems * sizeof(float));
  fill_random(q.data(), q_elems * sizeof(float), false, 17);
  auto out = alloc(q_elems * sizeof(float));
  auto span = [](const cuda::device_buffer& b, std::size_t n) {
    return std::span<const std::int32_t>{b.as<const std::int32_t>(), n};
  };
  const auto rows = static_cast<std::size_t>(a.rows);
  const mstar::kernels::paged_attention_params p{
      {arena.as<std::byte>(), geometry},
      0,
      {span(d_qo, rows + 1), span(d_indptr, rows + 1), span(d_ids, ids.size()), span(d_last, rows),
       span(d_page, rows), span(d_offset, rows)},
      q.as<const float>(),
      out.as<float>(),
      a.q_heads,
      0.0F};
  const double kv_bytes = 2.0 * a.rows * a.context * a.kv_heads * a.head_dim * 2.0;
  const std::string rows_name = std::to_string(a.rows);
  std::vector<comparison> results;
  results.push_back(measure(
      t, copy, "decode_attention_b" + rows_name, "kv_bytes_read_per_s", kv_bytes,
      [&](cudaStream_t s) { return cuda::paged_attention(p, s); }, rounds));
  const std::size_t ws_bytes = cuda::paged_attention_workspace_bytes(p);
  auto workspace = alloc(std::max<std::size_t>(ws_bytes, 16));
  results.push_back(measure(
      t, copy, "decode_attention_split_b" + rows_name, "kv_bytes_read_per_s", kv_bytes,
      [&](cudaStream_t s) { return cuda::paged_attention(p, workspace.data(), ws_bytes, s); },
      rounds));
  results.back().extra["splits"] = cuda::paged_attention_splits(p);
  results.back().extra["workspace_MiB"] = static_cast<double>(ws_bytes) / (1 << 20);
  for (auto& c : results) {
    c.extra["rows"] = a.rows;
    c.extra["context"] = a.context;
  }
  return results;
}

comparison bench_ssd(timer& t, copy_baseline& copy, int batch, int heads, int head_dim,
                     int state_size, int groups, int rounds) {
  const std::size_t state_elems = std::size_t{1} * batch * heads * head_dim * state_size;
  auto state = alloc(state_elems * sizeof(float));
  fill_random(state.data(), state_elems * sizeof(float), false, 19);
  const std::int64_t row = std::int64_t{heads} * head_dim + 2 * groups * state_size + heads;
  auto inputs = alloc(static_cast<std::size_t>(batch * row) * sizeof(float));
  fill_random(inputs.data(), static_cast<std::size_t>(batch * row) * sizeof(float), false, 23);
  auto params = alloc(3 * static_cast<std::size_t>(heads) * sizeof(float));
  fill_random(params.data(), 3 * static_cast<std::size_t>(heads) * sizeof(float), false, 29);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(batch));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64{31});
  const auto d_slots = upload(slots);
  auto y = alloc(static_cast<std::size_t>(batch) * heads * head_dim * sizeof(float));
  const float* in = inputs.as<const float>();
  const float* w = params.as<const float>();
  const std::int64_t xw = std::int64_t{heads} * head_dim;
  const mstar::kernels::ssd_update_params p{
      {w, w + heads, w + 2 * heads, heads, head_dim, state_size, groups, 0.0F, 100.0F},
      {in, in + xw + 2 * groups * state_size, in + xw, in + xw + groups * state_size, row, row,
       row},
      y.as<float>(),
      batch,
      state.as<float>(),
      {d_slots.as<const std::int32_t>(), slots.size()},
      {}};
  const double bytes = 2.0 * static_cast<double>(state_elems) * sizeof(float) +
                       static_cast<double>(batch) * (row + xw) * sizeof(float);
  auto c = measure(
      t, copy, "ssd_update_b" + std::to_string(batch), "state_bytes_per_s", bytes,
      [&](cudaStream_t s) { return cuda::ssd_update(p, s); }, rounds);
  c.extra["state_MiB"] = static_cast<double>(state_elems) * sizeof(float) / (1 << 20);
  return c;
}

std::vector<comparison> bench_pages(timer& t, copy_baseline& copy, int pages, int rounds) {
  // 64 KiB pages (16 tokens x 8 kv heads x 128 dims x bf16, K and V, one layer).
  const mstar::kernels::kv_geometry geometry{16, 1, 8, 128, mstar::dtype::bfloat16};
  const int arena_pages = pages * 2;
  auto arena = alloc(geometry.page_bytes() * arena_pages);
  fill_random(arena.data(), geometry.page_bytes() * arena_pages, false, 37);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(arena_pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64{41});
  ids.resize(static_cast<std::size_t>(pages));
  const auto d_ids = upload(ids);
  auto staging = alloc(geometry.page_bytes() * pages);
  const std::span<const std::int32_t> list{d_ids.as<const std::int32_t>(), ids.size()};
  const double bytes = 2.0 * static_cast<double>(geometry.page_bytes()) * pages;
  std::vector<comparison> out;
  out.push_back(measure(
      t, copy, "pack_pages_" + std::to_string(pages), "bytes_per_s", bytes,
      [&](cudaStream_t s) {
        return cuda::pack_pages(arena.as<std::byte>(), geometry, list, staging.as<std::byte>(), s);
      },
      rounds));
  out.push_back(measure(
      t, copy, "unpack_pages_" + std::to_string(pages), "bytes_per_s", bytes,
      [&](cudaStream_t s) {
        return cuda::unpack_pages(arena.as<std::byte>(), geometry, list, staging.as<std::byte>(),
                                  s);
      },
      rounds));
  return out;
}

// Qwen3.5's gated delta rule (kernels/cuda/delta_rule.hpp) on
// Qwen3.5-0.8B-like heads: 16 key heads, 32 value heads, 128 x 128 f32
// state per value head (2 MiB per sequence and layer). `rows` rows of
// `tokens` tokens each; the rows' slots shuffled in a pool of `rows`,
// resumed from their state. Bytes counted: the state read and written (a
// decode step's whole traffic but its 33 KiB of inputs per row); for a
// prefill the rate says little, its time per call is the figure.
// `path`: the sequential scan (the launcher without a workspace), the
// workspace overload at its default threshold, or every row chunked.
enum class rule_path { scan, chunked_default, chunked_always };

comparison bench_delta_rule(timer& t, copy_baseline& copy, int rows, int tokens, rule_path path,
                            int rounds) {
  constexpr int hk = 16, hv = 32, dk = 128, dv = 128;
  const std::size_t state_elems = std::size_t{1} * rows * hv * dv * dk;
  auto state = alloc(state_elems * sizeof(float));
  fill_random(state.data(), state_elems * sizeof(float), false, 43);
  const std::int64_t width = 2 * hk * dk + hv * dv;
  const std::size_t n_tokens = static_cast<std::size_t>(rows) * tokens;
  auto qkv = alloc(n_tokens * width * sizeof(float));
  fill_random(qkv.data(), n_tokens * width * sizeof(float), false, 47);
  auto ab = alloc(n_tokens * 2 * hv * sizeof(float));
  fill_random(ab.data(), n_tokens * 2 * hv * sizeof(float), false, 53);
  auto params = alloc(2 * hv * sizeof(float));
  fill_random(params.data(), 2 * hv * sizeof(float), false, 59);
  auto out = alloc(n_tokens * hv * dv * sizeof(float));
  std::vector<std::int32_t> cu(1, 0), slots(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r)
    cu.push_back(cu.back() + tokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64{61});
  const std::vector<std::uint8_t> has(static_cast<std::size_t>(rows), 1);
  const auto d_cu = upload(cu), d_slots = upload(slots), d_has = upload(has);
  const float* w = params.as<const float>();
  const float* abp = ab.as<const float>();
  const mstar::kernels::gated_delta_rule_params p{
      {w, w + hv, hk, hv, dk, dv, 0.0F},
      {qkv.as<const float>(), width, abp + hv, abp, 2 * hv},
      out.as<float>(),
      {d_cu.as<const std::int32_t>(), cu.size()},
      state.as<float>(),
      {d_slots.as<const std::int32_t>(), slots.size()},
      {d_has.as<const std::uint8_t>(), has.size()},
      tokens == 1};
  const double bytes = 2.0 * static_cast<double>(state_elems) * sizeof(float);
  const std::int32_t from = path == rule_path::chunked_always ? 1 : 0;
  const auto n_tok = static_cast<std::int64_t>(n_tokens);
  const std::size_t ws_bytes = cuda::gated_delta_rule_workspace_bytes(p.w, n_tok, rows, from);
  auto workspace = alloc(path == rule_path::scan ? 256 : ws_bytes);
  const cuda::gated_delta_workspace ws{workspace.data(), ws_bytes, n_tok, from};
  static constexpr const char* suffix[] = {"_scan", "", "_chunked"};
  const std::string name = tokens == 1
                               ? "delta_rule_decode_b" + std::to_string(rows)
                               : "delta_rule_prefill_" + std::to_string(rows) + "x" +
                                     std::to_string(tokens) + suffix[static_cast<int>(path)];
  auto c = measure(
      t, copy, name, "state_bytes_per_s", bytes,
      [&](cudaStream_t s) {
        return path == rule_path::scan ? cuda::gated_delta_rule_varlen(p, s)
                                       : cuda::gated_delta_rule_varlen(p, ws, s);
      },
      rounds);
  c.extra["rows"] = rows;
  c.extra["tokens_per_row"] = tokens;
  c.extra["state_MiB"] = static_cast<double>(state_elems) * sizeof(float) / (1 << 20);
  c.extra["tokens_per_s"] = static_cast<double>(n_tokens) / (c.extra["us_per_call"] * 1e-6);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "GPU bench: gated delta rule, decode attention, SSD update and page pack/unpack vs copy "
      "bandwidth"};
  bool as_json = false;
  int rounds = 7;
  attention_case attn{256, 2048, 8, 32, 128, 16};
  std::vector<int> attn_rows{1, 16, 64, 256};
  int ssd_batch = 256;
  int pages = 8192;
  std::size_t copy_mib = 1024;
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--rounds", rounds, "Interleaved rounds (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rows", attn_rows, "Decode rows, one attention case each")
      ->check(CLI::PositiveNumber);
  app.add_option("--context", attn.context, "Tokens per row")->check(CLI::PositiveNumber);
  app.add_option("--ssd-batch", ssd_batch, "SSD update rows")->check(CLI::PositiveNumber);
  app.add_option("--pages", pages, "Pages packed / unpacked")->check(CLI::PositiveNumber);
  app.add_option("--copy-mib", copy_mib, "Copy baseline size")->check(CLI::PositiveNumber);
  bool delta_only = false;
  std::vector<int> delta_batches{1, 16, 64};
  int prefill_tokens = 4096;
  app.add_flag("--delta-rule-only", delta_only, "Only the gated delta rule cases");
  app.add_option("--delta-batches", delta_batches, "Decode rows, one delta-rule case each")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill-tokens", prefill_tokens, "Tokens of the delta-rule prefill row")
      ->check(CLI::PositiveNumber);
  std::vector<int> threshold_lengths{32, 64, 128, 192, 256, 512};
  app.add_option("--threshold-lengths", threshold_lengths,
                 "One-row prefill lengths timed chunked and scanned (the threshold)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const auto report = mstar::kernels::query_cuda_devices();
  if (report.devices.empty()) {
    // MSTAR_REQUIRE_GPU (the device scripts set it): a missing GPU is a failure.
    const bool fail = mstar::kernels::gpu_required();
    std::fprintf(stderr, "gpu bench: %s, no CUDA device: %s\n",
                 fail ? "failed (MSTAR_REQUIRE_GPU is set)" : "skipped", report.reason.c_str());
    return fail ? 1 : 0;
  }
  std::fprintf(stderr, "gpu bench: %s, %d SMs\n", report.devices[0].name.c_str(),
               report.devices[0].multiprocessors);
  timer t;
  copy_baseline copy{copy_mib << 20U};
  std::vector<comparison> results;
  for (const int b : delta_batches)
    results.push_back(bench_delta_rule(t, copy, b, 1, rule_path::scan, rounds));
  for (const int rows : {1, 4}) {
    for (const auto path : {rule_path::chunked_default, rule_path::scan})
      results.push_back(bench_delta_rule(t, copy, rows, prefill_tokens, path, rounds));
  }
  // Where chunks start to pay: one row of each length both ways.
  for (const int len : threshold_lengths) {
    for (const auto path : {rule_path::chunked_always, rule_path::scan})
      results.push_back(bench_delta_rule(t, copy, 1, len, path, rounds));
  }
  if (delta_only) {
    mstar::bench::report(results, as_json);
    return 0;
  }
  for (const int rows : attn_rows) {
    attn.rows = rows;
    for (auto& c : bench_attention(t, copy, attn, rounds))
      results.push_back(std::move(c));
  }
  results.push_back(bench_ssd(t, copy, ssd_batch, 128, 64, 128, 8, rounds));
  for (auto& c : bench_pages(t, copy, pages, rounds))
    results.push_back(std::move(c));
  mstar::bench::report(results, as_json);
  return 0;
}
