// libFuzzer target over `mstar-tool keys`: the input is its stdin (JSON
// Lines). Every line gets exactly one JSON object back, an error line names
// itself ("line N: ..."), and the exit code is 1 exactly when a line failed.
//
//   build-fuzz/tests/fuzz/mstar-fuzz-tool-keys -max_total_time=60 CORPUS
//   tests/fuzz/corpus/tool_keys
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "launcher/tool/commands.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input{reinterpret_cast<const char*>(data), size};
  const auto run = mstar::fuzz::run_tool(mstar::tool::add_keys_command, {"keys"}, input);
  const auto in_lines = mstar::fuzz::lines_of(input);
  const auto out_lines = mstar::fuzz::lines_of(run.out);
  if (in_lines.size() != out_lines.size())
    mstar::fuzz::fail("keys: not one output line per input line");
  bool any_error = false;
  for (std::size_t i = 0; i < out_lines.size(); ++i) {
    const auto out = nlohmann::json::parse(out_lines[i], nullptr, false);
    if (out.is_discarded() || !out.is_object())
      mstar::fuzz::fail("keys: an output line is not a JSON object");
    if (out.contains("error")) {
      any_error = true;
      const auto& e = out.at("error");
      if (!e.is_string() ||
          e.get_ref<const std::string&>().rfind("line " + std::to_string(i + 1) + ": ", 0) != 0) {
        mstar::fuzz::fail("keys: an error does not name its line");
      }
    }
  }
  if (run.exit_code != (any_error ? 1 : 0))
    mstar::fuzz::fail("keys: the exit code disagrees with the lines");
  return 0;
}
