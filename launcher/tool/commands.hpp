#pragma once

#include <CLI/CLI.hpp>

namespace mstar::tool {

/// Each mstar-tool subcommand registers itself on the app. Its callback runs
/// the command and stores the process exit code in `exit_code` (0 success,
/// 1 some input failed, 2 invalid arguments).
void add_keys_command(CLI::App& app, int& exit_code);
void add_windows_command(CLI::App& app, int& exit_code);
void add_devices_command(CLI::App& app, int& exit_code);
void add_example_command(CLI::App& app, int& exit_code);
void add_sim_command(CLI::App& app, int& exit_code);

}  // namespace mstar::tool
