// Recurrent pool step cost: a 256-row decode step (admit + plan + commit) and
// a fork-heavy step (every row pre-forks "main" into "draft", then the draft
// is dropped). Baselines measured in the same run: looking up each row's slot
// in a hash map (the least bookkeeping a decode step needs), and memcpy of
// the very bytes the forks copy (the floor for copying state).
#include <CLI/CLI.hpp>
#include <cstring>
#include <unordered_map>

#include "bench/harness.hpp"
#include "resources/recurrent/geometry.hpp"
#include "resources/recurrent/pool.hpp"

namespace {

using namespace mstar::resources;

void must(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "recurrent_step bench: %s failed\n", what);
    std::exit(1);
  }
}

void run_step(recurrent_state_pool& pool, const recurrent_step& step) {
  step_context ctx;
  must(pool.admit(step, ctx).ok, "admit");
  must(pool.plan(step, ctx).has_value(), "plan");
  must(pool.commit(step, ctx).has_value(), "commit");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recurrent_step benchmark: recurrent pool decode and fork-heavy steps"};
  bool as_json = false;
  int rows = 256, fork_rows = 32, rounds = 15, steps = 50;
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--rows", rows, "Decode rows per step")->check(CLI::PositiveNumber);
  app.add_option("--fork-rows", fork_rows, "Rows forking per fork-heavy step")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "Interleaved rounds (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "Steps per round")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  // A small Mamba-2 layer stack (H=8, P=16, N=16, G=2, W=4; 4 layers), f32.
  const mamba2_geometry geo{8, 16, 16, 2, 4};
  recurrent_state_config cfg;
  cfg.num_layers = 4;
  cfg.blocks = geo.to_blocks(mstar::dtype::float32, mstar::dtype::float32).value();
  cfg.max_slots = 2 * rows + 2;
  auto pool = recurrent_state_pool::make("recurrent", cfg).value();
  std::vector<mstar::bench::comparison> results;

  recurrent_step decode;
  std::unordered_map<std::string, int> slots;
  for (int r = 0; r < rows; ++r) {
    decode.segments.push_back({"r" + std::to_string(r), "main", 1});
    slots["r" + std::to_string(r)] = r + 1;
  }
  run_step(*pool, decode);  // every row now holds a slot with state
  std::int64_t sink = 0;
  const auto [step_rate, lookup_rate] = mstar::bench::interleaved_rates(
      [&] {
        for (int s = 0; s < steps; ++s)
          run_step(*pool, decode);
      },
      [&] {
        for (int s = 0; s < steps; ++s) {
          for (const auto& seg : decode.segments)
            sink += slots.at(seg.rid);
        }
      },
      steps, rounds);
  mstar::bench::comparison d{"recurrent_step",
                             fmt::format("decode_{}", rows),
                             "steps_per_s",
                             "1/s",
                             "hash_map_slot_lookups",
                             step_rate,
                             lookup_rate,
                             {}};
  d.extra = {{"us_per_step", 1e6 / step_rate}, {"ns_per_row", 1e9 / step_rate / rows}};
  results.push_back(d);

  // Fork-heavy: `fork_rows` rows pre-fork main -> draft (every layer, every
  // block copied), commit, then the drafts are reset away.
  recurrent_step fork;
  for (int r = 0; r < fork_rows; ++r)
    fork.segments.push_back({"r" + std::to_string(r), "main", 1});
  fork.pre_forks = {{"main", "draft"}};
  const std::size_t slot_bytes = static_cast<std::size_t>(cfg.slot_bytes());
  std::vector<std::byte> src(slot_bytes * static_cast<std::size_t>(fork_rows)), dst(src.size());
  auto drop_drafts = [&] {
    // Reset frees every slot of the request; re-admit its main stream.
    for (int r = 0; r < fork_rows; ++r)
      pool->reset_request('r' + std::to_string(r), true);
    recurrent_step again;
    for (int r = 0; r < fork_rows; ++r)
      again.segments.push_back({'r' + std::to_string(r), "main", 1});
    run_step(*pool, again);
  };
  const auto [fork_rate, copy_rate] = mstar::bench::interleaved_rates(
      [&] {
        for (int s = 0; s < steps; ++s) {
          run_step(*pool, fork);
          drop_drafts();
        }
      },
      [&] {
        for (int s = 0; s < steps; ++s) {
          std::memcpy(dst.data(), src.data(), src.size());
          src[static_cast<std::size_t>(s)] = dst[0];
        }
      },
      steps, rounds);
  mstar::bench::comparison f{"recurrent_step",
                             fmt::format("fork_{}_rows", fork_rows),
                             "steps_per_s",
                             "1/s",
                             "memcpy_forked_bytes",
                             fork_rate,
                             copy_rate,
                             {}};
  f.extra = {{"us_per_step", 1e6 / fork_rate}, {"slot_bytes", static_cast<double>(slot_bytes)}};
  results.push_back(f);
  must(pool->check_invariants().has_value(), "invariants");
  mstar::bench::report(results, as_json);
  return sink == 42 ? 3 : 0;
}
