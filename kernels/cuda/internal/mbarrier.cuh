#pragma once

// Shared-memory barriers for the warp-specialised wgmma prefill
// (attention_prefill_wgmma_ws.cu, sm_90a): mbarriers (a phase completes when
// its expected arrivals are in; waiters name the parity of the phase they
// wait out), named barriers over part of a block, and the warpgroup register
// reallocation (setmaxnreg) that hands a producer's registers to the
// consumers. Only sm_90a .cu files include it; on other targets the sm_90a
// wrappers trap, as internal/wgmma.cuh's.

#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {

/// Sets up the mbarrier at shared address `bar` to expect `count` arrivals a
/// phase. One thread; a block barrier before any other thread uses it.
__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/// Arrives once (release: this thread's earlier writes are visible to a
/// thread whose wait sees the phase complete).
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/// Waits (acquire) until the phase of parity `parity` has completed. The
/// retry loop is inside the asm (labels scoped by its braces), so the
/// compiler sees no data-dependent loop: a divergent path around later
/// wgmmas would make ptxas serialise them. After 2^26 failed polls (far
/// past any wait of a working pipeline, which lasts microseconds) it traps:
/// a protocol deadlock fails the launch instead of hanging the device.
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\n.reg .u32 n;\nmov.u32 n, 0;\nmstar_mbar_wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra mstar_mbar_done;\n"
      "add.u32 n, n, 1;\n"
      "setp.lt.u32 p, n, 67108864;\n"
      "@p bra mstar_mbar_wait;\n"
      "trap;\n"
      "mstar_mbar_done:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

/// mbar_arrive where `pred` holds, as one predicated instruction (no branch
/// for the compiler to call divergent).
__device__ __forceinline__ void mbar_arrive_if(std::uint32_t bar, bool pred) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(bar),
      "r"(static_cast<int>(pred))
      : "memory");
}

/// Named barrier `id` (1 .. 15; 0 is __syncthreads') over `count` threads,
/// whole warps.
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// Arrives on named barrier `id` over `count` threads without waiting (a
/// producer's half of a named-barrier handshake).
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// Lowers this warpgroup's registers a thread to N (every warp of the
/// warpgroup executes it).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if MSTAR_WGMMA_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  __trap();
#endif
}

/// Raises this warpgroup's registers a thread to N, waiting until the pool
/// has them (released by setmaxnreg_dec elsewhere in the block).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if MSTAR_WGMMA_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  __trap();
#endif
}

}  // namespace mstar::kernels::cuda::detail
