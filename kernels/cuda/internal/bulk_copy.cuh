#pragma once

// Hopper bulk copies (cp.async.bulk, global -> shared) completing on shared
// mbarriers, for the whole-token-row decode walks (attention_decode_rows.cu,
// attention_decode_rows_mma.cu): one thread arms a barrier with the bytes a
// phase expects, copies land on it, every consumer waits on the phase's
// parity. Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>

namespace mstar::kernels::cuda::detail {

__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// One arrival on `bar`, expecting `bytes` more of copies in this phase.
__device__ __forceinline__ void mbar_arrive_expect(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

/// Waits until the phase of `bar` with this parity has completed (acquire:
/// the copies that completed it are visible).
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

/// Orders this thread's earlier shared-memory accesses before its later
/// bulk copies (the async proxy) into the same bytes.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// `bytes` (a multiple of 16, both ends 16-byte aligned) global -> shared,
/// completing on `bar`.
__device__ __forceinline__ void bulk_copy(std::uint32_t dst, const void* src, std::uint32_t bytes,
                                          std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

}  // namespace mstar::kernels::cuda::detail
