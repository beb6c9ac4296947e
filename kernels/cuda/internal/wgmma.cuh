#pragma once

// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only) for the wgmma
// prefill attention (attention_prefill_wgmma.cu): shared-memory matrix
// descriptors, the fence / commit / wait around the asynchronous MMAs, and
// the three shapes it issues. Only .cu files compiled for sm_90a include it;
// compiled for any other device (or arch without the "a" features) every
// wrapper traps, so a stray launch fails loudly instead of computing junk.
//
// Layouts (PTX ISA, "Asynchronous Warpgroup Level Matrix ... Register
// Fragments" and "Shared Memory Matrix Layout"); warp w of the warpgroup,
// lane g = lane / 4, q = lane % 4:
//   D (64 x N, f32, N / 2 registers as d[N / 8][4]): d[n][0] (16w + g,
//     8n + 2q), d[n][1] (16w + g, 8n + 2q + 1), d[n][2] (16w + g + 8, 8n +
//     2q), d[n][3] (16w + g + 8, 8n + 2q + 1): per warp, the m16n8 C layout
//     of mma_bf16.cuh once per 8 columns.
//   A from registers (64 x 16 bf16, 4 x b32): per warp the m16n8k16 A
//     fragment of rows 16w .. 16w + 15, so an S accumulator's n tiles 2kk,
//     2kk + 1 packed to bf16 are P's A operand kk, as with mma.sync.
//   Shared operands, 128-byte swizzle: 8 rows of 128 bytes make a 1,024-byte
//     atom (1,024-byte aligned), 16-byte chunk c of row r stored at chunk
//     c ^ (r % 8). K-major (A, or B with imm-trans-b 0): rows are M / N,
//     each 64 K elements; SBO = the byte step between 8-row groups; LBO
//     unused (1). A k16 step inside the atom adds 32 bytes to the start
//     address (the swizzle applies to the summed address). MN-major (B
//     with imm-trans-b 1): rows are K, each 64 N elements; LBO = the byte
//     step between 64-wide N blocks, SBO = the step between 8-row K groups.

#include <cstdint>
#include <cuda_runtime.h>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MSTAR_WGMMA_DEVICE 0
#else
#define MSTAR_WGMMA_DEVICE 1
#endif

namespace mstar::kernels::cuda::detail {

/// The 64-bit descriptor of a 128-byte-swizzled operand at shared address
/// `addr` (its atom 1,024-byte aligned, so the base offset is 0) with byte
/// offsets `lbo` and `sbo` (multiples of 16).
__device__ __forceinline__ std::uint64_t wgmma_desc(std::uint32_t addr, std::uint32_t lbo,
                                                    std::uint32_t sbo) {
  return static_cast<std::uint64_t>((addr & 0x3FFFFU) >> 4) |
         static_cast<std::uint64_t>((lbo & 0x3FFFFU) >> 4) << 16 |
         static_cast<std::uint64_t>((sbo & 0x3FFFFU) >> 4) << 32 | std::uint64_t{1} << 62;
}

/// Orders this thread's earlier generic-proxy shared-memory writes (st.shared,
/// completed cp.async) before later async-proxy reads (wgmma operands); each
/// writer fences, then a barrier publishes.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Before the first wgmma of a batch: earlier register writes (accumulators,
/// A fragments) are visible to it.
__device__ __forceinline__ void wgmma_fence() {
#if MSTAR_WGMMA_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// Pins `d` in place around wgmma issue and wait: an empty asm reading and
/// writing each register, so the compiler neither reads an accumulator
/// before the wait that completes it nor moves its writes past the issue.
template <int N>
__device__ __forceinline__ void wgmma_pin(float (&d)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+f"(d[n][e])::"memory");
  }
}

/// Closes the batch of wgmmas issued since the last commit into a group.
__device__ __forceinline__ void wgmma_commit() {
#if MSTAR_WGMMA_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// Waits until at most N committed groups are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if MSTAR_WGMMA_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/// d (64 x 128) = A B (+ d where `accumulate`): A 64 x 16 K-major and B
/// 16 x 128 K-major from shared memory descriptors.
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[16][4], std::uint64_t a, std::uint64_t b,
                                              bool accumulate) {
#if MSTAR_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),
        "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
        "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]),
        "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),
        "+f"(d[15][2]), "+f"(d[15][3])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate))
      : "memory");
