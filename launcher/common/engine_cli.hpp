#pragma once

// The engine's command-line options, shared by mstar-run and mstar-serve:
// pool sizes, scheduler limits, device and precision.

#include <CLI/CLI.hpp>
#include <string>

#include "core/result.hpp"
#include "engine/local_engine.hpp"
#include "launcher/common/memory_fit.hpp"
#include "models/causal_lm.hpp"

namespace mstar::launcher {

struct engine_cli {
  engine::engine_config engine;
  std::string device = "cpu";
  std::string dtype = "bfloat16";
  bool no_graphs = false;
  int tensor_parallel = 1;  ///< ranks in this process (models::run_options::tensor_parallel_ranks)
  double gpu_memory_fraction = 0.9;
  std::int64_t context = 0;
  // Set by add_engine_options: whether each was given on the command line.
  const CLI::Option* fraction_option = nullptr;
  const CLI::Option* pages_option = nullptr;
  const CLI::Option* slots_option = nullptr;
};

/// Adds --page-size, --max-pages, --max-slots, --gpu-memory-fraction, --context,
/// --max-memory, --max-batched-tokens, --max-running, --schedule, --device, --dtype,
/// --no-cuda-graphs and --tensor-parallel.
void add_engine_options(CLI::App& app, engine_cli& opt);

/// A CLI11 check that the value is a whole number >= `lo`, failing as people
/// write it: "must be a whole number >= 0, got -5" (CLI11's own ranges print
/// the type's limits, 309 digits for a double).
[[nodiscard]] CLI::Validator whole_number_at_least(long long lo);

/// What the parsed flags say about sizing the pools from a GPU's memory
/// (with --tensor-parallel N ranks sharing one device, each plans for 1/N
/// of --gpu-memory-fraction: every rank holds its own copy of the pools).
[[nodiscard]] memory_fit memory_fit_of(const engine_cli& opt);

/// A CLI11 check that the value is a number in (0, 1].
[[nodiscard]] CLI::Validator fraction_in_unit_interval();

/// How this build forms a tensor-parallel group (run_options::
/// tensor_parallel_groups): NCCL for ranks on distinct GPUs when built with
/// it (parallel::nccl_group_maker), else empty (the in-process group).
[[nodiscard]] parallel::group_maker tensor_parallel_group_maker();

/// The model's run options from the parsed flags (a bad --dtype is an error).
[[nodiscard]] result<models::run_options> run_options_of(const engine_cli& opt);

}  // namespace mstar::launcher
