#pragma once

// The lean consumer of the wgmma prefill attention
// (attention_prefill_wgmma_lean.cu, `attention_prefill::wgmma_lean`): the
// per-tile work of one warpgroup with as few scalar instructions as the
// math allows. What it changes against internal/prefill_wgmma.cuh:
//   - descriptors are built once (a low and a high word) and each k step
//     adds a constant to the low word: the start address field is bits 0-13
//     of it and every operand address is a shared address under 256 KiB,
//     so (address >> 4) stays below 2^14 and the add never carries into
//     the leading byte offset at bit 16;
//   - S's first k step writes the accumulators (no zeroing of 64 registers);
//   - the row sums of P come from the tensor cores: after the 8 P V steps,
//     8 wgmma m64n8k16 of the same P against a 1,024-byte atom of bf16 ones
//     leave each row's sum of the bf16 P in every column of a 64 x 8
//     accumulator (lane's d[0] row g, d[2] row g + 8), so no shuffles and
//     no FP32 adds; the normaliser then sums exactly the weights P V used;
//   - lazy rescale: a row's reference maximum moves only when the tile's
//     scaled maximum passes it by more than `lean_margin` (log2 units), so
//     the weights stay below 2^8 and O, the sums and the final O / l are
//     exact in f32; where no row of the warp moves, nothing is rescaled
//     and no alpha is computed;
//   - only warps whose first row's position lies inside the tile mask.
// Only sm_90a .cu files include it.

#include <cmath>
#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/mma_bf16.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"
#include "kernels/cuda/internal/prefill_wgmma.cuh"
#include "kernels/cuda/internal/wgmma.cuh"

namespace mstar::kernels::cuda::detail {

// How far (log2 units) a row's tile maximum may pass its reference before
// the reference moves: weights stay at most 2^8, far inside f32 and bf16.
constexpr float lean_margin = 8.0F;

// Every operand here has SBO 1,024 (8-row groups of a 128-byte swizzle
// atom) and the 128-byte swizzle, so a descriptor's high word is this
// constant (a compile-time one, which the compiler keeps in a uniform
// register); the low word holds the address and the LBO.
constexpr std::uint32_t lean_desc_hi = (1024U >> 4) | 1U << 30;

// A descriptor's low word; at(bytes) is the descriptor of the operand
// `bytes` further on (bytes a multiple of 16, the sum still a shared
// address under 256 KiB: see the top of this file).
struct lean_desc {
  std::uint32_t lo;

  __device__ __forceinline__ std::uint64_t at(std::uint32_t bytes) const {
    return static_cast<std::uint64_t>(lo + (bytes >> 4)) | static_cast<std::uint64_t>(lean_desc_hi)
                                                               << 32;
  }
  __device__ __forceinline__ lean_desc plus(std::uint32_t bytes) const {
    return {lo + (bytes >> 4)};
  }
};

// The descriptor of a 128-byte-swizzled operand at `addr` with SBO 1,024
// (wgmma_desc's packing).
__device__ __forceinline__ lean_desc lean_desc_of(std::uint32_t addr, std::uint32_t lbo) {
  return {static_cast<std::uint32_t>(wgmma_desc(addr, lbo, 1024))};
}

// One warpgroup's running rows: O, the row sums (64 x 8 accumulator: every
// column the same sum), the reference maxima, and P of the last tile (the
// A operand of a P V that may still run).
template <int D>
struct lean_rows {
  float o[D / 8][4];
  float l[1][4];
  float m[2];
  std::uint32_t pa[8][4];

  __device__ __forceinline__ void start() {
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[dn][e] = 0.0F;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      l[0][e] = 0.0F;
    m[0] = -INFINITY;
    m[1] = -INFINITY;
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        pa[kk][j] = 0U;
    }
  }

  // After a wait that completes every wgmma group: O, l and P settled.
  __device__ __forceinline__ void settle() {
    wgmma_pin(o);
    wgmma_pin(l);
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        asm volatile("" : "+r"(pa[kk][j])::"memory");
    }
  }
};

// The warpgroup's descriptors: Q (its first row), the first K and V
// stages and the ones atom; a stage is kv_bytes further on.
struct lean_descs {
  lean_desc q;
  lean_desc k;
  lean_desc v;
  std::uint64_t ones;
};

template <int D>
__device__ __forceinline__ lean_descs lean_descs_of(std::uint32_t q_addr, std::uint32_t k0,
                                                    std::uint32_t v0, std::uint32_t ones) {
  constexpr int bn = wg_shape<D, true>::bn;
  // K-major Q and K: 8-row groups 1,024 bytes apart (LBO unused: 16);
  // MN-major V: 64-wide column blocks bn * 128 bytes apart, 8-row groups
  // 1,024.
  return {lean_desc_of(q_addr, 16), lean_desc_of(k0, 16), lean_desc_of(v0, bn * 128),
          lean_desc_of(ones, 16).at(0)};
}

// S = Q K^T (64 x bn) for one warpgroup as one committed group; `k`: the
// stage's K descriptor.
template <int D>
__device__ __forceinline__ void issue_s_lean(float (&s)[16][4], lean_desc q, lean_desc k) {
  using S = wg_shape<D, true>;
  wgmma_fence();
  wgmma_ss_n128_first(s, q.at(0), k.at(0));
#pragma unroll
  for (int kc = 1; kc < D / 16; ++kc) {
    const std::uint32_t in_row = (kc % 4) * 32U;
    wgmma_ss_n128(s, q.at((kc / 4) * S::tile_m * 128 + in_row),
                  k.at((kc / 4) * S::bn * 128 + in_row), true);
  }
  wgmma_commit();
}

