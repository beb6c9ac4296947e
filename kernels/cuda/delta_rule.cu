// Qwen3.5's gated delta rule, its head-gated norm, the attention output gate
// and M-RoPE on the device (kernels/cuda/delta_rule.hpp).
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/delta_rule.hpp"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/delta_rule_decode.cuh"
#include "kernels/cuda/internal/delta_rule_scan.hpp"
#include "kernels/cuda/internal/delta_rule_step.cuh"

namespace mstar::kernels::cuda {
namespace {

constexpr int rule_threads = 128;
constexpr int chunks = 4;  // float4 chunks of key columns per thread: 16 columns

using detail::decay_beta;
using detail::dot4;
using detail::load_coherent;
using detail::rule_args;
using detail::token_scalars;

// One token's inputs for one thread: its key columns of q and k, its value
// row's v, and the head's raw a and b.
struct token_in {
  float4 q[chunks];
  float4 k[chunks];
  float v, a, b;
};

template <int Lanes>
__device__ __forceinline__ void load_token(const rule_args& p, std::int64_t t, int h, int kh,
                                           int vi, int lane, bool valid, token_in& in) {
  const float* row = p.qkv + t * p.qkv_stride;
  const auto* q = reinterpret_cast<const float4*>(row + static_cast<std::int64_t>(kh) * p.k_dim);
  const auto* k =
      reinterpret_cast<const float4*>(row + static_cast<std::int64_t>(p.hk + kh) * p.k_dim);
#pragma unroll
  for (int j = 0; j < chunks; ++j) {
    const int c = lane + j * Lanes;
    const bool ok = 4 * c < p.k_dim;
    in.q[j] = ok ? load_coherent(q + c) : make_float4(0.F, 0.F, 0.F, 0.F);
    in.k[j] = ok ? load_coherent(k + c) : make_float4(0.F, 0.F, 0.F, 0.F);
  }
  in.v = valid ? load_coherent(row + 2 * static_cast<std::int64_t>(p.hk) * p.k_dim +
                               static_cast<std::int64_t>(h) * p.v_dim + vi)
               : 0.0F;
  in.a = load_coherent(p.a + t * p.ab_stride + h);
  in.b = load_coherent(p.b + t * p.ab_stride + h);
}

// One token of the rule on this thread's 16 columns of its value row; returns
// the row's output. S' = decay S + u k^T with k normalised, so S' q = decay
// S q + u (k q): both dot products come from the old S, one reduction.
template <int Lanes>
__device__ __forceinline__ float rule_step(float4 (&s)[chunks], const token_in& in, float v,
                                           const token_scalars& sc) {
  float sk = 0.F, sq = 0.F;
#pragma unroll
  for (int j = 0; j < chunks; ++j) {
    sk = dot4(s[j], in.k[j], sk);
    sq = dot4(s[j], in.q[j], sq);
  }
  sk = detail::group_sum<Lanes>(sk);
  sq = detail::group_sum<Lanes>(sq);
  const float u = sc.beta * (v - sc.decay * sk * sc.inv_k);
  const float uk = u * sc.inv_k;
#pragma unroll
  for (int j = 0; j < chunks; ++j) {
    s[j].x = fmaf(uk, in.k[j].x, sc.decay * s[j].x);
    s[j].y = fmaf(uk, in.k[j].y, sc.decay * s[j].y);
    s[j].z = fmaf(uk, in.k[j].z, sc.decay * s[j].z);
    s[j].w = fmaf(uk, in.k[j].w, sc.decay * s[j].w);
  }
  return (sc.decay * sq + u * sc.kq * sc.inv_k) * sc.inv_q;
}

constexpr int tile = rule_threads / 2;  // tokens whose scalars a prefill block makes at once

// Block (x, h, r): value rows [x * rows_per_block, ...) of head h of row r;
// `Lanes` consecutive lanes share one value row, 16 key columns each.
// Decode (a row or two of tokens): each thread takes the token's norms and
// k . q itself, nothing prefetched, few registers, many blocks resident: the
// state's loads are the traffic. Prefill: the block first makes `tile`
// tokens' scalars in shared memory (two threads per token), then scans them
// with the next token's q / k / v prefetched.
// Stream: cache-streaming hints on the state's loads (bit 0) and stores (bit 1).
template <int Lanes, bool Decode, int Threads = rule_threads, int RowsPerThread = 2, int Stream = 0>
__global__ void __launch_bounds__(Threads, 512 / Threads) gated_delta_rule_kernel(rule_args p) {
  detail::chain_start();
  // A decode thread may keep several value rows (more state loads in flight).
  constexpr int rows_per_thread = Decode ? RowsPerThread : 1;
  constexpr int rows_per_block = Threads / Lanes * rows_per_thread;
  __shared__ token_scalars scalars[Decode ? 1 : tile];
  const int r = static_cast<int>(blockIdx.z);
  const int h = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % Lanes;
  int vis[rows_per_thread];
  bool valids[rows_per_thread];
#pragma unroll
  for (int m = 0; m < rows_per_thread; ++m) {
    vis[m] = static_cast<int>(blockIdx.x) * rows_per_block + m * (Threads / Lanes) +
             static_cast<int>(threadIdx.x) / Lanes;
    valids[m] = vis[m] < p.v_dim;
  }
  const int vi = vis[0];
  const bool valid = valids[0];
  const std::int64_t t0 = p.cu[r];
  const std::int64_t t1 = p.cu[r + 1];
  const std::int32_t slot = p.slots[r];
  if (p.chunked_rows != nullptr && p.chunked_rows[r] >= 0)
    return;
  if (slot < 0) {
#pragma unroll
    for (int m = 0; m < rows_per_thread; ++m) {
      if (valids[m] && lane == 0) {
        for (std::int64_t t = t0; t < t1; ++t)
          p.out[(t * p.hv + h) * p.v_dim + vis[m]] = 0.0F;
      }
    }
    return;
  }
  if (t1 == t0)
    return;
  const int kh = h / p.group;
  const bool carried = p.has_state[r] != 0;
  float4* s_rows[rows_per_thread];
  float4 s[rows_per_thread][chunks];
#pragma unroll
  for (int m = 0; m < rows_per_thread; ++m) {
    s_rows[m] = reinterpret_cast<float4*>(
        p.state +
        ((static_cast<std::int64_t>(slot) * p.hv + h) * p.v_dim + (valids[m] ? vis[m] : 0)) *
            p.k_dim);
#pragma unroll
    for (int j = 0; j < chunks; ++j) {
      const int c = lane + j * Lanes;
      const bool in = carried && valids[m] && 4 * c < p.k_dim;
      if constexpr ((Stream & 1) != 0)
        s[m][j] = in ? __ldcs(s_rows[m] + c) : make_float4(0.F, 0.F, 0.F, 0.F);
      else
        s[m][j] = in ? s_rows[m][c] : make_float4(0.F, 0.F, 0.F, 0.F);
    }
  }
  const float a_coef = -expf(p.a_log[h]);
  const float bias = p.dt_bias[h];
  if constexpr (Decode) {
    for (std::int64_t t = t0; t < t1; ++t) {
      token_in in;
      load_token<Lanes>(p, t, h, kh, vi, lane, valid, in);
      float kq = 0.F, kk = 0.F, qq = 0.F;
#pragma unroll
      for (int j = 0; j < chunks; ++j) {
        kq = dot4(in.k[j], in.q[j], kq);
        kk = dot4(in.k[j], in.k[j], kk);
        qq = dot4(in.q[j], in.q[j], qq);
      }
      token_scalars sc;
      sc.kq = detail::group_sum<Lanes>(kq);
      sc.inv_k = 1.0F / sqrtf(detail::group_sum<Lanes>(kk) + 1e-6F);
      sc.inv_q = p.scale / sqrtf(detail::group_sum<Lanes>(qq) + 1e-6F);
      decay_beta(in.a, in.b, a_coef, bias, sc);
#pragma unroll
      for (int m = 0; m < rows_per_thread; ++m) {
        const float v = m == 0      ? in.v
                        : valids[m] ? load_coherent(p.qkv + t * p.qkv_stride +
                                                    2 * static_cast<std::int64_t>(p.hk) * p.k_dim +
                                                    static_cast<std::int64_t>(h) * p.v_dim + vis[m])
                                    : 0.0F;
        const float o = rule_step<Lanes>(s[m], in, v, sc);
        if (valids[m] && lane == 0)
          p.out[(t * p.hv + h) * p.v_dim + vis[m]] = o;
      }
    }
  } else {
    token_in cur;
    token_in next;
    load_token<Lanes>(p, t0, h, kh, vi, lane, valid, cur);
    for (std::int64_t base = t0; base < t1; base += tile) {
      const int n = static_cast<int>(t1 - base < tile ? t1 - base : std::int64_t{tile});
      __syncthreads();  // the previous tile's scalars are consumed
      {
        const int j = static_cast<int>(threadIdx.x) / 2;
        const int half = static_cast<int>(threadIdx.x) % 2;
        float kq = 0.F, kk = 0.F, qq = 0.F;
        if (j < n) {
          const float* row = p.qkv + (base + j) * p.qkv_stride;
          const auto* q4 =
              reinterpret_cast<const float4*>(row + static_cast<std::int64_t>(kh) * p.k_dim);
          const auto* k4 =
              reinterpret_cast<const float4*>(row + static_cast<std::int64_t>(p.hk + kh) * p.k_dim);
          for (int c = half; 4 * c < p.k_dim; c += 2) {
            const float4 q = load_coherent(q4 + c);
            const float4 k = load_coherent(k4 + c);
            kq = dot4(k, q, kq);
            kk = dot4(k, k, kk);
            qq = dot4(q, q, qq);
          }
        }
        kq += __shfl_xor_sync(0xffffffffU, kq, 1);
        kk += __shfl_xor_sync(0xffffffffU, kk, 1);
        qq += __shfl_xor_sync(0xffffffffU, qq, 1);
        if (j < n && half == 0) {
          token_scalars sc;
          sc.kq = kq;
          sc.inv_k = 1.0F / sqrtf(kk + 1e-6F);
          sc.inv_q = p.scale / sqrtf(qq + 1e-6F);
          const std::int64_t t = base + j;
          decay_beta(load_coherent(p.a + t * p.ab_stride + h),
                     load_coherent(p.b + t * p.ab_stride + h), a_coef, bias, sc);
          scalars[j] = sc;
        }
      }
      __syncthreads();
      for (int i = 0; i < n; ++i) {
        const std::int64_t t = base + i;
        if (t + 1 < t1)
          load_token<Lanes>(p, t + 1, h, kh, vi, lane, valid, next);
        const float o = rule_step<Lanes>(s[0], cur, cur.v, scalars[i]);
        if (valid && lane == 0)
          p.out[(t * p.hv + h) * p.v_dim + vi] = o;
        cur = next;
      }
    }
  }
#pragma unroll
  for (int m = 0; m < rows_per_thread; ++m) {
    if (!valids[m])
      continue;
#pragma unroll
    for (int j = 0; j < chunks; ++j) {
      const int c = lane + j * Lanes;
      if (4 * c < p.k_dim) {
        if constexpr ((Stream & 2) != 0)
          __stcs(s_rows[m] + c, s[m][j]);
        else
          s_rows[m][c] = s[m][j];
      }
    }
  }
}

template <int Lanes, int Threads, int RowsPerThread, int Stream>
void launch_decode(const rule_args& a, int rows, cudaStream_t stream) {
  const int rows_per_block = Threads / Lanes * RowsPerThread;
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(a.v_dim, rows_per_block)),
                  static_cast<unsigned>(a.hv), static_cast<unsigned>(rows));
  detail::launch_chained(gated_delta_rule_kernel<Lanes, true, Threads, RowsPerThread, Stream>, grid,
                         Threads, 0, stream, a);
}

