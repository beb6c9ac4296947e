// Built instead of cuda/device_query.cu when MSTAR_CUDA is off or no nvcc was
// found, so callers need no #ifdefs.
#include "kernels/device.hpp"

namespace mstar::kernels {

cuda_report query_cuda_devices() {
  cuda_report report;
  report.reason = "this build has no CUDA sources (configure with MSTAR_CUDA=AUTO or ON)";
  return report;
}

}  // namespace mstar::kernels