// O += P V and l += P 1 for one warpgroup; `v`: the stage's V descriptor.
template <int D>
__device__ __forceinline__ void issue_pv_lean(lean_rows<D>& w, lean_desc v, std::uint64_t ones) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const std::uint64_t vd = v.at(kk * 16 * 128);
    if constexpr (D == 128)
      wgmma_rs_n128_mn(w.o, w.pa[kk], vd);
    else
      wgmma_rs_n64_mn(w.o, w.pa[kk], vd);
  }
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
    wgmma_rs_n8(w.l, w.pa[kk], ones);
}

// The lazy online softmax of a completed S tile (columns from t0) for the
// lane's rows g, g + 8: masked past p0 / p1 where `masked`; P (f32,
// unnormalised against the reference maxima) left in `s`.
template <int D>
__device__ __forceinline__ void softmax_lean(float (&s)[16][4], int t0, bool masked, int p0, int p1,
                                             float scale, lean_rows<D>& w) {
  if (masked) {
    const int c0 = t0 + 2 * (static_cast<int>(threadIdx.x) % 4);
#pragma unroll
    for (int n = 0; n < 16; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (c0 + n * 8 + (e & 1) > (e < 2 ? p0 : p1))
          s[n][e] = -INFINITY;
      }
    }
  }
  // Two chains a row half, so the max is not one long dependency.
  float top[4] = {s[0][0], s[0][2], s[0][1], s[0][3]};
#pragma unroll
  for (int n = 1; n < 16; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int slot = e / 2 + 2 * (e & 1);
      top[slot] = fmaxf(top[slot], s[n][e]);
    }
  }
  float t[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float x = fmaxf(top[h], top[h + 2]);
    x = fmaxf(x, __shfl_xor_sync(0xffffffffU, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffU, x, 2));
    t[h] = x * scale;
  }
  const bool up0 = t[0] > w.m[0] + lean_margin;
  const bool up1 = t[1] > w.m[1] + lean_margin;
  if (__any_sync(0xffffffffU, up0 || up1)) {  // warp-uniform, rare past the first tile
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool up = h == 0 ? up0 : up1;
      // A raised row had a finite tile maximum; from -inf its alpha is 0
      // (O and l are still zero).
      alpha[h] = up ? exp2_ftz(w.m[h] - t[h]) : 1.0F;
      w.m[h] = up ? t[h] : w.m[h];
    }
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      w.o[dn][0] *= alpha[0];
      w.o[dn][1] *= alpha[0];
      w.o[dn][2] *= alpha[1];
      w.o[dn][3] *= alpha[1];
    }
    w.l[0][0] *= alpha[0];
    w.l[0][1] *= alpha[0];
    w.l[0][2] *= alpha[1];
    w.l[0][3] *= alpha[1];
  }
  // A row with nothing seen yet has every score -inf: its weights are 0
  // against any finite reference.
  const float ref0 = w.m[0] == -INFINITY ? 0.0F : w.m[0];
  const float ref1 = w.m[1] == -INFINITY ? 0.0F : w.m[1];
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    s[n][0] = exp2_ftz(fmaf(s[n][0], scale, -ref0));
    s[n][1] = exp2_ftz(fmaf(s[n][1], scale, -ref0));
    s[n][2] = exp2_ftz(fmaf(s[n][2], scale, -ref1));
    s[n][3] = exp2_ftz(fmaf(s[n][3], scale, -ref1));
  }
}

// One warpgroup's 64 M rows against one K / V tile: S, the lazy softmax,
// P packed, O += P V and l += P 1 left in flight (the previous tile's
// completes at this tile's S wait). `masked`: the warp's rows reach into
// the tile (p0 / p1 the lane's rows' positions, asked only then).
template <int D>
__device__ __forceinline__ void attend_tile_lean(const lean_descs& dd, std::uint32_t buf, int t0,
                                                 bool masked, const row_place& place, float scale,
                                                 lean_rows<D>& w) {
  float s[16][4];
  issue_s_lean<D>(s, dd.q, dd.k.plus(buf));
  wgmma_wait<0>();  // S, and the previous tile's P V
  wgmma_pin(s);
  w.settle();
  int p0 = 0;
  int p1 = 0;
  if (masked) {
    const int f = place.fw + static_cast<int>(threadIdx.x) % 32 / 4;
    p0 = place.pos_of(f);
    p1 = place.pos_of(f + 8);
  }
  softmax_lean<D>(s, t0, masked, p0, p1, scale, w);
  pack_p(s, w.pa);
  wgmma_pin(w.o);
  wgmma_pin(w.l);
  wgmma_fence();
  issue_pv_lean<D>(w, dd.v.plus(buf), dd.ones);
  wgmma_commit();
}

// Writes the warp's normalised output rows (first M row fw), skipping M
// rows past the row's last. The sums are whole rows already.
template <int D>
__device__ __forceinline__ void store_rows_lean(const attn_args& a, const row_info& ri, int kvh,
                                                int fw, int m_rows, const lean_rows<D>& w) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int f = fw + lane / 4 + 8 * h;
    if (f >= m_rows)
      continue;
    const float inv = 1.0F / w.l[0][2 * h];
    const int token = ri.first_token + f / a.group;
    const int head = kvh * a.group + f % a.group;
    float* op = a.out + (static_cast<std::size_t>(token) * a.q_heads + head) * D;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<float2*>(op + dn * 8 + 2 * (lane % 4)) =
          make_float2(w.o[dn][2 * h] * inv, w.o[dn][2 * h + 1] * inv);
    }
  }
}

}  // namespace mstar::kernels::cuda::detail
