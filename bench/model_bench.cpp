// Model throughput on the CPU: prefill and decode tokens/s of a Nemotron-H
// through the engine (scheduler, pools, model), next to the BLAS floor: the same GEMMs (every
// linear layer of the step, with the step's token count) run alone with cblas_sgemm in the same
// run.
#include <CLI/CLI.hpp>
#include <cblas.h>
#include <random>

#include "bench/harness.hpp"
#include "engine/local_engine.hpp"
#include "models/nemotron_h.hpp"

namespace {

using namespace mstar::models;
using mstar::engine::local_engine;
using mstar::engine::request_spec;

nemotron_h_config config_100m() {
  nemotron_h_config c;
  c.vocab_size = 32000;
  c.hidden_size = 768;
  c.num_attention_heads = 12;
  c.num_key_value_heads = 4;
  c.head_dim = 64;
  c.intermediate_size = 2048;
  c.mamba_num_heads = 24;
  c.mamba_head_dim = 64;
  c.ssm_state_size = 64;
  c.n_groups = 2;
  c.conv_kernel = 4;
  c.chunk_size = 128;
  for (const char ch : std::string{"M-M*M-M-M-M*M-M-"}) {
    c.layers.push_back(ch == 'M'   ? layer_kind::mamba2
                       : ch == '*' ? layer_kind::attention
                                   : layer_kind::mlp);
  }
  return c;
}

// The GEMMs of one step over `tokens` tokens whose `rows` rows need logits,
// each with its own weight matrix (as the model streams distinct weights per
// layer, so the floor gets no unfair cache reuse).
struct blas_floor {
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;  // [N, K] per linear
  std::int64_t hidden = 0, vocab = 0;
  std::vector<std::vector<float>> weights;
  std::vector<float> a, c;
  void run(std::int64_t tokens, std::int64_t rows) {
    if (weights.empty()) {
      for (const auto& [n, k] : shapes)
        weights.emplace_back(static_cast<std::size_t>(n * k), 0.01F);
      weights.emplace_back(static_cast<std::size_t>(vocab * hidden), 0.01F);
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      gemm(tokens, shapes[i].first, shapes[i].second, weights[i]);
    }
    gemm(rows, vocab, hidden, weights.back());
  }
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::vector<float>& w) {
    const auto need = [](std::vector<float>& v, std::int64_t size) {
      if (static_cast<std::int64_t>(v.size()) < size)
        v.assign(static_cast<std::size_t>(size), 0.01F);
    };
    need(a, m * k);
    need(c, m * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0F, a.data(), static_cast<int>(k), w.data(),
                static_cast<int>(k), 0.0F, c.data(), static_cast<int>(n));
  }
};

std::vector<request_spec> prompts(int count, int length, int new_tokens, std::int64_t vocab) {
  std::mt19937 rng{7};
  std::vector<request_spec> out(static_cast<std::size_t>(count));
  for (auto& r : out) {
    for (int i = 0; i < length; ++i)
      r.prompt.push_back(static_cast<mstar::resources::token_id>(3 + rng() % (vocab - 3)));
    r.stop.max_tokens = new_tokens;
    r.stop.ignore_eos = true;
  }
  return out;
}

// Runs `reqs` to completion; a request that failed, ended other than by its
// length or drew other than max_tokens tokens fails the bench (exit 1): its
// rate would measure work that was not done.
void generate(local_engine& engine, const std::vector<request_spec>& reqs) {
  auto done = mstar::engine::run_to_completion(engine, reqs);
  if (!done) {
    std::fprintf(stderr, "model bench: %s\n", done.error().message().c_str());
    std::exit(1);
  }
  if (done->size() != reqs.size()) {
    std::fprintf(stderr, "model bench: %zu requests gave %zu completions\n", reqs.size(),
                 done->size());
    std::exit(1);
  }
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& c = (*done)[i];
    const auto want = static_cast<std::size_t>(reqs[i].stop.max_tokens);
    const bool ok = c.finished.size() == 1 &&
                    c.finished[0] == mstar::engine::finish_reason::length && c.tokens.size() == 1 &&
                    c.tokens[0].size() == want;
    if (!ok) {
      std::fprintf(stderr, "model bench: request %zu ended %s with %zu tokens (want %zu)%s%s\n", i,
                   c.finished.empty() ? "without a reason" : to_string(c.finished[0]),
                   c.tokens.empty() ? std::size_t{0} : c.tokens[0].size(), want,
                   c.errors.empty() ? "" : ": ", c.errors.empty() ? "" : c.errors[0].c_str());
      std::exit(1);
    }
  }
}

