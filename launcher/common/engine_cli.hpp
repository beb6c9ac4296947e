#pragma once

// The engine's command-line options, shared by mstar-run and mstar-serve:
// pool sizes, scheduler limits, device and precision.

#include <CLI/CLI.hpp>
#include <string>

#include "core/result.hpp"
#include "engine/local_engine.hpp"
#include "models/causal_lm.hpp"

namespace mstar::launcher {

struct engine_cli {
  engine::engine_config engine;
  std::string device = "cpu";
  std::string dtype = "bfloat16";
  bool no_graphs = false;
};

/// Adds --page-size, --max-pages, --max-slots, --max-batched-tokens,
/// --max-running, --schedule, --device, --dtype and --no-cuda-graphs.
void add_engine_options(CLI::App& app, engine_cli& opt);

/// The model's run options from the parsed flags (a bad --dtype is an error).
[[nodiscard]] result<models::run_options> run_options_of(const engine_cli& opt);

}  // namespace mstar::launcher
