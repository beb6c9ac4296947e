#pragma once

// The sequential SSD scan (ssd.cu) as the chunked prefill path
// (ssd_chunked.cu) launches it for the rows it leaves.

#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/ssd.hpp"

namespace mstar::kernels::cuda::detail {

/// `ssd_scan_varlen`'s sequential scan over every row r whose
/// `chunked_rows[r]` is negative (every row when `chunked_rows` is null, a
/// device array of R entries); the others are left alone: output and slot.
/// `chained`: launched through `launch_chained` (internal/common.cuh); the
/// kernel waits before it reads anything and lets the next one start only
/// as its blocks end.
[[nodiscard]] cudaError_t launch_ssd_scan(const ssd_scan_varlen_params& p,
                                          const std::int32_t* chunked_rows, cudaStream_t stream,
                                          bool chained = false);

}  // namespace mstar::kernels::cuda::detail
