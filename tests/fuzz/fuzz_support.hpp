#pragma once

// Helpers shared by the libFuzzer targets: a broken property aborts with a
// message (libFuzzer then saves the input as a crash), and mstar-tool's
// commands run on a string as stdin with their output captured.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace mstar::fuzz {

/// Reports a broken property and aborts (a crash for libFuzzer).
[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz property broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

/// What one run of a command printed and returned.
struct tool_run {
  int exit_code = 0;
  bool parse_error = false;  ///< CLI11 refused the arguments (or was asked for help)
  std::string out;
  std::string err;
};

/// Runs `mstar-tool args...` in process (the command `add` registers, as
/// main.cpp does) with `input` as stdin. A CLI11 parse error is the exit
/// code 2 main would return.
template <typename Add>
tool_run run_tool(Add add, const std::vector<std::string>& args, const std::string& input) {
  CLI::App app{"mstar-tool"};
  app.require_subcommand(1);
  tool_run r;
  add(app, r.exit_code);
  std::istringstream in{input};
  std::ostringstream out;
  std::ostringstream err;
  auto* old_in = std::cin.rdbuf(in.rdbuf());
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    r.parse_error = true;
    r.exit_code = e.get_exit_code() == 0 ? 0 : 2;
  }
  std::cin.rdbuf(old_in);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  std::cin.clear();
  r.out = out.str();
  r.err = err.str();
  return r;
}

/// The lines of `text` as std::getline reads them.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

}  // namespace mstar::fuzz