// The reduced-register kernel (internal/delta_rule_decode.cuh) in shape `S`
// where it takes the step (K = 16 Lanes, V a multiple of its rows a block),
// else the default shapes below.
template <int Lanes, detail::decode_shape S>
void launch_reduced(const rule_args& a, int rows, cudaStream_t stream) {
  if (detail::decode_shape_fits<Lanes, S>(a))
    detail::launch_decode_shape<Lanes, S>(a, rows, stream);
  else if (rows >= 32)
    launch_decode<Lanes, 32, 2, 3>(a, rows, stream);
  else
    launch_decode<Lanes, 32, 2, 0>(a, rows, stream);
}

// Its shapes: key columns a lane (16: 8 lanes a row at K 128; 4: a warp a
// row), threads a block, value rows a thread, streaming hints (default 3:
// loads and stores), q / k staged per warp in shared memory, the halving
// butterfly for S k / S q, the register cap (at K 128 it sets the warps an
// SM: four 16K-register files hold 4 floor(512 / cap) warps, cap rounded up
// to 8; at most 32 blocks an SM).
using detail::decode_shape;
constexpr decode_shape smem_32x2{.shared_qk = true, .max_regs = 64};
constexpr decode_shape smem_32x2_uncapped{.shared_qk = true};
constexpr decode_shape smem_64x2{.threads = 64, .shared_qk = true, .max_regs = 64};
constexpr decode_shape smem_32x4_split{
    .rows = 4, .shared_qk = true, .split_sums = true, .max_regs = 96};
