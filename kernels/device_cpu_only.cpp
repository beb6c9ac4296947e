// Built instead of cuda/device_query.cu when MSTAR_CUDA is off or no nvcc was
// found, so callers need no #ifdefs.
#include <string>

#include "kernels/device.hpp"
#include "kernels/device_memory.hpp"

namespace mstar::kernels {

cuda_report query_cuda_devices() {
  cuda_report report;
  report.reason = "this build has no CUDA sources (configure with MSTAR_CUDA=AUTO or ON)";
  return report;
}

result<device_memory_info> query_device_memory(int index) {
  return make_error(errc::unsupported,
                    "device " + std::to_string(index) +
                        ": this build has no CUDA sources, so no device memory to query");
}

}  // namespace mstar::kernels
