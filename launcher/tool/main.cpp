// mstar-tool: command-line access to the core modules (page keys, window
// schedules, devices), so users can see why a prompt missed the cache and how
// a long generation will be windowed.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string_view>

#include "core/untrusted_json.hpp"
#include "launcher/common/guarded_main.hpp"
#include "launcher/tool/commands.hpp"

namespace {

// CLI11 reports an unknown first word as "A subcommand is required"; name it.
bool unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2)
    return false;
  const std::string_view word = argv[1];
  if (word.empty() || word.front() == '-')
    return false;
  for (const auto* sub : app.get_subcommands({}))
    if (sub->check_name(std::string{word}))
      return false;
  std::fprintf(
      stderr,
      "mstar-tool: unknown command '%s' (keys, windows, sim, devices, example, memory-plan; "
      "--help lists them)\n",
      mstar::text_excerpt(word).c_str());
  return true;
}

int run(int argc, char** argv) {
  CLI::App app{
      "mstar-tool: inspect mstar-cpp's page keys, window schedules, pools, devices and memory "
      "plans.\n"
      "Run `mstar-tool <command> --help` for each command's input and output."};
  app.require_subcommand(1);
  int exit_code = 0;
  mstar::tool::add_keys_command(app, exit_code);
  mstar::tool::add_windows_command(app, exit_code);
  mstar::tool::add_devices_command(app, exit_code);
  mstar::tool::add_example_command(app, exit_code);
  mstar::tool::add_sim_command(app, exit_code);
  mstar::tool::add_memory_plan_command(app, exit_code);
  if (unknown_command(app, argc, argv))
    return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  return mstar::launcher::guarded_main("mstar-tool", [&] { return run(argc, argv); });
}