constexpr decode_shape smem_64x4_split{
    .threads = 64, .rows = 4, .shared_qk = true, .split_sums = true, .max_regs = 96};
constexpr decode_shape smem_32x2_cached{.stream = 0, .shared_qk = true, .max_regs = 64};
constexpr decode_shape smem_32x2_split{.shared_qk = true, .split_sums = true, .max_regs = 64};
constexpr decode_shape warp_32x8_split{.cols = 4, .rows = 8, .split_sums = true, .max_regs = 72};
constexpr decode_shape warp_32x8{.cols = 4, .rows = 8, .max_regs = 72};
constexpr decode_shape warp_32x8_split_64{.cols = 4, .rows = 8, .split_sums = true, .max_regs = 64};
constexpr decode_shape warp_32x4_split{.cols = 4, .rows = 4, .split_sums = true, .max_regs = 64};
constexpr decode_shape warp_64x4_split{
    .cols = 4, .threads = 64, .rows = 4, .split_sums = true, .max_regs = 56};
constexpr decode_shape half_32x4_split{.cols = 8, .rows = 4, .split_sums = true, .max_regs = 80};
constexpr decode_shape warp_32x8_split_cached{
    .cols = 4, .rows = 8, .stream = 0, .split_sums = true, .max_regs = 72};