// An engine over `model` that runs a whole batch's prompts in one step, as
// the floor's GEMMs do.
std::unique_ptr<local_engine> engine_of(std::unique_ptr<nemotron_h_model> model) {
  mstar::engine::engine_config config;
  config.pools.max_num_pages = 4096;
  config.pools.max_slots = 64;
  config.scheduler.max_batched_tokens = 1 << 20;
  auto e = local_engine::make(std::move(model), config);
  if (!e) {
    std::fprintf(stderr, "model bench: %s\n", e.error().message().c_str());
    std::exit(1);
  }
  return std::move(*e);
}

void measure(const std::string& name, local_engine& model_engine, const nemotron_h_model& model,
             int batch, int length, int new_tokens, int rounds,
             std::vector<mstar::bench::comparison>& results) {
  auto& engine = model_engine;
  blas_floor floor{
      model.gemm_shapes(), model.config().hidden_size, model.config().vocab_size, {}, {}, {}};
  const auto reqs = prompts(batch, length, 1, model.config().vocab_size);
  // Prefill: the whole batch's prompts in one step (plus the first token).
  const double prompt_tokens = static_cast<double>(batch) * length;
  const auto [prefill, prefill_floor] = mstar::bench::interleaved_rates(
      [&] { generate(engine, reqs); }, [&] { floor.run(batch * length, batch); }, prompt_tokens,
      rounds);
  results.push_back({"model",
                     fmt::format("{}_prefill_b{}x{}", name, batch, length),
                     "tokens_per_s",
                     "1/s",
                     "blas_same_gemms",
                     prefill,
                     prefill_floor,
                     {}});
  // Decode: `new_tokens` steps of one token per row, after a short prompt.
  const auto dreqs = prompts(batch, 8, new_tokens + 1, model.config().vocab_size);
  const auto prefill_only = prompts(batch, 8, 1, model.config().vocab_size);
  const double decode_tokens = static_cast<double>(batch) * new_tokens;
  using clock = std::chrono::steady_clock;
  std::vector<double> model_rates, floor_rates;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock::now();
    generate(engine, dreqs);
    auto t1 = clock::now();
    generate(engine, prefill_only);
    auto t2 = clock::now();
    const double decode_s = std::chrono::duration<double>((t1 - t0) - (t2 - t1)).count();
    model_rates.push_back(decode_tokens / decode_s);
    t0 = clock::now();
    for (int s = 0; s < new_tokens; ++s)
      floor.run(batch, batch);
    floor_rates.push_back(decode_tokens / std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::sort(model_rates.begin(), model_rates.end());
  std::sort(floor_rates.begin(), floor_rates.end());
  results.push_back({"model",
                     fmt::format("{}_decode_b{}", name, batch),
                     "tokens_per_s",
                     "1/s",
                     "blas_same_gemms",
                     model_rates[model_rates.size() / 2],
                     floor_rates[floor_rates.size() / 2],
                     {}});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "model benchmark: Nemotron-H prefill and decode tokens/s on the CPU vs the BLAS floor"};
  bool as_json = false;
  int rounds = 3;
  bool skip_large = false;
  std::string embedded = MSTAR_EMBEDDED_MODEL_DIR;
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--rounds", rounds, "Rounds per case (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--skip-large", skip_large, "Only the embedded model (CI smoke run)");
  app.add_option("--model", embedded, "The small model folder");
  CLI11_PARSE(app, argc, argv);
  std::vector<mstar::bench::comparison> results;
  auto small = nemotron_h_model::load(embedded);
  if (!small) {
    std::fprintf(stderr, "model bench: %s\n", small.error().message().c_str());
    return 1;
  }
  const auto* small_model = small->get();
  auto small_engine = engine_of(std::move(*small));
  measure("embedded", *small_engine, *small_model, 4, 128, 32, rounds, results);
  if (!skip_large) {
    auto large = nemotron_h_model::random(config_100m(), 11);
    if (!large) {
      std::fprintf(stderr, "model bench: %s\n", large.error().message().c_str());
      return 1;
    }
    std::fprintf(stderr, "random Nemotron-H: %.1f M parameters\n",
                 (*large)->num_parameters() / 1e6);
    const auto* large_model = large->get();
    auto large_engine = engine_of(std::move(*large));
    measure("random100m", *large_engine, *large_model, 1, 128, 16, rounds, results);
    measure("random100m", *large_engine, *large_model, 8, 64, 16, rounds, results);
  }
  mstar::bench::report(results, as_json);
  return 0;
}
