#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace mstar::test {

/// What a finished child process left behind.
struct process_output {
  int exit_code = -1;  ///< the exit status, or 128 + signal when killed
  std::string out;
  std::string err;
};

/// Runs `argv` with `input` on its stdin and collects stdout and stderr. The
/// child is killed when it outlives `deadline`; that shows as exit code 137.
[[nodiscard]] process_output run_process(const std::vector<std::string>& argv,
                                         const std::string& input = {},
                                         std::chrono::milliseconds deadline = std::chrono::seconds{
                                             60});

}  // namespace mstar::test