constexpr decode_shape smem_64x1_split{
    .threads = 64, .rows = 1, .shared_qk = true, .split_sums = true, .max_regs = 48};
constexpr decode_shape smem_32x8_split{
    .rows = 8, .shared_qk = true, .split_sums = true, .max_regs = 168};
constexpr decode_shape smem_32x2_split_cached{
    .stream = 0, .shared_qk = true, .split_sums = true, .max_regs = 64};
constexpr decode_shape smem_32x2_split_pdl{
    .shared_qk = true, .split_sums = true, .max_regs = 64, .pdl = true};
constexpr decode_shape smem_32x2_split_cached_pdl{
    .stream = 0, .shared_qk = true, .split_sums = true, .max_regs = 64, .pdl = true};

// Decode launch shapes. 0-13: the scan kernel's decode instantiation,
// <threads a block, value rows a thread, streaming hints>; 14 on: the
// reduced-register kernel. Few rows are latency bound: small blocks, many
// of them. Many rows stream the whole state once: streaming hints keep it
// from evicting the step's inputs. Indices never change (older sweeps stay
// comparable); `MSTAR_DELTA_DECODE_VARIANT` (an index) overrides the choice
// at K 128 and `gated_delta_rule_decode_variant` at any K, for the sweeps
// (bench/h200_delta_decode.sh) and the tests.
template <int Lanes>
using decode_launch = void (*)(const rule_args&, int, cudaStream_t);
template <int Lanes>
constexpr decode_launch<Lanes> decode_table[] = {
    launch_decode<Lanes, 128, 2, 0>,  // 0
    launch_decode<Lanes, 64, 2, 0>,   // 1
    launch_decode<Lanes, 128, 2, 3>,  // 2
    launch_decode<Lanes, 64, 2, 3>,   // 3
    launch_decode<Lanes, 32, 2, 0>,   // 4: the default below 32 rows until run 5
    launch_decode<Lanes, 64, 1, 3>,   // 5
    launch_decode<Lanes, 32, 2, 3>,   // 6: the default from 32 rows until run 5
    launch_decode<Lanes, 32, 1, 3>,   // 7
    launch_decode<Lanes, 32, 4, 3>,   // 8
    launch_decode<Lanes, 128, 4, 3>,  // 9
    launch_decode<Lanes, 32, 2, 1>,   // 10
    launch_decode<Lanes, 32, 2, 2>,   // 11
    launch_decode<Lanes, 32, 4, 0>,   // 12
    launch_decode<Lanes, 64, 2, 1>,   // 13
    // 14: 6's shape, q / k in shared memory, 64 registers (32 warps an SM)
    launch_reduced<Lanes, smem_32x2>,
    // 15: 14 uncapped (ptxas takes 107 registers: 16 warps, as 6), the code without the occupancy
    launch_reduced<Lanes, smem_32x2_uncapped>,
    // 16: 14 with two warps a block
    launch_reduced<Lanes, smem_64x2>,
    // 17: 14 with four value rows a thread and the halving butterfly, 96 registers (20 warps)
    launch_reduced<Lanes, smem_32x4_split>,
    // 18: 17 with two warps a block
    launch_reduced<Lanes, smem_64x4_split>,
    // 19: 14 without streaming hints (4's counterpart, for few rows)
    launch_reduced<Lanes, smem_32x2_cached>,
    // 20: 14 with the halving butterfly
    launch_reduced<Lanes, smem_32x2_split>,
    // 21: a warp a value row, one float4 of q / k a lane, 8 rows a thread
    // (flash-linear-attention's tiling), halving butterfly, 72 registers (28 warps)
    launch_reduced<Lanes, warp_32x8_split>,
    // 22: 21 with a warp sum a row (80 shuffles a token for S k / S q, not 25)
    launch_reduced<Lanes, warp_32x8>,
    // 23: 21 at 64 registers (32 warps)
    launch_reduced<Lanes, warp_32x8_split_64>,
    // 24: 21 with 4 rows a thread, 64 registers (32 warps, half the state a warp)
    launch_reduced<Lanes, warp_32x4_split>,
    // 25: 24 with two warps a block, 56 registers (36 warps)
    launch_reduced<Lanes, warp_64x4_split>,
    // 26: half a warp a row, two float4 of q / k a lane, 4 rows a thread, 80 registers (24 warps)
    launch_reduced<Lanes, half_32x4_split>,
    // 27: 21 without streaming hints (for few rows)
    launch_reduced<Lanes, warp_32x8_split_cached>,
    // 28: one row a thread, q / k in shared memory, two warps a block, 48 registers (40 warps)
    launch_reduced<Lanes, smem_64x1_split>,
    // 29: 20 without streaming hints (for few rows)
    launch_reduced<Lanes, smem_32x2_split_cached>,
    // 30: 17 with eight value rows a thread, 168 registers (12 warps, 512 B of state a thread)
    launch_reduced<Lanes, smem_32x8_split>,
    // 31: 20 launched as a programmatic dependent launch (the launch and the
    // first blocks' dispatch behind the previous kernel's last blocks)
    launch_reduced<Lanes, smem_32x2_split_pdl>,
    // 32: 29 so launched
    launch_reduced<Lanes, smem_32x2_split_cached_pdl>,
};
static_assert(std::size(decode_table<8>) == gated_delta_decode_variants);

