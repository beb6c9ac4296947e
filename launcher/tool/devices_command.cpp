// `mstar-tool devices`: what accelerators this build and machine offer.
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/device.hpp"
#include "launcher/tool/commands.hpp"

namespace mstar::tool {

void add_devices_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "devices", "List the CUDA devices this build can use (JSON); an empty list says why");
  cmd->callback([&exit_code] {
    const auto report = kernels::query_cuda_devices();
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : report.devices) {
      devices.push_back({{"index", d.index},
                         {"name", d.name},
                         {"compute_capability",
                          std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor)},
                         {"total_memory_bytes", d.total_memory_bytes},
                         {"multiprocessors", d.multiprocessors}});
    }
    nlohmann::json out{{"cuda_compiled", report.compiled},
                       {"cuda_runtime_version", report.runtime_version},
                       {"cuda_driver_version", report.driver_version},
                       {"devices", devices}};
    if (!report.reason.empty())
      out["reason"] = report.reason;
    std::cout << out.dump() << '\n';
    exit_code = 0;
  });
}

}  // namespace mstar::tool
