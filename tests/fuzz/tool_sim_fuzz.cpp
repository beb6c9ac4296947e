// libFuzzer target over `mstar-tool sim`: a trace of JSON lines against the
// pools. The first byte picks the config: 0 reads it from the trace's first
// line (so configs get fuzzed), 1-3 use a small kv, recurrent or combined one.
// After every line that is refused ({"ok":false}, as an error or as an
// outcome) the pools' state must read exactly as before it.
//
// The simulator is the command's own class (in sim_command.cpp's unnamed
// namespace), so this file compiles that source in.
//
//   build-fuzz/tests/fuzz/mstar-fuzz-tool-sim -max_total_time=60 CORPUS tests/fuzz/corpus/tool_sim
#include <cstddef>
#include <cstdint>
#include <string>

#include "launcher/tool/sim_command.cpp"  // NOLINT(bugprone-suspicious-include)
#include "tests/fuzz/fuzz_support.hpp"

namespace {

constexpr const char* kv_config =
    R"({"config":{"kv":{"page_size":4,"max_num_pages":16,"num_layers":1,"num_kv_heads":1,"head_dim":8,"prefix_cache":true}}})";
constexpr const char* recurrent_config =
    R"({"config":{"recurrent":{"num_layers":1,"max_slots":4,"geometry":{"family":"mamba2","num_heads":2,"head_dim":4,"state_size":8,"n_groups":1,"conv_kernel_size":4}}}})";
constexpr const char* both_config =
    R"({"config":{"kv":{"page_size":4,"max_num_pages":16,"num_layers":1,"num_kv_heads":1,"head_dim":8,"prefix_cache":true},)"
    R"("recurrent":{"num_layers":1,"max_slots":4,"geometry":{"family":"mamba2","num_heads":2,"head_dim":4,"state_size":8,"n_groups":1,"conv_kernel_size":4}}}})";

// The pools' state as output lines carry it, less the last step's recurrent
// plan (what the simulator reports of the previous step, not pool state).
std::string state_of(const mstar::tool::simulator& sim) {
  mstar::tool::json state = mstar::tool::json::object();
  sim.add_state(state);
  if (state.contains("recurrent"))
    state["recurrent"].erase("plan");
  return state.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using mstar::tool::json;
  if (size == 0)
    return 0;
  auto lines =
      mstar::fuzz::lines_of(std::string{reinterpret_cast<const char*>(data) + 1, size - 1});
  const char* configs[] = {nullptr, kv_config, recurrent_config, both_config};
  if (const char* fixed = configs[data[0] % 4])
    lines.insert(lines.begin(), fixed);
  if (lines.empty())
    return 0;
  const json config = json::parse(lines.front(), nullptr, false);
  if (config.is_discarded())
    return 0;
  auto made = mstar::tool::simulator::make(config);
  if (!made)
    return 0;
  auto& sim = **made;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const json op = json::parse(lines[i], nullptr, false);
    if (op.is_discarded())
      continue;
    const std::string before = state_of(sim);
    auto out = sim.run(op);
    const bool refused = !out || (out->contains("ok") && out->at("ok") == false);
    if (refused && state_of(sim) != before) {
      mstar::fuzz::fail("sim: a refused line changed the pools: " + lines[i] + "\n  answer " +
                        (out ? out->dump() : out.error().message()) + "\n  before " + before +
                        "\n  after  " + state_of(sim));
    }
  }
  return 0;
}
