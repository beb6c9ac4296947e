// GPU memory-bound kernels against the device's own copy bandwidth, measured
// in the same run: cudaMemcpy device-to-device (bytes read + written per
// second) is the ceiling; Qwen3.5's gated delta rule (decode: state read +
// written; a 4,096-token prefill, timed), decode paged attention one-pass and split-KV (K/V
// bytes read; the split's partials are not counted), the SSD
// one-token update (state read + written) and page pack/unpack (read +
// written) report bytes per second and their ratio to it. Timed with CUDA
// events, subject and copy interleaved round by round, medians reported.
// --suite kernels17 runs instead the shapes of bench/baselines_h200.py:
// attention decode and causal prefill, the SSD scan and update and the causal
// conv on Nemotron-H Mamba-2 layers (bench/gpu_bench_cases.hpp).
// --ssd-update-variants: the SSD decode step in each of its launch shapes
// (kernels/cuda/ssd_update.cu's table) on both Mamba-2 shapes.
// --suite gemm: cuBLAS bf16 GEMMs (f32 accumulation) on Nemotron-H 0.56B's and
// 8B's projections at --gemm-m tokens, TFLOP/s (bench/gpu_bench_gemm.cpp).
// --suite gemv: the one-row GEMV, plain and folded, on the same projections
// at each --gemv-variants launch shape (bench/gpu_bench_gemv.cpp).
// --suite argmax: greedy sampling's argmax at --argmax-rows rows.
// --suite small: the gated RMS norm and add_rms_norm in each of their forms
// at Nemotron-H's widths and --small-rows rows, hot and cold operands
// (bench/gpu_bench_small.cpp).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "bench/gpu_bench_cases.hpp"
#include "bench/gpu_bench_support.hpp"
#include "kernels/cuda/gemv_shape.hpp"
#include "kernels/device.hpp"

namespace {

namespace cuda = mstar::kernels::cuda;
namespace gpu = mstar::bench::gpu;
using gpu::alloc;
using gpu::copy_baseline;
using gpu::fill_random;
using gpu::measure;
using gpu::timer;
using gpu::upload;
using mstar::bench::comparison;

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

// Greedy sampling's argmax (kernels/cuda/sampling.hpp) over `rows` rows of
// `vocab` random f32 logits ("argmax_b<rows>"): below 64 rows a cluster of
// blocks a row, a block a row above. Bytes counted: the logits read once;
// back to back a few rows stay in L2, as a decode step's fresh logits do.
comparison bench_argmax(timer& t, copy_baseline& copy, int rows, std::int64_t vocab, int rounds) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(vocab);
  auto logits = alloc(n * sizeof(float));
  fill_random(logits.data(), n * sizeof(float), false, 43);
  auto out = alloc(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
  const auto v = mstar::kernels::contiguous<const float, 2>(logits.as<const float>(),
                                                            {std::int64_t{rows}, vocab});
  return measure(
      t, copy, "argmax_b" + std::to_string(rows), "bytes_per_s",
      static_cast<double>(n * sizeof(float)),
      [&](cudaStream_t s) { return cuda::argmax(v, out.as<std::int32_t>(), s); }, rounds);
}

// Qwen3.5's gated delta rule (kernels/cuda/delta_rule.hpp) on
// Qwen3.5-0.8B-like heads: 16 key heads, 32 value heads, 128 x 128 f32
// state per value head (2 MiB per sequence and layer). `rows` rows of
// `tokens` tokens each; the rows' slots shuffled in a pool of `rows`,
// resumed from their state. Bytes counted: the state read and written (a
// decode step's whole traffic but its 33 KiB of inputs per row); for a
// prefill the rate says little, its time per call is the figure.
struct rule_inputs {
  static constexpr int hk = 16, hv = 32, dk = 128, dv = 128;
  int rows, tokens;
  std::size_t state_elems, n_tokens;
  cuda::device_buffer state, qkv, ab, params, out, cu, slots, has;
  mstar::kernels::gated_delta_rule_params p;

