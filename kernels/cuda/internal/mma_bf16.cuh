#pragma once

// BF16 tensor-core pieces of the prefill attention (attention_prefill.cu;
// bench/attention_prefill_trace.py emulates the lanes) and the decode one
// (attention_decode_mma.cu): ldmatrix fragment loads, mma.sync m16n8k16
// with f32 accumulate, f32 -> bf16 packing, and the softmax's exp2. Only
// .cu files include it.
//
// Per lane, g = lane / 4 and q = lane % 4 (PTX ISA, "mma.m16n8k16" .bf16;
// each register holds two consecutive elements, the lower index low):
//   A (16 x 16): a0 (g, 2q..), a1 (g + 8, 2q..), a2 (g, 2q + 8..), a3 (g + 8, 2q + 8..)
//   B (16 x 8):  b0 (2q.., g), b1 (2q + 8.., g)
//   C (16 x 8):  c0 (g, 2q), c1 (g, 2q + 1), c2 (g + 8, 2q), c3 (g + 8, 2q + 1)
// ldmatrix .x4: lanes 8j .. 8j + 7 give the row addresses of matrix j; lane
// l receives in register j row l / 4, elements 2(l % 4), 2(l % 4) + 1 of
// matrix j (.trans: column l / 4, rows 2(l % 4), 2(l % 4) + 1).

#include <cstdint>
#include <cuda_runtime.h>

namespace mstar::kernels::cuda::detail {

/// Four 8x8 b16 matrices from shared memory (`addr`: this lane's row).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

/// The same, each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

/// Two 8x8 b16 matrices, each transposed (lanes 0 .. 15 give the row
/// addresses; the others' are ignored).
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t (&r)[2], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr)
               : "memory");
}

/// c += a b: a 16x16 bf16 (row), b 16x8 bf16 (col), c 16x8 f32.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two floats as bf16 (round to nearest even), `lo` in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  std::uint32_t r = 0;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// The bf16 pair nearest (x, y) minus `hi` (their bf16 pair, pack_bf16's),
/// as bf16: with `hi` a high + low split of (x, y) keeping ~16 mantissa bits.
__device__ __forceinline__ std::uint32_t bf16_rest(float x, float y, std::uint32_t hi) {
  return pack_bf16(x - __uint_as_float(hi << 16), y - __uint_as_float(hi & 0xffff0000U));
}

/// c += a b: a 16x8 bf16 (row), b 8x8 bf16 (col), c 16x8 f32 (m16n8k8:
/// a0 (g, 2q..), a1 (g + 8, 2q..), b0 (2q.., g), c as m16n8k16's).
__device__ __forceinline__ void mma_bf16_k8(float (&c)[4], std::uint32_t a0, std::uint32_t a1,
                                            std::uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

/// 2^x, results below 2^-126 flushed to zero (weights that small vanish
/// next to the row's largest, 1); one MUFU.EX2 without exp2f's rescaling.
__device__ __forceinline__ float exp2_ftz(float x) {
  float r = 0.0F;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

}  // namespace mstar::kernels::cuda::detail