int decode_override() {
  static const int v = [] {
    const char* e = std::getenv("MSTAR_DELTA_DECODE_VARIANT");
    if (e == nullptr)
      return -1;
    const int i = std::atoi(e);
    return i >= 0 && i < gated_delta_decode_variants ? i : -1;
  }();
  return v;
}

// `variant`: a decode_table index, or -1 for the choice by row count.
template <int Lanes>
cudaError_t launch_rule(const rule_args& a, int rows, bool decode, int variant,
                        cudaStream_t stream) {
  if (decode) {
    // A warp a value row (fla's tiling), q / k a float4 a lane, the halving
    // butterfly, 8 rows a thread, 72 registers, cached loads: entry 27 at
    // every row count (bench/results/h200-delta-rule.md, run 6: 2.54 / 12.63
    // / 68.66 / 135.14 / 267.74 us at 1 / 16 / 64 / 128 / 256 rows, where 24,
    // the default from 32 rows before, took 68.77 / 136.66 / 276.28 at 64 /
    // 128 / 256). Shapes it does not take run 4 / 6 (launch_reduced). The
    // sweep covers K 128 only.
    const int forced = variant >= 0 ? variant : Lanes == 8 ? decode_override() : -1;
    decode_table<Lanes>[forced >= 0 ? forced : 27](a, rows, stream);
    return detail::launch_status();
  }
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(a.v_dim, rule_threads / Lanes)),
                  static_cast<unsigned>(a.hv), static_cast<unsigned>(rows));
  detail::launch_chained(gated_delta_rule_kernel<Lanes, false>, grid, rule_threads, 0, stream, a);
  return detail::launch_status();
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