  rule_inputs(int r, int t)
      : rows(r),
        tokens(t),
        state_elems(std::size_t{1} * r * hv * dv * dk),
        n_tokens(static_cast<std::size_t>(r) * t),
        state(alloc(state_elems * sizeof(float))),
        qkv(alloc(n_tokens * width() * sizeof(float))),
        ab(alloc(n_tokens * 2 * hv * sizeof(float))),
        params(alloc(2 * hv * sizeof(float))),
        out(alloc(n_tokens * hv * dv * sizeof(float))) {
    fill_random(state.data(), state_elems * sizeof(float), false, 43);
    fill_random(qkv.data(), n_tokens * width() * sizeof(float), false, 47);
    fill_random(ab.data(), n_tokens * 2 * hv * sizeof(float), false, 53);
    fill_random(params.data(), 2 * hv * sizeof(float), false, 59);
    std::vector<std::int32_t> cu_host(1, 0), slots_host(static_cast<std::size_t>(rows));
    for (int i = 0; i < rows; ++i)
      cu_host.push_back(cu_host.back() + tokens);
    std::iota(slots_host.begin(), slots_host.end(), 0);
    std::shuffle(slots_host.begin(), slots_host.end(), std::mt19937_64{61});
    const std::vector<std::uint8_t> has_host(static_cast<std::size_t>(rows), 1);
    cu = upload(cu_host);
    slots = upload(slots_host);
    has = upload(has_host);
    const float* w = params.as<const float>();
    const float* abp = ab.as<const float>();
    p = {{w, w + hv, hk, hv, dk, dv, 0.0F},
         {qkv.as<const float>(), width(), abp + hv, abp, 2 * hv},
         out.as<float>(),
         {cu.as<const std::int32_t>(), cu_host.size()},
         state.as<float>(),
         {slots.as<const std::int32_t>(), slots_host.size()},
         {has.as<const std::uint8_t>(), has_host.size()},
         tokens == 1};
  }
  static constexpr std::int64_t width() { return 2 * hk * dk + hv * dv; }
  [[nodiscard]] double bytes() const {
    return 2.0 * static_cast<double>(state_elems) * sizeof(float);
  }

