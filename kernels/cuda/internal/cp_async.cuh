#pragma once

// Asynchronous global -> shared copies (sm_80 and later) for the kernels that
// stage their next operands while the current ones compute: the prefill
// attention (attention_prefill.cu) and the chunked delta rule's walk and
// output (delta_rule_chunk_*.cu). Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>

namespace mstar::kernels::cuda::detail {

/// The shared-memory address of `p` (a pointer into shared memory).
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, through L2 only; fewer `src_bytes` (0 included)
/// fill the rest of the 16 with zeros and read only those bytes.
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  cp_async16(smem_addr(dst), src);
}

/// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace mstar::kernels::cuda::detail