// One warp per (token, head).
__global__ void head_gated_rms_norm_kernel(head_gated_rms_norm_params p, std::int64_t gate_stride) {
  detail::chain_start();
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (std::int64_t w = std::int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32;
       w < p.tokens * p.heads; w += warps) {
    const std::int64_t t = w / p.heads;
    const std::int64_t h = w % p.heads;
    const float* x = p.x + w * p.head_dim;
    const float* z = p.gate + t * gate_stride + h * p.head_dim;
    float sum = 0.0F;
    for (int d = lane; d < p.head_dim; d += 32)
      sum = fmaf(x[d], x[d], sum);
    sum = detail::group_sum(sum);
    const float inv = 1.0F / sqrtf(sum / static_cast<float>(p.head_dim) + p.eps);
    for (int d = lane; d < p.head_dim; d += 32) {
      const float gate = z[d] / (1.0F + expf(-z[d]));
      const float o = x[d] * inv * p.weight[d] * gate;
      if (p.out_bf16 != nullptr)
        p.out_bf16[w * p.head_dim + d] = detail::to_bf16(o);
      if (p.out != nullptr)
        p.out[w * p.head_dim + d] = o;
    }
  }
}

__global__ void output_gate_kernel(output_gate_params p) {
  detail::chain_start();
  const std::int64_t n = p.tokens * p.heads * p.head_dim;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t d = i % p.head_dim;
    const std::int64_t h = (i / p.head_dim) % p.heads;
    const std::int64_t t = i / (std::int64_t{p.head_dim} * p.heads);
    const float g = p.gate[t * p.gate_token_stride + h * p.gate_head_stride + d];
    const float o = p.x[i] * (1.0F / (1.0F + expf(-g)));
    if (p.out_bf16 != nullptr)
      p.out_bf16[i] = detail::to_bf16(o);
    if (p.out != nullptr)
      p.out[i] = o;
  }
}

