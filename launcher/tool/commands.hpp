#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace mstar::tool {

/// Each mstar-tool subcommand registers itself on the app. Its callback runs
/// the command and stores the process exit code in `exit_code` (0 success,
/// 1 some input failed, 2 invalid arguments).
void add_keys_command(CLI::App& app, int& exit_code);
void add_windows_command(CLI::App& app, int& exit_code);
void add_devices_command(CLI::App& app, int& exit_code);
void add_example_command(CLI::App& app, int& exit_code);
void add_sim_command(CLI::App& app, int& exit_code);
void add_memory_plan_command(CLI::App& app, int& exit_code);

/// What `mstar-tool keys` prints for one input line: the answer, or an
/// {"error":"line <number>: ..."} object with `valid` false (a line of more
/// than 16 MiB is `too_long`; its text is not looked at). For tests and fuzzing.
[[nodiscard]] nlohmann::json answer_keys_line(const std::string& line, bool too_long,
                                              std::size_t number, bool& valid);

/// One `mstar-tool sim` trace fed a line at a time: `answer` returns what the
/// command prints for the line and sets `valid` false for an invalid one,
/// which leaves the pools exactly as they were. The first valid line makes
/// the pools. For tests and fuzzing.
class sim_session {
 public:
  sim_session();
  ~sim_session();
  sim_session(const sim_session&) = delete;
  sim_session& operator=(const sim_session&) = delete;

  [[nodiscard]] nlohmann::json answer(const std::string& text, bool too_long, bool& valid);

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace mstar::tool