#else
  __trap();
#endif
}

/// d (64 x 128) += A B: A 64 x 16 bf16 from registers (the m16n8k16 A
/// fragment per warp, warp w rows 16w ..), B 16 x 128 MN-major from a shared
/// memory descriptor.
__device__ __forceinline__ void wgmma_rs_n128_mn(float (&d)[16][4], const std::uint32_t (&a)[4],
                                                 std::uint64_t b) {
#if MSTAR_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),
        "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
        "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]),
        "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),
        "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
      : "memory");
#else
  __trap();
#endif
}

/// d (64 x 64) += A B: A 64 x 16 bf16 from registers (the m16n8k16 A
/// fragment per warp, warp w rows 16w ..), B 16 x 64 MN-major from a shared
/// memory descriptor.
__device__ __forceinline__ void wgmma_rs_n64_mn(float (&d)[8][4], const std::uint32_t (&a)[4],
                                                std::uint64_t b) {
#if MSTAR_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
      : "memory");
#else
  __trap();
#endif
}

/// d (64 x 128) = A B, d written only (no accumulator read, so nothing to
/// zero first): A 64 x 16 K-major and B 16 x 128 K-major from shared
/// memory descriptors. The first k step of an S tile.
__device__ __forceinline__ void wgmma_ss_n128_first(float (&d)[16][4], std::uint64_t a,
                                                    std::uint64_t b) {
#if MSTAR_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "=f"(d[0][0]), "=f"(d[0][1]), "=f"(d[0][2]), "=f"(d[0][3]), "=f"(d[1][0]), "=f"(d[1][1]),
        "=f"(d[1][2]), "=f"(d[1][3]), "=f"(d[2][0]), "=f"(d[2][1]), "=f"(d[2][2]), "=f"(d[2][3]),
        "=f"(d[3][0]), "=f"(d[3][1]), "=f"(d[3][2]), "=f"(d[3][3]), "=f"(d[4][0]), "=f"(d[4][1]),
        "=f"(d[4][2]), "=f"(d[4][3]), "=f"(d[5][0]), "=f"(d[5][1]), "=f"(d[5][2]), "=f"(d[5][3]),
        "=f"(d[6][0]), "=f"(d[6][1]), "=f"(d[6][2]), "=f"(d[6][3]), "=f"(d[7][0]), "=f"(d[7][1]),
        "=f"(d[7][2]), "=f"(d[7][3]), "=f"(d[8][0]), "=f"(d[8][1]), "=f"(d[8][2]), "=f"(d[8][3]),
        "=f"(d[9][0]), "=f"(d[9][1]), "=f"(d[9][2]), "=f"(d[9][3]), "=f"(d[10][0]), "=f"(d[10][1]),
        "=f"(d[10][2]), "=f"(d[10][3]), "=f"(d[11][0]), "=f"(d[11][1]), "=f"(d[11][2]),
        "=f"(d[11][3]), "=f"(d[12][0]), "=f"(d[12][1]), "=f"(d[12][2]), "=f"(d[12][3]),
        "=f"(d[13][0]), "=f"(d[13][1]), "=f"(d[13][2]), "=f"(d[13][3]), "=f"(d[14][0]),
        "=f"(d[14][1]), "=f"(d[14][2]), "=f"(d[14][3]), "=f"(d[15][0]), "=f"(d[15][1]),
        "=f"(d[15][2]), "=f"(d[15][3])
      : "l"(a), "l"(b)
      : "memory");
#else
  static_cast<void>(a);
  static_cast<void>(b);
  __trap();
#endif
}

/// d (64 x 8) += A B: A 64 x 16 bf16 from registers (as wgmma_rs_n128_mn),
/// B 16 x 8 K-major from a shared memory descriptor (imm-trans-b 0). With B
/// all ones every column of d gathers the row sums of A.
__device__ __forceinline__ void wgmma_rs_n8(float (&d)[1][4], const std::uint32_t (&a)[4],
                                            std::uint64_t b) {
#if MSTAR_WGMMA_DEVICE
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "%8, 1, 1, 1, 0;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
      : "memory");
#else
  __trap();
#endif
}

}  // namespace mstar::kernels::cuda::detail
