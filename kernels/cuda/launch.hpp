#pragma once

// Every CUDA launcher and runtime owner, for plain C++ callers: nothing here
// needs more than cuda_runtime_api.h. Launchers live in
// mstar::kernels::cuda, take the CPU reference's params structs with device
// pointers, allocate nothing, take the stream last and return cudaError_t;
// convert a failure with `cuda_error(err, what)` where it is first seen.

#include "kernels/cuda/attention.hpp"   // IWYU pragma: export
#include "kernels/cuda/delta_rule.hpp"  // IWYU pragma: export
#include "kernels/cuda/encoder.hpp"     // IWYU pragma: export
#include "kernels/cuda/math.hpp"        // IWYU pragma: export
#include "kernels/cuda/page_ops.hpp"    // IWYU pragma: export
#include "kernels/cuda/recurrent.hpp"   // IWYU pragma: export
#include "kernels/cuda/runtime.hpp"     // IWYU pragma: export
#include "kernels/cuda/sampling.hpp"    // IWYU pragma: export
