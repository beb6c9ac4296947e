// KV pool step cost: a 256-row decode step over 2,048-token contexts and a
// prefill step served mostly from cached pages (ingest, probe, admit, plan,
// commit, remove). Baselines measured in the same run: copying the decode
// plan's page table with memcpy (the least any plan must move), and raw
// OpenSSL SHA-256 rooting the same page keys (the least a probe must hash).
#include <CLI/CLI.hpp>
#include <cstring>
#include <memory>
#include <openssl/evp.h>

#include "bench/harness.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/step/step_runner.hpp"

namespace {

using namespace mstar::resources;

kv_pool_config bench_config(std::int64_t pages, bool prefix_cache) {
  kv_pool_config c;
  c.geometry.page_size = 16;
  c.max_num_pages = pages;
  c.geometry.num_layers = 1;
  c.geometry.num_kv_heads = 1;
  c.geometry.head_dim = 8;
  c.geometry.dtype = mstar::dtype::float32;
  c.prefix_cache = prefix_cache;
  return c;
}

void must(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "kv_step bench: %s failed\n", what);
    std::exit(1);
  }
}

void run_step(kv_pool& pool, const kv_step& step) {
  step_context ctx;
  must(pool.admit(step, ctx).ok, "admit");
  must(pool.plan(step, ctx).has_value(), "plan");
  must(pool.commit(step, ctx).has_value(), "commit");
}

std::vector<token_id> prompt_ids(int n, int salt) {
  std::vector<token_id> ids(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    ids[static_cast<std::size_t>(i)] = static_cast<token_id>(i < 1792 ? i : i * 7 + salt);
  return ids;
}

kv_prefix_seed seed_of(const std::vector<token_id>& ids) {
  std::vector<std::vector<token_id>> pages;
  for (std::size_t i = 0; i < ids.size(); i += 16)
    pages.emplace_back(ids.begin() + i, ids.begin() + i + 16);
  kv_prefix_seed seed;
  seed.keys = chain(pages).value();
  return seed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kv_step benchmark: KV pool decode and prefix-hit prefill steps (admit+plan+commit)"};
  bool as_json = false;
  int rows = 256, context = 2048, rounds = 15, steps = 20, prefill_rows = 16;
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--rows", rows, "Decode rows per step")->check(CLI::PositiveNumber);
  app.add_option("--context", context, "Tokens of context per decode row")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "Interleaved rounds (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "Steps per round")->check(CLI::PositiveNumber);
  app.add_option("--prefill-rows", prefill_rows, "Requests per prefill step")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  std::vector<mstar::bench::comparison> results;

  {  // decode
    const std::int64_t per_row = (context + (rounds + 1) * steps + 15) / 16 + 1;
    auto pool = kv_pool::make("kv", bench_config(rows * per_row + 2, false)).value();
    kv_step prefill, decode;
    for (int r = 0; r < rows; ++r) {
      prefill.segments.push_back({"r" + std::to_string(r), "main", context});
      decode.segments.push_back({"r" + std::to_string(r), "main", 1});
    }
    run_step(*pool, prefill);
    std::vector<std::int32_t> table(static_cast<std::size_t>(rows * per_row)), copy(table.size());
    const auto [step_rate, copy_rate] = mstar::bench::interleaved_rates(
        [&] {
          for (int s = 0; s < steps; ++s)
            run_step(*pool, decode);
        },
        [&] {
          for (int s = 0; s < steps; ++s) {
            std::memcpy(copy.data(), table.data(), table.size() * 4);
            table[static_cast<std::size_t>(s)] += copy[0];
          }
        },
        steps, rounds);
    mstar::bench::comparison c{"kv_step",           fmt::format("decode_{}x{}", rows, context),
                               "steps_per_s",       "1/s",
                               "memcpy_page_table", step_rate,
                               copy_rate,           {}};
    c.extra = {{"us_per_step", 1e6 / step_rate}, {"ns_per_row", 1e9 / step_rate / rows}};
    results.push_back(c);
    must(pool->check_invariants().has_value(), "decode invariants");
  }

  {  // prefill with prefix hits: 1,792 of 2,048 tokens cached per request
    auto cached = kv_pool::make("kv", bench_config(4096, true), "bench-model").value();
    const auto warm = prompt_ids(2048, -1);
    cached->ingest_request("warm", {{"main", seed_of(warm)}});
    run_step(*cached, [&] {
      kv_step s;
      s.segments = {{"warm", "main", 2048}};
      return s;
    }());
    std::vector<kv_prefix_seed> seeds;
    for (int r = 0; r < prefill_rows; ++r)
      seeds.push_back(seed_of(prompt_ids(2048, r)));
    int generation = 0;
    auto cycle = [&] {
      kv_step s;
      std::vector<std::string> rids;
      for (int r = 0; r < prefill_rows; ++r) {
        rids.push_back(fmt::format("g{}r{}", generation, r));
        cached->ingest_request(rids.back(), {{"main", seeds[static_cast<std::size_t>(r)]}});
        const std::int64_t hit = cached->resolve_cached_prefix(rids.back()).value_or(0);
        s.segments.push_back({rids.back(), "main", 2048 - hit});
      }
      run_step(*cached, s);
      for (const auto& rid : rids)
        cached->remove_request(rid);
      ++generation;
    };
    // The floor of this step's work: rooting every page key of every
    // request (SHA-256 over root and key), with raw OpenSSL.
    std::vector<std::uint8_t> pre(4 + 32 + 4 + 32);
    const auto& root = cached->root();
    pre[0] = 32;
    std::memcpy(pre.data() + 4, root.data(), 32);
    pre[36] = 32;
    EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    EVP_MD_CTX* mdctx = EVP_MD_CTX_new();
    digest256 sink{};
    auto rooting = [&] {
      for (const auto& seed : seeds) {
        for (const auto& key : seed.keys) {
          std::memcpy(pre.data() + 40, key.data(), 32);
          unsigned int len = 0;
          EVP_DigestInit_ex2(mdctx, md, nullptr);
          EVP_DigestUpdate(mdctx, pre.data(), pre.size());
          EVP_DigestFinal_ex(mdctx, sink.data(), &len);
        }
      }
    };
    must(
        fingerprint(root, seeds[0].keys[0]) ==
            [&] {
              std::memcpy(pre.data() + 40, seeds[0].keys[0].data(), 32);
              digest256 d{};
              unsigned int len = 0;
              EVP_DigestInit_ex2(mdctx, md, nullptr);
              EVP_DigestUpdate(mdctx, pre.data(), pre.size());
              EVP_DigestFinal_ex(mdctx, d.data(), &len);
              return d;
            }(),
        "rooting baseline reproduces the pool's rooted keys");
    const auto [hit_rate, hash_rate] = mstar::bench::interleaved_rates(
        [&] {
          for (int s = 0; s < steps; ++s)
            cycle();
        },
        [&] {
          for (int s = 0; s < steps; ++s)
            rooting();
        },
        steps, rounds);
    EVP_MD_CTX_free(mdctx);
    EVP_MD_free(md);
    mstar::bench::comparison c{"kv_step",
                               fmt::format("prefill_{}x2048_hit1792", prefill_rows),
                               "steps_per_s",
                               "1/s",
                               "openssl_rooting_sha256",
                               hit_rate,
                               hash_rate,
                               {}};
    c.extra = {{"us_per_step", 1e6 / hit_rate}, {"ns_per_row", 1e9 / hit_rate / prefill_rows}};
    results.push_back(c);
    must(cached->check_invariants().has_value(), "prefill invariants");
  }
  mstar::bench::report(results, as_json);
  return 0;
}
