#pragma once

// The SSD decode step's first kernel (ssd.cu, a block per (row, head)) as
// entry 0 of ssd_update's table of launch shapes (ssd_update.cu).

#include <cuda_runtime_api.h>

#include "kernels/ssd.hpp"

namespace mstar::kernels::cuda::detail {

/// `ssd_update` in its first shape: every shape the launcher takes
/// (recurrent.hpp), cudaErrorInvalidValue for the others.
[[nodiscard]] cudaError_t launch_ssd_update_blocks(const ssd_update_params& p, cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail
