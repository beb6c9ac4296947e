#pragma once

// TF32 tensor-core products as bare `mma.sync.m16n8k8` (f32 accumulate) with
// fragments read from shared memory at compile-time strides, for the chunked
// delta rule's and SSD's kernels (delta_rule_chunk_*.cu, ssd_chunk_*.cu;
// bench/ssd_chunk_trace.py emulates the lanes). nvcuda::wmma costs a generic
// load, a NaN-checking conversion and an address computation per element
// (bench/results/h200-delta-rule.md, run 4: 37% of the walk's instructions
// were IMAD, 7% HMMA); here a fragment element is one shared load at a fixed
// offset from a per-lane base and two integer operations. Only .cu files
// include it.
//
// Per lane, g = lane / 4 and q = lane % 4 (PTX ISA, "mma.m16n8k8" .tf32):
//   A (16 x 8):  a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4)
//   B (8 x 8):   b0 (q, g), b1 (q + 4, g)
//   C (16 x 8):  c0 (g, 2q), c1 (g, 2q + 1), c2 (g + 8, 2q), c3 (g + 8, 2q + 1)

#include <cstdint>
#include <cuda_runtime.h>

namespace mstar::kernels::cuda::detail::tf32 {

/// `x` rounded to TF32 (10 mantissa bits), to nearest with ties away from
/// zero as cvt.rna does, for finite values: add half of the dropped part,
/// clear it.
__device__ __forceinline__ std::uint32_t bits(float x) {
  return (__float_as_uint(x) + 0x1000U) & 0xffffe000U;
}

/// d += a b for one 16 x 8 x 8 tile.
__device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4],
                                    const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// The lane's (g, q) coordinates.
struct lane_at {
  int g, q;
  __device__ __forceinline__ explicit lane_at(int lane) : g(lane >> 2), q(lane & 3) {}
};

/// A(m, k) = base[m * RS + k * CS]: the lane's base for the A fragment of the
/// tile whose (0, 0) is `tile`; add k0 * CS per k step.
template <int RS, int CS>
__device__ __forceinline__ const float* a_base(const float* tile, lane_at l) {
  return tile + l.g * RS + l.q * CS;
}

/// The A fragment at `p` (from a_base, plus the k step's offset).
template <int RS, int CS>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const float* p) {
  a[0] = bits(p[0]);
  a[1] = bits(p[8 * RS]);
  a[2] = bits(p[4 * CS]);
  a[3] = bits(p[8 * RS + 4 * CS]);
}

/// B(k, n) = base[k * RS + n * CS]: the lane's base for the B fragment of the
/// tile whose (0, 0) is `tile`.
template <int RS, int CS>
__device__ __forceinline__ const float* b_base(const float* tile, lane_at l) {
  return tile + l.q * RS + l.g * CS;
}

template <int RS, int CS>
__device__ __forceinline__ void load_b(std::uint32_t (&b)[2], const float* p) {
  b[0] = bits(p[0]);
  b[1] = bits(p[4 * RS]);
}

/// C(m, n) = base[m * LD + n] (row-major): the lane's first element of the
/// tile whose (0, 0) is `tile`; c0 c1 there, c2 c3 eight rows down.
template <int LD, class T>
__device__ __forceinline__ T* c_base(T* tile, lane_at l) {
  return tile + l.g * LD + 2 * l.q;
}

/// c = the tile at `p` (from c_base) times `scale`.
template <int LD>
__device__ __forceinline__ void load_c(float (&c)[4], const float* p, float scale = 1.0F) {
  const float2 lo = *reinterpret_cast<const float2*>(p);
  const float2 hi = *reinterpret_cast<const float2*>(p + 8 * LD);
  c[0] = lo.x * scale;
  c[1] = lo.y * scale;
  c[2] = hi.x * scale;
  c[3] = hi.y * scale;
}

template <int LD>
__device__ __forceinline__ void store_c(float* p, const float (&c)[4]) {
  *reinterpret_cast<float2*>(p) = make_float2(c[0], c[1]);
  *reinterpret_cast<float2*>(p + 8 * LD) = make_float2(c[2], c[3]);
}

}  // namespace mstar::kernels::cuda::detail::tf32
