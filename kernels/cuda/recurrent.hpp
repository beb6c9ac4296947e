#pragma once

// Device versions of kernels/conv.hpp and kernels/ssd.hpp: the same params
// structs, every pointer and span a device address (the launchers read only
// span sizes and the scalar fields on the host). Each launcher enqueues on
// `stream`, allocates nothing and returns the launch error.
//
// One difference from the CPU: rows run in parallel, so rows that share a slot
// (the pool's sink, which padding rows address) race; their outputs and the
// slot's contents are unspecified. Rows on distinct slots match the CPU.

#include <cuda_runtime_api.h>

#include "kernels/conv.hpp"
#include "kernels/ssd.hpp"

namespace mstar::kernels::cuda {

/// The causal conv over a packed batch. Outputs need no recurrence (each is
/// a window of inputs), so one thread per (token, channel) over a grid that
/// strides the step's tokens; a second launch then stores each row's last
/// W-1 inputs in its slot. Width 2..64; otherwise cudaErrorInvalidValue.
[[nodiscard]] cudaError_t causal_conv_varlen(const causal_conv_varlen_params& p,
                                             cudaStream_t stream);

/// One decode step, one thread per (row, channel), the window shifted in
/// place.
[[nodiscard]] cudaError_t causal_conv_update(const causal_conv_update_params& p,
                                             cudaStream_t stream);

/// The SSD scan, sequential in time, one block per (row, head) holding the
/// head's [P][N] state in registers (next token's inputs prefetched).
/// Requires state_size a multiple of 4, a 16-byte aligned state block, and
/// P * N / 16 <= 1024 (cudaErrorInvalidValue otherwise).
[[nodiscard]] cudaError_t ssd_scan_varlen(const ssd_scan_varlen_params& p, cudaStream_t stream);

/// One SSD decode step per row, one block per (row, head): reads and writes
/// each slot's state once with 16-byte accesses. Same requirements as
/// `ssd_scan_varlen`.
[[nodiscard]] cudaError_t ssd_update(const ssd_update_params& p, cudaStream_t stream);

}  // namespace mstar::kernels::cuda