  void describe(comparison& c) const {
    c.extra["rows"] = rows;
    c.extra["tokens_per_row"] = tokens;
    c.extra["state_MiB"] = static_cast<double>(state_elems) * sizeof(float) / (1 << 20);
    c.extra["tokens_per_s"] = static_cast<double>(n_tokens) / (c.extra["us_per_call"] * 1e-6);
  }
};

// `path`: the sequential scan (the launcher without a workspace), the
// workspace overload at its default threshold, or every row chunked.
enum class rule_path { scan, chunked_default, chunked_always };

comparison bench_delta_rule(timer& t, copy_baseline& copy, int rows, int tokens, rule_path path,
                            int rounds) {
  const rule_inputs in{rows, tokens};
  const std::int32_t from = path == rule_path::chunked_always ? 1 : 0;
  const auto n_tok = static_cast<std::int64_t>(in.n_tokens);
  const std::size_t ws_bytes = cuda::gated_delta_rule_workspace_bytes(in.p.w, n_tok, rows, from);
  auto workspace = alloc(path == rule_path::scan ? 256 : ws_bytes);
  const cuda::gated_delta_workspace ws{workspace.data(), ws_bytes, n_tok, from};
  static constexpr const char* suffix[] = {"_scan", "", "_chunked"};
  const std::string name = tokens == 1
                               ? "delta_rule_decode_b" + std::to_string(rows)
                               : "delta_rule_prefill_" + std::to_string(rows) + "x" +
                                     std::to_string(tokens) + suffix[static_cast<int>(path)];
  auto c = measure(
      t, copy, name, "state_bytes_per_s", in.bytes(),
      [&](cudaStream_t s) {
        return path == rule_path::scan ? cuda::gated_delta_rule_varlen(in.p, s)
                                       : cuda::gated_delta_rule_varlen(in.p, ws, s);
      },
      rounds);
  in.describe(c);
  return c;
}

// A decode step of `rows` rows in each of `variants` (decode launch shapes,
// kernels/cuda/delta_rule.cu's table; -1 the choice by row count), one
// after another on the same inputs and state: "decode_variant" in each.
std::vector<comparison> bench_delta_decode_variants(timer& t, copy_baseline& copy, int rows,
                                                    const std::vector<int>& variants, int rounds) {
  const rule_inputs in{rows, 1};
  std::vector<comparison> out;
  for (const int v : variants) {
    auto c = measure(
        t, copy, "delta_rule_decode_b" + std::to_string(rows), "state_bytes_per_s", in.bytes(),
        [&](cudaStream_t s) { return cuda::gated_delta_rule_decode_variant(in.p, v, s); }, rounds);
    in.describe(c);
    c.extra["decode_variant"] = v;
    out.push_back(std::move(c));
  }
  return out;
}

// Nemotron-H ~0.6B and 8B Mamba-2 layers: heads x 64, state 128, 8 groups, conv width 4.
std::vector<gpu::mamba_shape> mamba_shapes() {
  return {{"h64", 64, 64, 128, 8, 4}, {"h128", 128, 64, 128, 8, 4}};
}

// The SSD decode step in each of `variants` (kernels/cuda/ssd_update.cu's
// table, the default choice first) on both Mamba-2 shapes at each batch.
std::vector<comparison> bench_ssd_update_variants(timer& t, copy_baseline& copy,
                                                  const std::vector<int>& batches,
                                                  std::vector<int> variants, int rounds) {
  variants.insert(variants.begin(), -1);
  std::vector<comparison> out;
  for (const auto& m : mamba_shapes()) {
    for (const int b : batches) {
      for (auto& c : gpu::bench_ssd_update_variants(t, copy, m, b, variants, rounds))
        out.push_back(std::move(c));
    }
  }
  return out;
}

// The shapes of bench/baselines_h200.py (issue 17): decode attention at
// `--rows`, causal prefill at `--prefill-rows` x `--prefill-context`, and on
// each Nemotron-H Mamba-2 shape the SSD scan and conv over `--prefill-rows`
// x `--prefill-context` tokens, the SSD update and conv step at
// `--mamba-batches` rows. `parts`: which of attention, ssd, conv.
struct kernels17_options {
  std::vector<int> attn_rows, prefill_rows, mamba_batches;
  int prefill_context = 2048;
  bool attention = true, ssd = true, conv = true;
  bool attn_variants = false;  // every attention walk and merge (--attn-variants)
};

void run_kernels17(timer& t, copy_baseline& copy, const kernels17_options& o,
                   gpu::attention_case attn, int rounds, std::vector<comparison>& results) {
  auto add = [&results](std::vector<comparison> cs) {
    for (auto& c : cs)
      results.push_back(std::move(c));
  };
  if (o.attention) {
    for (const int rows : o.attn_rows) {
      attn.rows = rows;
      add(gpu::bench_decode_attention(t, copy, attn, rounds, o.attn_variants));
    }
    attn.context = o.prefill_context;
    for (const int rows : o.prefill_rows) {
      attn.rows = rows;
      add(gpu::bench_prefill_attention(t, copy, attn, rounds));
    }
  }
  for (const auto& m : mamba_shapes()) {
    for (const int rows : o.prefill_rows) {
      if (o.ssd)
        add(gpu::bench_ssd_scan(t, copy, m, rows, o.prefill_context, rounds));
      if (o.conv) {
        results.push_back(gpu::bench_conv(t, copy, m, rows, o.prefill_context, rounds));
        results.push_back(gpu::bench_gated_norm(t, copy, m, rows, o.prefill_context, rounds));
      }
    }
    for (const int b : o.mamba_batches) {
      if (o.ssd)
        results.push_back(gpu::bench_ssd_update(t, copy, m, b, "ssd_update_" + m.label, rounds));
      if (o.conv)
        results.push_back(gpu::bench_conv(t, copy, m, b, 1, rounds));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "GPU bench: gated delta rule, attention, SSD, conv and page pack/unpack vs copy "
      "bandwidth"};
  bool as_json = false;
  int rounds = 7;
  gpu::attention_case attn{256, 2048, 8, 32, 128, 16};
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
  std::string suite = "all";
  app.add_option("--suite", suite,
                 "all (delta rule, decode attention, SSD update, pages), delta-rule, or the "
                 "shapes of bench/baselines_h200.py: kernels17 (attention, ssd and conv), "
                 "attention, ssd, conv; gemm (cuBLAS bf16 on Nemotron-H's projections); "
                 "gemv (the one-row GEMV on them, plain and folded, at --gemv-variants); "
                 "argmax (greedy sampling over --argmax-rows x --argmax-vocab); small (the "
                 "gated RMS norm and add_rms_norm in each form, hot and cold)")
      ->check(CLI::IsMember({"all", "delta-rule", "kernels17", "attention", "ssd", "conv", "gemm",
                             "gemv", "argmax", "small"}));
  gpu::small_options small;
  app.add_option("--small-rows", small.rows, "small: rows, one case each")
      ->check(CLI::PositiveNumber);
  app.add_option("--small-gated-forms", small.gated_forms,
                 "small: gated norm forms (math.hpp's gated_rms_norm_variant table)")
      ->check(CLI::Range(0, cuda::gated_rms_norm_variants - 1));
  app.add_option("--small-add-forms", small.add_forms,
                 "small: add_rms_norm forms (math.hpp's add_rms_norm_variant table)")
      ->check(CLI::Range(1, cuda::add_rms_norm_variants - 1));
  app.add_option("--cold-mib", small.cold_mib,
                 "small, gemv --gemv-cold: bytes the cold operands' copies pass (MiB; 0: twice "
                 "the L2)");
  std::vector<int> gemv_variants;
  app.add_option("--gemv-variants", gemv_variants,
                 "gemv: launch shapes (kernels/cuda/gemv_shape.hpp's table), -1 the default; "
                 "default: -1 then every entry")
      ->check(CLI::Range(-1, cuda::gemv_variants - 1));
  bool gemv_cold = false;
  app.add_flag("--gemv-cold", gemv_cold,
               "gemv: each call's weight out of L2 (copies in turn past --cold-mib), as in a "
               "model's step");
  std::vector<int> argmax_rows{1, 2, 8, 32, 63, 64, 128};
  app.add_option("--argmax-rows", argmax_rows, "argmax: rows, one case each")
      ->check(CLI::PositiveNumber);
  std::int64_t argmax_vocab = 131072;  // Nemotron-H's vocabulary
  app.add_option("--argmax-vocab", argmax_vocab, "argmax: logits a row")
      ->check(CLI::PositiveNumber);
  std::vector<std::int64_t> gemm_m{1, 64, 256, 2048, 16384};
  app.add_option("--gemm-m", gemm_m, "gemm: tokens (rows of the activations), one case each")
      ->check(CLI::PositiveNumber);
  kernels17_options k17{{}, {1, 8}, {1, 64, 256}};
  app.add_option("--prefill-rows", k17.prefill_rows,
                 "kernels17: prompts per prefill case (attention, SSD scan, conv)")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill-context", k17.prefill_context, "kernels17: tokens per prompt")
      ->check(CLI::PositiveNumber);
  app.add_option("--mamba-batches", k17.mamba_batches,
                 "kernels17: decode rows of the SSD update and conv step")
      ->check(CLI::PositiveNumber);
  bool delta_only = false;
  std::vector<int> delta_batches{1, 16, 64};
  int prefill_tokens = 4096;
  app.add_flag("--delta-rule-only", delta_only, "Only the gated delta rule cases");
  bool delta_decode_only = false;
  app.add_flag("--delta-decode-only", delta_decode_only,
               "Only the gated delta rule's decode cases (--delta-batches)");
  std::vector<int> decode_variants;
  app.add_option("--delta-decode-variants", decode_variants,
                 "Decode launch shapes (kernels/cuda/delta_rule.cu's table) each timed after the "
                 "default choice at every --delta-batches size (implies --delta-decode-only); "
                 "\"decode_variant\" in each result, -1 the default")
      ->check(CLI::Range(0, cuda::gated_delta_decode_variants - 1));
  bool all_decode_variants = false;
  app.add_flag("--delta-decode-all-variants", all_decode_variants,
               "--delta-decode-variants with every entry of the table");
  app.add_option("--delta-batches", delta_batches, "Decode rows, one delta-rule case each")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefill-tokens", prefill_tokens, "Tokens of the delta-rule prefill row")
      ->check(CLI::PositiveNumber);
  std::vector<int> threshold_lengths{32, 64, 128, 192, 256, 512};
  app.add_option("--threshold-lengths", threshold_lengths,
                 "One-row prefill lengths timed chunked and scanned (the threshold)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--attn-variants", k17.attn_variants,
               "Decode attention: also every K/V walk (regs, cp4, cp2, mma, rows, rows_mma) and, "
               "where the step "
               "splits, every walk and split merge (mwarp, mblock), forced in turn; the "
               "variant is in the case name");
  std::vector<int> update_variants;
  app.add_option("--ssd-update-variants", update_variants,
                 "SSD update launch shapes (kernels/cuda/ssd_update.cu's table) each timed after "
                 "the default choice on both Mamba-2 shapes (h64, h128) at every "
                 "--ssd-update-batches size, nothing else; \"update_variant\" in each result, "
                 "-1 the default")
      ->check(CLI::Range(0, cuda::ssd_update_variants - 1));
  bool all_update_variants = false;
  app.add_flag("--ssd-update-all-variants", all_update_variants,
               "--ssd-update-variants with every entry of the table");
  std::vector<int> update_batches{1, 64, 256};
  app.add_option("--ssd-update-batches", update_batches,
                 "Decode rows of the --ssd-update-variants cases")
      ->check(CLI::PositiveNumber);
  bool graphs = false;
  app.add_flag("--graphs", graphs,
               "Time each case's calls captured in one CUDA graph (the device's time alone, "
               "as in a captured decode step), not launched one by one");
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
  t.graphs = graphs;
  copy_baseline copy{copy_mib << 20U};
  std::vector<comparison> results;
  if (suite == "gemm") {
    for (auto g : gpu::nemotron_h_projections()) {
      for (const auto m : gemm_m) {
        g.m = m;
        results.push_back(gpu::bench_gemm(t, copy, g, rounds));
        if (m <= 8)  // linear_bf16 takes its GEMV at one row, cuBLAS above
          results.push_back(gpu::bench_gemm(t, copy, g, rounds, true));
      }
    }
    mstar::bench::report(results, as_json);
    return 0;
  }
  if (suite == "gemv") {
    if (gemv_variants.empty()) {
      gemv_variants.resize(cuda::gemv_variants + 1);
      std::iota(gemv_variants.begin(), gemv_variants.end(), -1);
    }
    results = gpu::bench_gemv_shapes(t, copy, gemv_variants, rounds,
                                     gemv_cold ? gpu::cold_bytes_of(small.cold_mib) : 0);
    mstar::bench::report(results, as_json);
    return 0;
  }
  if (suite == "small") {
    results = gpu::bench_small(t, copy, small, rounds);
    mstar::bench::report(results, as_json);
    return 0;
  }
  if (suite == "argmax") {
    for (const int rows : argmax_rows)
      results.push_back(bench_argmax(t, copy, rows, argmax_vocab, rounds));
    mstar::bench::report(results, as_json);
    return 0;
  }
  if (all_update_variants) {
    update_variants.resize(cuda::ssd_update_variants);
    std::iota(update_variants.begin(), update_variants.end(), 0);
  }
  if (!update_variants.empty()) {
    results = bench_ssd_update_variants(t, copy, update_batches, update_variants, rounds);
    mstar::bench::report(results, as_json);
    return 0;
  }
  if (suite != "all" && suite != "delta-rule") {
    k17.attn_rows = attn_rows;
    k17.attention = suite == "kernels17" || suite == "attention";
    k17.ssd = suite == "kernels17" || suite == "ssd";
    k17.conv = suite == "kernels17" || suite == "conv";
    run_kernels17(t, copy, k17, attn, rounds, results);
    mstar::bench::report(results, as_json);
    return 0;
  }
  if (all_decode_variants) {
    decode_variants.resize(cuda::gated_delta_decode_variants);
    std::iota(decode_variants.begin(), decode_variants.end(), 0);
  }
  if (!decode_variants.empty()) {
    decode_variants.insert(decode_variants.begin(), -1);
    for (const int b : delta_batches) {
      for (auto& c : bench_delta_decode_variants(t, copy, b, decode_variants, rounds))
        results.push_back(std::move(c));
    }
    mstar::bench::report(results, as_json);
    return 0;
  }
  for (const int b : delta_batches)
    results.push_back(bench_delta_rule(t, copy, b, 1, rule_path::scan, rounds));
  if (delta_decode_only) {
    mstar::bench::report(results, as_json);
    return 0;
  }
  for (const int rows : {1, 4}) {
    for (const auto path : {rule_path::chunked_default, rule_path::scan})
      results.push_back(bench_delta_rule(t, copy, rows, prefill_tokens, path, rounds));
  }
  // Where chunks start to pay: one row of each length both ways.
  for (const int len : threshold_lengths) {
    for (const auto path : {rule_path::chunked_always, rule_path::scan})
      results.push_back(bench_delta_rule(t, copy, 1, len, path, rounds));
  }
  if (delta_only || suite == "delta-rule") {
    mstar::bench::report(results, as_json);
    return 0;
  }
  for (const int rows : attn_rows) {
    attn.rows = rows;
    for (auto& c : gpu::bench_decode_attention(t, copy, attn, rounds, k17.attn_variants))
      results.push_back(std::move(c));
  }
  results.push_back(gpu::bench_ssd_update(t, copy, {"h128", 128, 64, 128, 8, 4}, ssd_batch,
                                          "ssd_update", rounds));
  for (auto& c : bench_pages(t, copy, pages, rounds))
    results.push_back(std::move(c));
  mstar::bench::report(results, as_json);
  return 0;
}