struct mrope_args {
  float* x;
  std::int64_t tokens, heads, ts, hs, cs;
  const std::int32_t* positions;
  std::int64_t ps0, ps1;  // positions' strides: component, token
  const float* inv_freq;
  std::int64_t fs, half;
  std::int64_t sections1, sections2;
};

// Thread (t, i) rotates pair (i, i + half) of every head of token t.
__global__ void mrope_kernel(mrope_args a) {
  detail::chain_start();
  for (std::int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
    for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.half;
         i += std::int64_t{gridDim.x} * blockDim.x) {
      std::int64_t c = 0;
      if (i % 3 == 1 && i < 3 * a.sections1)
        c = 1;
      else if (i % 3 == 2 && i < 3 * a.sections2)
        c = 2;
      const double angle =
          static_cast<double>(a.positions[c * a.ps0 + t * a.ps1]) * double{a.inv_freq[i * a.fs]};
      double sn = 0.0;
      double cs = 0.0;
      sincos(angle, &sn, &cs);
      const auto cf = static_cast<float>(cs);
      const auto sf = static_cast<float>(sn);
      for (std::int64_t h = 0; h < a.heads; ++h) {
        float* row = a.x + t * a.ts + h * a.hs;
        const float va = row[i * a.cs];
        const float vb = row[(i + a.half) * a.cs];
        row[i * a.cs] = va * cf - vb * sf;
        row[(i + a.half) * a.cs] = vb * cf + va * sf;
      }
    }
  }
}

unsigned blocks_for(std::int64_t threads, int per_block) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>(detail::ceil_div(threads, per_block), 1, 65535));
}

}  // namespace

cudaError_t gated_delta_rule_varlen(const gated_delta_rule_params& p, cudaStream_t stream) {
  return detail::launch_gated_delta_scan(p, nullptr, stream);
}

cudaError_t gated_delta_rule_decode_variant(const gated_delta_rule_params& p, int variant,
                                            cudaStream_t stream) {
  if (variant < -1 || variant >= gated_delta_decode_variants)
    return cudaErrorInvalidValue;
  return detail::launch_gated_delta_scan(p, nullptr, stream, variant);
}

