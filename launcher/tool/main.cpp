// mstar-tool: command-line access to the core modules (page keys, window
// schedules, devices), so users can see why a prompt missed the cache and how
// a long generation will be windowed.
#include <CLI/CLI.hpp>

#include "launcher/tool/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "mstar-tool: inspect mstar-cpp's page keys, window schedules, pools and devices.\n"
      "Run `mstar-tool <command> --help` for each command's input and output."};
  app.require_subcommand(1);
  int exit_code = 0;
  mstar::tool::add_keys_command(app, exit_code);
  mstar::tool::add_windows_command(app, exit_code);
  mstar::tool::add_devices_command(app, exit_code);
  mstar::tool::add_example_command(app, exit_code);
  mstar::tool::add_sim_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
