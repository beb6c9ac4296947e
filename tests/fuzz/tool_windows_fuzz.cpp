// libFuzzer target over `mstar-tool windows`: the input is its arguments,
// split at whitespace (e.g. "--total 10 --window 4 --overlap 1"). Either the
// command prints one schedule (exit 0) whose windows tile [0, total) with
// each unit committed once, or it refuses with a message on stderr (exit 2).
//
//   build-fuzz/tests/fuzz/mstar-fuzz-tool-windows -max_total_time=60 CORPUS
//   tests/fuzz/corpus/tool_windows
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/tool/commands.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

void check_schedule(const std::string& printed) {
  const auto out = nlohmann::json::parse(printed, nullptr, false);
  if (out.is_discarded() || !out.is_object() || !out.contains("windows"))
    mstar::fuzz::fail("windows: exit 0 without a schedule");
  const auto& windows = out.at("windows");
  if (!windows.is_array() || windows.size() != out.at("num_windows").get<std::size_t>())
    mstar::fuzz::fail("windows: num_windows disagrees with the list");
  std::int64_t committed = 0;
  for (const auto& w : windows) {
    const auto start = w.at("start").get<std::int64_t>();
    const auto end = w.at("end").get<std::int64_t>();
    if (w.at("commit_start").get<std::int64_t>() != committed || start > committed || end <= start)
      mstar::fuzz::fail("windows: a window does not continue where the previous one committed");
    committed = w.at("commit_end").get<std::int64_t>();
    if (committed != end)
      mstar::fuzz::fail("windows: a window commits other than up to its end");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream words{std::string{reinterpret_cast<const char*>(data), size}};
  std::vector<std::string> args{"windows"};
  for (std::string w; words >> w;)
    args.push_back(w);
  // A schedule of tens of thousands of windows is valid and takes seconds to
  // print and check in this instrumented build (17,000 windows took 6 s, past
  // the run's timeout at the 100,000 cap): the hostile-input suite and the
  // regression inputs cover the cap; the fuzzer's time goes to the parser.
  const auto value = [&](std::string_view flag) -> std::int64_t {
    for (std::size_t i = 1; i + 1 < args.size(); ++i) {
      if (args[i] == flag) {
        try {
          return std::stoll(args[i + 1]);
        } catch (...) {
          return -1;
        }
      }
    }
    return -1;
  };
  const auto total = value("--total"), window = value("--window"), overlap = value("--overlap");
  if (total > 0 && window > 0) {
    const auto step = std::max<std::int64_t>(1, window - std::max<std::int64_t>(overlap, 0));
    const auto windows = total / step;
    if (windows > 5'000 && windows <= 200'000)
      return 0;  // printed whole: slow here; past the cap it is refused at once (still run)
  }
  const auto run = mstar::fuzz::run_tool(mstar::tool::add_windows_command, args, "");
  if (run.parse_error)
    return 0;  // CLI11's own refusal (or --help), before the command runs
  if (run.exit_code == 0) {
    check_schedule(run.out);
  } else if (run.exit_code != 2 || !run.out.empty()) {
    mstar::fuzz::fail("windows: a refusal is exit 2 with nothing on stdout");
  }
  return 0;
}