cudaError_t detail::launch_gated_delta_scan(const gated_delta_rule_params& p,
                                            const std::int32_t* chunked_rows, cudaStream_t stream,
                                            int decode_variant) {
  const auto& w = p.w;
  if (p.cu_seqlens.size() < 2)
    return cudaSuccess;
  const auto rows = static_cast<std::int64_t>(p.cu_seqlens.size()) - 1;
  const std::int64_t qkv_stride = p.in.qkv_stride != 0
                                      ? p.in.qkv_stride
                                      : 2 * std::int64_t{w.num_k_heads} * w.head_k_dim +
                                            std::int64_t{w.num_v_heads} * w.head_v_dim;
  if (w.num_k_heads <= 0 || w.num_v_heads <= 0 || w.num_v_heads % w.num_k_heads != 0 ||
      w.num_v_heads > 65535 || w.head_k_dim <= 0 || w.head_k_dim % 4 != 0 ||
      w.head_k_dim > 16 * 16 || w.head_v_dim <= 0 || rows > 65535 || qkv_stride % 4 != 0 ||
      p.slot_indices.size() < static_cast<std::size_t>(rows) ||
      p.has_state.size() < static_cast<std::size_t>(rows) || !aligned16(p.in.qkv) ||
      !aligned16(p.state)) {
    return cudaErrorInvalidValue;
  }
  rule_args a{};
  a.a_log = w.a_log;
  a.dt_bias = w.dt_bias;
  a.hk = w.num_k_heads;
  a.hv = w.num_v_heads;
  a.k_dim = w.head_k_dim;
  a.v_dim = w.head_v_dim;
  a.group = w.num_v_heads / w.num_k_heads;
  a.scale = w.scale != 0.0F ? w.scale : 1.0F / sqrtf(static_cast<float>(w.head_k_dim));
  a.qkv = p.in.qkv;
  a.qkv_stride = qkv_stride;
  a.a = p.in.a;
  a.b = p.in.b;
  a.ab_stride = p.in.ab_stride != 0 ? p.in.ab_stride : w.num_v_heads;
  a.out = p.out;
  a.cu = p.cu_seqlens.data();
  a.state = p.state;
  a.slots = p.slot_indices.data();
  a.has_state = p.has_state.data();
  a.chunked_rows = chunked_rows;
  const int r = static_cast<int>(rows);
  // The fewest lanes whose 16 columns each cover K.
  const int k = w.head_k_dim;
  if (k <= 16)
    return launch_rule<1>(a, r, p.decode, decode_variant, stream);
  if (k <= 32)
    return launch_rule<2>(a, r, p.decode, decode_variant, stream);
  if (k <= 64)
    return launch_rule<4>(a, r, p.decode, decode_variant, stream);
  if (k <= 128)
    return launch_rule<8>(a, r, p.decode, decode_variant, stream);
  return launch_rule<16>(a, r, p.decode, decode_variant, stream);
}

cudaError_t head_gated_rms_norm(const head_gated_rms_norm_params& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.heads <= 0 || p.head_dim <= 0 || p.head_dim > 1024 ||
      (p.tokens > 0 && p.out == nullptr && p.out_bf16 == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (p.tokens == 0)
    return cudaSuccess;
  const std::int64_t gate_stride =
      p.gate_stride != 0 ? p.gate_stride : std::int64_t{p.heads} * p.head_dim;
  constexpr int threads = 256;
  detail::launch_chained(head_gated_rms_norm_kernel, blocks_for(p.tokens * p.heads * 32, threads),
                         threads, 0, stream, p, gate_stride);
  return detail::launch_status();
}

cudaError_t output_gate(const output_gate_params& p, cudaStream_t stream) {
  if (p.tokens < 0 || p.heads <= 0 || p.head_dim <= 0 ||
      (p.tokens > 0 && p.out == nullptr && p.out_bf16 == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (p.tokens == 0)
    return cudaSuccess;
  constexpr int threads = 256;
  detail::launch_chained(output_gate_kernel, blocks_for(p.tokens * p.heads * p.head_dim, threads),
                         threads, 0, stream, p);
  return detail::launch_status();
}

cudaError_t mrope(const mrope_params& p, cudaStream_t stream) {
  const std::int64_t half = p.inv_freq.shape[0];
  if (p.x.data == nullptr && p.x.numel() != 0)
    return cudaErrorInvalidValue;
  if (p.positions.shape[0] != 3 || p.positions.shape[1] != p.x.shape[0] || half <= 0 ||
      2 * half > p.x.shape[2]) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  mrope_args a{p.x.data,         p.x.shape[0],           p.x.shape[1],
               p.x.strides[0],   p.x.strides[1],         p.x.strides[2],
               p.positions.data, p.positions.strides[0], p.positions.strides[1],
               p.inv_freq.data,  p.inv_freq.strides[0],  half,
               p.sections[1],    p.sections[2]};
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(half, 64)),
                  static_cast<unsigned>(std::min<std::int64_t>(p.x.shape[0], 65535)));
  detail::launch_chained(mrope_kernel, grid, 64, 0, stream, a);
  return detail::launch_status();
}

}  // namespace mstar::kernels::cuda
