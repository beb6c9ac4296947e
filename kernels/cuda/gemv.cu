// One row times a bf16 weight matrix (kernels/cuda/math.hpp's linear_bf16 at
// one row: a batch-1 decode step): the weights are read once, in one kernel
// (cuBLAS adds split-K reduction kernels there). A warp owns one or more
// output features (a launch shape of gemv_shape.hpp's table): each lane
// streams 16-byte pieces of their weight rows (several pieces a row in
// flight), dots them with the same pieces of the input row (read through
// L1), and the warp sums its lanes at the end. Narrow products (few output
// features for the SMs) take shapes in which several warps of a block share
// a feature's K and add their sums through shared memory in a fixed order,
// so more warps stream, and more of each row is in flight, at once (the
// split-K of cuBLAS inside one block, no second kernel). f32 accumulation
// throughout. The kernel takes up to 8 input
// rows (M), but from 4 rows it was 2-7x slower than cuBLAS (bench/results/h200-kernels17.md), so
// linear_bf16 sends it one row only (gemv_max_rows).
//
// Folds for a batch-1 decode step (the step's small kernels cost ~5 us
// each, bench/results/h200-kernels17.md): `accumulate` adds the product to
// the f32 output (a residual stream taking its row-parallel projection, so
// no add kernel follows), and two forms build their input themselves while
// each block's first weight pieces are in flight, so no norm kernel
// precedes them: the RMS-norm form (rms_norm_linear_bf16) norms the f32 row
// into shared memory as add_rms_norm would (same thread layout, same sums,
// same rounding), the gated form (gated_rms_norm_linear_bf16) as
// gated_rms_norm's warp form would (its warp body, internal/gated_norm.cuh,
// a group a warp). A third form takes an f32 row as it is or activated
// (activation_linear_bf16): the block rounds it, or activate's bf16 output
// of it (internal/activation.cuh, the same quads), into shared memory, so
// neither to_bf16 nor the MLP's activation kernel precedes the product.
//
// Chained launches (programmatic dependent launch, internal/common.cuh):
// the first weight pieces load before the wait for the kernel before, where
// the caller marks the weights static; the kernel after is released at the
// start where the whole grid is resident at once, else once the dots are
// done (`MSTAR_GEMV_CHAIN`, gemv_chain_mode below); a product at K <= 2,048
// whose grid would be more than one wave takes an entry of the same bits
// whose grid is one, where there is one (the one-wave pick, pick_launch).
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cuda/gemv_shape.hpp"
#include "kernels/cuda/internal/activation.cuh"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/conv_fast.cuh"
#include "kernels/cuda/internal/gated_norm.cuh"
#include "kernels/cuda/internal/gemv.hpp"
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/paged.cuh"
#include "kernels/cuda/internal/select.cuh"
#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda::detail {
namespace {

// add_rms_norm's block: the RMS form sums its squares over this many
// threads' columns whatever its own block, so its norm is add_rms_norm's.
constexpr int rms_sum_threads = 256;

enum : std::uint8_t { accumulate_none = 0, accumulate_late = 1, accumulate_early = 2 };
enum : std::uint8_t { prefetch_rows = 1, prefetch_norm = 2 };
enum : std::uint8_t { release_start = 0, release_late = 1, release_last = 2 };

struct gemv_args {
  const std::uint16_t* x;
  std::int64_t x_stride;
  const std::uint16_t* w;
  std::int64_t w_stride;
  const float* bias;  // null: none
  std::int64_t bias_stride;
  float* out_f32;
  std::uint16_t* out_bf16;
  std::int64_t out_stride;
  int m, n, k;
  // Where out_f32 takes the product: write it (accumulate_none), or add it
  // onto what is there, read by the writing lane after the sums
  // (accumulate_late) or, one-row kernels, right after the wait, under the
  // prologue and the dots (accumulate_early, math.hpp's gemv_residual_early:
  // the same sum, one L2 round trip fewer at the kernel's end). A byte, not
  // a second flag: the struct stays at 128 bytes (see gemv_bf16_kernel).
  std::uint8_t accumulate;
  // Chained, what is asked of L2 before the wait (bits): prefetch_rows the
  // weight pieces past the first load, prefetch_norm the norm forms' norm
  // weight (a line a thread, 32 floats; where its stride is 1).
  std::uint8_t prefetch;
  // Chained: when the next kernel is released (release_start, release_late:
  // after the dots, release_last: once the last weight pieces are asked for).
  std::uint8_t release;
  bool weight_static;  // the weights are no kernel's output: loaded before the wait
  // The norm forms: x is unused; the input is norm(xn) * norm_w in bf16
  // (the gated form: norm(xn * silu(gate)) by groups; its gate is the
  // kernel's second argument). The activation form: fn(xn) (times the
  // second argument, `up`, where not null) in bf16; norm_w and eps unused.
  const float* xn;
  std::int64_t xn_stride;  // along K (the gated form: 1)
  const float* norm_w;
  std::int64_t norm_w_stride;  // the gated form: 1
  float eps;
};
// Past 128 bytes ptxas chose other registers for the forms (gemv_bf16_kernel).
static_assert(sizeof(gemv_args) == 128);

// The RMS form's conv fold (conv_step_fold; the form's V 1): lane 0 of the
// warp that owns output feature `first + c` (a split group's first warp)
// also runs channel c's conv step on that output, as conv_step_kernel
// (internal/conv_fast.cuh) would: the same sums in the same order, the same
// finish. Instantiations without the bit never read it.
struct conv_fold {
  const float* weight;  // [C][W]
  const float* bias;    // [C] or null
  float* out;           // [C]
  float* state;         // [slots][C][W - 1]
  const std::int32_t* slots;
  const std::uint8_t* has_state;  // null: the slot resumes
  int first, channels, width;
  bool silu;
};

// The RMS form's embedding fold (embedding_fold; its V's bit 1): the row is
// table[ids[0]] (all NaN for an id outside [0, rows), as embedding_kernel
// writes it), and block 0 also writes it to `out` (the residual stream).
struct embed_fold {
  const std::int32_t* ids;  // [1]
  const float* table;       // [rows][K]
  std::int64_t rows;
  float* out;  // [K]
};

// The RMS form's argmax fold (argmax_fold; its V's bit 4): every block
// takes the largest key of its outputs (argmax_key), the blocks meet in
// `key` by atomicMax and count themselves in `done`, and the last one
// writes the draw and zeroes both (argmax_fold_state).
struct argmax_args {
  std::int32_t* out;
  unsigned long long* key;
  unsigned int* done;
};

// The RMS form's KV append fold (kv_append_fold; its V's bit 5): lane 0 of
// the warp that owns output feature `first + e` (e < 2 * elems) also stores
// it as append_kernel would: element e of K (e < elems) or e - elems of V,
// at the step's one decode page and offset, bf16 (append_kernel's rounding)
// or f32.
struct append_fold {
  arena_args arena;
  const std::int32_t* page;
  const std::int32_t* offset;
  int first, elems, head_dim;
  bool bf16;
};

__device__ __forceinline__ void kv_store(const append_fold& f, int e, float v) {
  const int half = e < f.elems ? 0 : 1;  // K, V
  const int i = e - half * f.elems;
  std::byte* dst = f.arena.at(half, f.page[0], f.offset[0], i / f.head_dim);
  const int d = i % f.head_dim;
  if (f.bf16)
    reinterpret_cast<std::uint16_t*>(dst)[d] = to_bf16(v);
  else
    reinterpret_cast<float*>(dst)[d] = v;
}

// What the RMS form takes beside gemv_args (its V: bit 0 the conv fold,
// bit 1 the embedding fold; bits 2 and 3 the activation epilogue, which
// needs nothing here; bit 4 the argmax fold; bit 5 the KV append fold); the
// other forms get it empty.
struct rms_folds {
  conv_fold conv;
  embed_fold embed;
  argmax_args argmax;
  append_fold append;
};

// An output's candidate key for the argmax fold, ordered as `argmax`
// compares (internal/select.cuh's key_of: larger value, then lower id):
// NaN and +inf the largest key of all (argmax's -1 for a bad row), -inf 0
// (no finite entry: the whole row's maximum stays 0, -1 too). Every finite
// value's key lies strictly between.
__device__ __forceinline__ unsigned long long argmax_key(float v, int id) {
  if (isnan(v) || v == INFINITY)
    return ~0ULL;
  if (v == -INFINITY)
    return 0ULL;
  return static_cast<unsigned long long>(key_of(v, id));
}

// The draw a row's largest key stands for: argmax's -1 for a bad row or one
// with no finite entry, else the id.
__device__ __forceinline__ std::int32_t argmax_draw(unsigned long long key) {
  return key == ~0ULL || key == 0ULL ? -1 : id_of(key);
}

// A block's warp `key` (one lane calls it) joins the block's in shared
// memory; the block's last warp of `warps` joins the grid's in `f.key`, and
// the grid's last block writes the draw and zeroes the state for the next
// launch. Fences order each join before the count that announces it.
__device__ __forceinline__ void argmax_arrive(const argmax_args& f, unsigned long long key,
                                              unsigned long long& block_key, int& block_arrived,
                                              int warps) {
  atomicMax(&block_key, key);
  __threadfence_block();
  if (atomicAdd(&block_arrived, 1) != warps - 1)
    return;
  __threadfence_block();
  const unsigned long long mine = atomicMax(&block_key, 0ULL);  // every warp's, read atomically
  atomicMax(f.key, mine);
  __threadfence();
  if (atomicAdd(f.done, 1U) != gridDim.x - 1)
    return;
  __threadfence();
  const unsigned long long all = atomicExch(f.key, 0ULL);
  atomicExch(f.done, 0U);
  f.out[0] = argmax_draw(all);
}

// What a channel's step needs, read while the dots run: its taps and bias
// (zeros past the width) and its window (zeros where the row starts fresh).
struct conv_lane {
  float tap[conv_step_fold_max_width];
  float win[conv_step_fold_max_width];
  float bias;
};

__device__ __forceinline__ conv_lane conv_read(const conv_fold& f, int c, std::int32_t slot) {
  conv_lane l{};
  const int keep = f.width - 1;
#pragma unroll
  for (int j = 0; j < conv_step_fold_max_width; ++j)
    l.tap[j] =
        j < f.width ? load_weight(f.weight + static_cast<std::int64_t>(c) * f.width + j) : 0.0F;
  l.bias = f.bias != nullptr ? load_weight(f.bias + c) : 0.0F;
  if (slot >= 0) {
    const bool resume = f.has_state == nullptr || f.has_state[0] != 0;
    const float* st = f.state + (static_cast<std::int64_t>(slot) * f.channels + c) * keep;
#pragma unroll
    for (int j = 0; j + 1 < conv_step_fold_max_width; ++j) {
      const float old = j < keep ? st[j] : 0.0F;
      l.win[j] = resume ? old : 0.0F;
    }
  }
  return l;
}

// Channel c's output from the window and this step's input x, then the
// window shifted by one: conv_step_kernel's taps.apply and its state store.
__device__ __forceinline__ void conv_step(const conv_fold& f, int c, std::int32_t slot,
                                          const conv_lane& l, float x) {
  if (slot < 0) {
    f.out[c] = 0.0F;
    return;
  }
  const int keep = f.width - 1;
  float y = l.bias;
#pragma unroll
  for (int j = 0; j < conv_step_fold_max_width; ++j) {
    if (j < keep)
      y += l.tap[j] * l.win[j];
    else if (j == keep)
      y += l.tap[j] * x;
  }
  f.out[c] = conv::finish(f.silu, y);
  float* st = f.state + (static_cast<std::int64_t>(slot) * f.channels + c) * keep;
#pragma unroll
  for (int j = 0; j + 1 < conv_step_fold_max_width; ++j) {
    if (j + 1 < keep)
      st[j] = l.win[j + 1];
    else if (j + 1 == keep)
      st[j] = x;
  }
}

// What a block does before its dots: nothing (the input row is read from
// global memory), or norm the f32 row into shared memory (rms: one block
// sum over the row; gated: a warp a group, see gemv_bf16_kernel), or round
// it there, activated or not (act: a quad a thread).
enum class prologue { none, rms, gated, act };

// The activation form's function (its V): the row as it is, relu2, silu.
enum act_fn : int { act_none = 0, act_relu2 = 1, act_silu = 2 };

// activate's quads of the f32 row `x` (times `up`'s where not null) into
// `row`, bf16, by the whole block of `Threads`: thread i takes quads i,
// i + Threads, ...
template <int V, int Threads>
__device__ __forceinline__ void activate_row(const float* x, const float* up, uint2* row, int k) {
  const auto* xq = reinterpret_cast<const float4*>(x);
  const auto* uq = reinterpret_cast<const float4*>(up);
  for (int q = static_cast<int>(threadIdx.x); q < k / 4; q += Threads) {
    const float4* u = up != nullptr ? uq + q : nullptr;
    float4 v;
    if constexpr (V == act_relu2)
      v = activated_quad(xq[q], u, relu2_fn{});
    else if constexpr (V == act_silu)
      v = activated_quad(xq[q], u, silu_fn{});
    else
      v = activated_quad(xq[q], u, identity_fn{});
    row[q] = pack_bf16_quad(v);
  }
}

__device__ __forceinline__ float lo_bf16(unsigned v) {
  return __uint_as_float(v << 16U);
}
__device__ __forceinline__ float hi_bf16(unsigned v) {
  return __uint_as_float(v & 0xffff0000U);
}

// acc += the eight products of a weight piece and an input piece.
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
  acc = fmaf(lo_bf16(w.x), lo_bf16(x.x), acc);
  acc = fmaf(hi_bf16(w.x), hi_bf16(x.x), acc);
  acc = fmaf(lo_bf16(w.y), lo_bf16(x.y), acc);
  acc = fmaf(hi_bf16(w.y), hi_bf16(x.y), acc);
  acc = fmaf(lo_bf16(w.z), lo_bf16(x.z), acc);
  acc = fmaf(hi_bf16(w.z), hi_bf16(x.z), acc);
  acc = fmaf(lo_bf16(w.w), lo_bf16(x.w), acc);
  return fmaf(hi_bf16(w.w), hi_bf16(x.w), acc);
}

// M: the rows the template holds (>= a.m). P: the prologue; the norm forms
// take one row (M 1) and are launched with K * 2 bytes of dynamic shared
// memory for the normed row. V: the gated form's group, V * 128 channels;
// the activation form's act_fn (0 otherwise). Rows, Unroll, Split, Warps: a
// gemv_shape's fields (nvcc's host stubs take no class-type template
// arguments); MinBlocks: __launch_bounds__'s blocks an SM. `gate`:
// the gated form's gate row (null: none; unit stride; the activation form's
// up row), beside gemv_args rather than in it: growing the struct past 128
// bytes changed ptxas's registers for the other forms (the RMS form's
// default shape 48 -> 52, the plain 2 x 4 64 -> 70).
// The bound of one block an SM is what entries 0-5 were measured with (it
// moves ptxas's register choices: without it entry 5 takes 40, not 45).
//
// Split > 1: warp s (threadIdx / 32 % Split) of each group of Split warps
// takes pieces s * 32 + lane, then every 32 * Split on, of the group's
// features; each warp sums its lanes, lane 0 leaves the sum in `partial`,
// and after one barrier the group's warp 0 adds the Split sums in the order
// s = 0, 1, ... and writes the output. No warp leaves before that barrier
// (a group past the last feature loads nothing and adds zeros), so every
// thread of the block reaches it.
template <int M, prologue P, int V, int Rows, int Unroll, int Split, int Warps, int MinBlocks>
__global__ void __launch_bounds__(Warps * 32, MinBlocks)
    gemv_bf16_kernel(gemv_args a, const float* gate, rms_folds folds) {
  constexpr gemv_shape shape{Rows, Unroll, Split, Warps};
  constexpr int threads = shape.threads();
  constexpr bool Norm = P != prologue::none;
  constexpr bool Conv = P == prologue::rms && (V & 1) != 0;   // the conv fold
  constexpr bool Embed = P == prologue::rms && (V & 2) != 0;  // the embedding fold
  // The activation epilogue (bits 2 and 3: relu2, silu): the bf16 output is
  // fn(product + bias) in f32, rounded as activate's bf16 output is.
  constexpr bool Act = P == prologue::rms && (V & 12) != 0;
  static_assert((V & 12) != 12, "one activation");
  constexpr bool Argmax = P == prologue::rms && (V & 16) != 0;  // the argmax fold
  static_assert(!Argmax || M == 1);
  constexpr bool Append = P == prologue::rms && (V & 32) != 0;  // the KV append fold
  static_assert(!Append || M == 1);
  static_assert(!Conv || M == 1);
  const conv_fold& cf = folds.conv;
  constexpr int rows_per_warp = Rows;
  constexpr int unroll = Unroll;
  constexpr int stride = shape.piece_stride();
  static_assert(Warps % Split == 0 && threads <= 1024 && threads >= rms_sum_threads);
  extern __shared__ uint4 normed[];  // Norm: the input row, bf16, K / 8 pieces
  __shared__ float scratch[32];
  // Split > 1: each warp's sums, [warp][row][m].
  __shared__ float partial[Split > 1 ? Warps * Rows * M : 1];
  // The argmax fold: the block's largest key, and its warps that joined it.
  __shared__ unsigned long long block_key;
  __shared__ int block_arrived;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp_in_block = static_cast<int>(threadIdx.x) / 32;
  const int n0 = shape.first_feature(static_cast<int>(blockIdx.x), warp_in_block);
  const int first = shape.first_piece(warp_in_block, lane);
  // A warp past the last feature still helps norm the row (every thread
  // takes part in the block sum) and leaves after (Split > 1: after the
  // barrier of the sums).
  const bool active = n0 < a.n;
  if (a.release == release_start)
    chain_release();
  const int pieces = a.k / 8;
  float acc[rows_per_warp][M];
#pragma unroll
  for (int r = 0; r < rows_per_warp; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m)
      acc[r][m] = 0.0F;
  }
  const uint4* wrow[rows_per_warp];
#pragma unroll
  for (int r = 0; r < rows_per_warp; ++r) {
    const int n = n0 + r < a.n ? n0 + r : n0;  // a missing row rereads the first
    wrow[r] = reinterpret_cast<const uint4*>(a.w + static_cast<std::int64_t>(n) * a.w_stride);
  }
  uint4 w[rows_per_warp][unroll];
  const auto load = [&](int p0) {
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const int p = p0 + stride * u;
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r)
        w[r][u] = p < pieces ? __ldcs(wrow[r] + p) : make_uint4(0U, 0U, 0U, 0U);
    }
  };
  // The norm weight, asked of L2 (a hint: whatever a kernel before writes,
  // the loads after the wait read it there), so that the prologue's second
  // round trip, after its sums, finds it there rather than in HBM.
  if constexpr (P == prologue::rms || P == prologue::gated) {
    if ((a.prefetch & prefetch_norm) != 0 && a.norm_w_stride == 1) {
      for (int i = static_cast<int>(threadIdx.x) * 32; i < a.k; i += threads * 32)
        prefetch_l2(a.norm_w + i);
    }
  }
  // Chained launches (internal/common.cuh): static weights (no kernel's
  // output) stream in while the kernel before drains; everything else, and
  // weights a kernel may have written, after the wait.
  if (!a.weight_static)
    chain_wait();
  if (active) {
    load(first);
    // `prefetch` mode: the rest of the rows' pieces asked of L2 too.
    if ((a.prefetch & prefetch_rows) != 0) {
      for (int p = first + stride * unroll; p < pieces; p += stride) {
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r)
          prefetch_l2(wrow[r] + p);
      }
    }
  }
  chain_wait();
  // release_last with the rows in one load: released after the wait (never
  // before it, so what the next kernel reads early stays settled).
  if (a.release == release_last && first + stride * unroll >= pieces)
    chain_release();
  // accumulate_early: the residual each output adds onto, loaded now by the
  // lanes that write it (the kernels before wrote it, so after the wait).
  // Not the RMS form's: the models' products it folds never accumulate, and
  // its many fold instantiations keep their registers.
  constexpr bool EarlyResidual = M == 1 && P != prologue::rms;
  float residual[EarlyResidual ? rows_per_warp : 1];
  if constexpr (EarlyResidual) {
    if (a.accumulate == accumulate_early && a.out_f32 != nullptr && lane == 0 && active &&
        warp_in_block % Split == 0) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r)
        residual[r] = n0 + r < a.n ? a.out_f32[n0 + r] : 0.0F;
    }
  }
  // The conv fold: lane r of a feature's (split group's first) warp holds
  // its row r's channel (taps and window, loaded now, under the dots), so a
  // lane keeps one channel's registers whatever the warp's rows.
  conv_lane conv{};
  std::int32_t conv_slot = -1;
  if constexpr (Conv) {
    if (lane < rows_per_warp && active && warp_in_block % Split == 0) {
      conv_slot = cf.slots[0];
      const int c = n0 + lane - cf.first;
      if (c >= 0 && c < cf.channels)
        conv = conv_read(cf, c, conv_slot);
    }
  }
  // Split 1: a warp past the last feature has nothing left to do; with
  // Split > 1 it goes on to the barrier of the sums.
  if (!Norm && !active && Split == 1)
    return;
  if constexpr (P == prologue::gated) {
    // Warp w norms groups w, w + Warps, ... exactly as gated_rms_norm's warp
    // form would (the same device function), into the shared row.
    constexpr int group = V * 128;
    auto* row = reinterpret_cast<std::uint16_t*>(normed);
    for (int c0 = warp_in_block * group; c0 < a.k; c0 += Warps * group) {
      gated_norm_group<V>(a.xn + c0, gate != nullptr ? gate + c0 : nullptr, a.norm_w + c0, a.eps,
                          nullptr, row + c0, lane);
    }
    __syncthreads();
  } else if constexpr (P == prologue::act) {
    activate_row<V, threads>(a.xn, gate, reinterpret_cast<uint2*>(normed), a.k);
    __syncthreads();
  } else if constexpr (P == prologue::rms) {
    // add_rms_norm's loop at 256 threads: thread i squares columns i, i +
    // 256, ... A bigger block's other threads add +0, which changes no bit
    // of block_sum's butterfly (their warps' and lanes' zeros join sums
    // that are already whole), so the scale is add_rms_norm's. (Session
    // 51 held a thread's columns of the row and of the norm weight in
    // registers, both loaded at once, one L2 round trip before the sum
    // rather than the weight's after it: the 0.56B at batch 1 gained 7 us
    // on an H100 (463.5-465.3 against 470.4-472.1) and none on an H200
    // (401.0-402.8 against 401.4-401.9), Qwen3.5 0.5B lost 7-11 us on the
    // H100 and 24 on the H200 (688.5 / 688.6 against 664.2 / 664.7), so it
    // was removed; bench/results/session51-calls/, calls 3-4.)
    // The embedding fold reads the row from the table (NaN for a bad id).
    const float* src = a.xn;
    std::int64_t src_stride = a.xn_stride;
    bool bad_id = false;
    if constexpr (Embed) {
      const std::int32_t id = folds.embed.ids[0];
      bad_id = id < 0 || id >= folds.embed.rows;
      src = folds.embed.table + (bad_id ? 0 : static_cast<std::int64_t>(id) * a.k);
      src_stride = 1;
    }
    const auto value = [&](int h) {
      return bad_id ? __int_as_float(0x7fc00000) : src[static_cast<std::int64_t>(h) * src_stride];
    };
    if (Argmax && threadIdx.x == 0) {
      block_key = 0ULL;  // seen by every warp after block_sum's barriers
      block_arrived = 0;
    }
    float sum_sq = 0.0F;
    if (threads == rms_sum_threads || static_cast<int>(threadIdx.x) < rms_sum_threads) {
      for (int h = static_cast<int>(threadIdx.x); h < a.k; h += rms_sum_threads) {
        const float v = value(h);
        sum_sq += v * v;
      }
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float scale = rsqrtf(sum_sq / static_cast<float>(a.k) + a.eps);
    auto* row = reinterpret_cast<std::uint16_t*>(normed);
    for (int h = static_cast<int>(threadIdx.x); h < a.k; h += threads) {
      const float v = value(h);
      if (Embed && blockIdx.x == 0)
        folds.embed.out[h] = v;
      const float o = v * scale * a.norm_w[static_cast<std::int64_t>(h) * a.norm_w_stride];
      row[h] = to_bf16(o);
    }
    __syncthreads();
  }
  if (Norm && !active && Split == 1)
    return;
  // Past here, with Split 1, every warp is active; with Split > 1 an
  // inactive warp skips its dots and keeps zero sums.
  for (int p0 = first; active;) {
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const int p = p0 + stride * u;
      if (p >= pieces)
        break;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (m < a.m) {
          uint4 xv;
          if constexpr (Norm)
            xv = normed[p];
          else
            xv = load_coherent(
                reinterpret_cast<const uint4*>(a.x + static_cast<std::int64_t>(m) * a.x_stride) +
                p);
#pragma unroll
          for (int r = 0; r < rows_per_warp; ++r)
            acc[r][m] = dot8(w[r][u], xv, acc[r][m]);
        }
      }
    }
    p0 += stride * unroll;
    if (p0 >= pieces)
      break;
    load(p0);
    // release_last: this block's last pieces are on their way; once every
    // block's are, the next kernel's blocks start loading theirs under the
    // dots and the tail.
    if (a.release == release_last && p0 + stride * unroll >= pieces)
      chain_release();
  }
  if (a.release != release_start)
    chain_release();
#pragma unroll
  for (int r = 0; r < rows_per_warp; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m)
      acc[r][m] = group_sum<32>(acc[r][m]);
  }
  if constexpr (Split > 1) {
    float* mine = partial + warp_in_block * Rows * M;
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) {
#pragma unroll
        for (int m = 0; m < M; ++m)
          mine[r * M + m] = acc[r][m];
      }
    }
    __syncthreads();
    // The group's warp 0 (acc already its own sums) adds warps 1 .. Split - 1's.
    if (warp_in_block % Split != 0 || !active)
      return;
#pragma unroll
    for (int s = 1; s < Split; ++s) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) {
#pragma unroll
        for (int m = 0; m < M; ++m)
          acc[r][m] += mine[s * Rows * M + r * M + m];
      }
    }
  }
  // The conv fold's step: lane r on row r's sum (every lane holds every
  // row's, group_sum's butterfly), the bias added as lane 0 adds it below.
  if constexpr (Conv) {
    const int n = n0 + lane;
    const int c = n - cf.first;
    if (lane < rows_per_warp && n < a.n && c >= 0 && c < cf.channels && a.out_f32 != nullptr) {
      float sum = acc[0][0];
#pragma unroll
      for (int r = 1; r < rows_per_warp; ++r)
        sum = r == lane ? acc[r][0] : sum;
      const float b =
          a.bias != nullptr ? a.bias[static_cast<std::int64_t>(n) * a.bias_stride] : 0.0F;
      conv_step(cf, c, conv_slot, conv, sum + b);
    }
  }
  if (lane != 0)
    return;
  unsigned long long best = 0ULL;  // the argmax fold: this warp's largest key
#pragma unroll
  for (int r = 0; r < rows_per_warp; ++r) {
    const int n = n0 + r;
    if (n >= a.n)
      break;
    const float b = a.bias != nullptr ? a.bias[static_cast<std::int64_t>(n) * a.bias_stride] : 0.0F;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (m >= a.m)
        break;
      const std::int64_t at = static_cast<std::int64_t>(m) * a.out_stride + n;
      if (a.out_f32 != nullptr) {
        // Accumulating: the residual plus the product's output, as `add` would.
        if (a.accumulate == accumulate_none) {
          a.out_f32[at] = acc[r][m] + b;
        } else {
          const bool early = EarlyResidual && a.accumulate == accumulate_early;
          a.out_f32[at] =
              (early ? residual[EarlyResidual ? r : 0] : a.out_f32[at]) + (acc[r][m] + b);
        }
        if constexpr (Argmax)  // the value just written (not accumulating)
          best = max(best, argmax_key(acc[r][m] + b, n));
        if constexpr (Append) {
          const int e = n - folds.append.first;
          if (e >= 0 && e < 2 * folds.append.elems)
            kv_store(folds.append, e, acc[r][m] + b);
        }
      } else if constexpr (Act) {
        // The f32 output's value (bias unrounded), then activate's bf16 output of it.
        const float v = acc[r][m] + b;
        a.out_bf16[at] = to_bf16((V & 4) != 0 ? relu2_of(v) : silu_of(v));
      } else {
        // As cuBLAS with a bias filled in first: the bias rounded to bf16.
        const float bb = a.bias != nullptr ? from_bf16(to_bf16(b)) : 0.0F;
        a.out_bf16[at] = to_bf16(acc[r][m] + bb);
      }
    }
  }
  if constexpr (Argmax) {
    // The warps that reach here: each split group's first, where it has a feature.
    int warps = 0;
#pragma unroll
    for (int g = 0; g < Warps; g += Split)
      warps += shape.first_feature(static_cast<int>(blockIdx.x), g) < a.n ? 1 : 0;
    argmax_arrive(folds.argmax, best, block_key, block_arrived, warps);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The norm forms' weight: K a multiple of 8 up to gemv_norm_max_k, unit
// column stride, row stride and address on 16-byte boundaries.
bool norm_weight_matrix_fits(const view<const std::uint16_t, 2>& w) {
  const std::int64_t k = w.shape[1];
  const std::int64_t n = w.shape[0];
  return k >= 8 && k % 8 == 0 && k <= gemv_norm_max_k && n <= (1 << 30) && w.strides[1] == 1 &&
         (n <= 1 || w.strides[0] % 8 == 0) && aligned16(w.data);
}

}  // namespace

bool gemv_bf16_fits(const linear_bf16_params& p) {
  const std::int64_t m = p.x.shape[0];
  const std::int64_t k = p.x.shape[1];
  const std::int64_t n = p.weight.shape[0];
  const auto stride_ok = [](std::int64_t rows, std::int64_t stride) {
    return rows <= 1 || stride % 8 == 0;
  };
  return m >= 1 && m <= gemv_max_rows && k >= 8 && k % 8 == 0 && n <= (1 << 30) && k <= (1 << 30) &&
         p.x.strides[1] == 1 && p.weight.strides[1] == 1 && stride_ok(m, p.x.strides[0]) &&
         stride_ok(n, p.weight.strides[0]) && aligned16(p.x.data) && aligned16(p.weight.data);
}

namespace {

// The weight and output half of gemv_args, shared by every form.
void fill_product(gemv_args& a, const view<const std::uint16_t, 2>& weight,
                  const view<const float, 1>& bias, const view<float, 2>& out_f32,
                  const view<std::uint16_t, 2>& out_bf16, bool accumulate, bool weight_static) {
  a.w = weight.data;
  a.w_stride = weight.shape[0] > 1 ? weight.strides[0] : 0;
  a.bias = bias ? bias.data : nullptr;
  a.bias_stride = bias ? bias.strides[0] : 0;
  a.out_f32 = out_f32 ? out_f32.data : nullptr;
  a.out_bf16 = out_bf16 ? out_bf16.data : nullptr;
  a.out_stride = out_f32 ? out_f32.strides[0] : out_bf16.strides[0];
  a.n = static_cast<int>(weight.shape[0]);
  a.accumulate = !accumulate             ? accumulate_none
                 : gemv_residual_early() ? accumulate_early
                                         : accumulate_late;
  a.weight_static = weight_static;
}

// __launch_bounds__'s blocks an SM: entries 0-5 one (as measured); split
// entries as many as keep registers at 64 or fewer (two 512-thread blocks
// an SM), except where the gated form's group (4 V registers a lane) and
// the weight pieces loaded before it (4 a piece) pass 40 registers
// together (V 8; V 4 at eight pieces): under the cap ptxas spilled them
// (16-128 bytes), so those keep one block's bound.
constexpr int min_blocks(const gemv_shape& s, prologue p, int v) {
  if (s.split == 1)
    return 1;
  if (p == prologue::gated && 4 * v + 4 * s.unroll * s.rows > 40)
    return 1;
  return 1024 / s.threads();
}

// What a chained GEMV does around its wait (MSTAR_GEMV_CHAIN, read once;
// A/B runs): every mode loads its first weight pieces before the wait;
// `late` (the default until session 49) releases the next kernel only
// after its dots, `loads` at its start, `prefetch` at its start and asks
// L2 for the rest of its rows too. On the H200
// (bench/results/h200-kernels17.md, session 33, batch-1 step, ms): 0.56B Nemotron-H late 0.477 /
// loads 0.483 / prefetch 0.565 / plain launches 0.504; the 8B shape 4.784 / 4.896 / 5.588 / 4.935;
// Qwen3.5 0.5B 0.752 / 0.755 / 0.764 / 0.802. Released early, the next
// GEMV's waiting blocks hold SM slots while this one still streams;
// prefetched rows are evicted before they are used. Bounded (session 56,
// MSTAR_GEMV_PREFETCH_GROUPS, removed: under `wave`, the next 2 or 4 load
// groups of its rows asked of L2 before the wait, a line by one lane of
// eight) it lost too: the 0.56B at batch 1 on an H100 528.4 / 529.4 us (2
// groups) and 537.9 / 540.1 (4) a step against 470.7 / 472.6, the same
// tokens (bench/results/session56-calls/, call1; commit 0136408).
// `last` (MSTAR_GEMV_CHAIN=last, session 48) releases it once each block's
// last weight pieces are asked for, so the next kernel's blocks start (and
// load their static weights) under this one's last dots and its tail: on
// an H100 (0.56B, batch 1) 505.3 / 509.8 us a step against late's 508.1 /
// 507.4, within noise (bench/results/session48-calls/, call1).
// `wave` (the default since session 49): a launch whose whole grid is
// resident at once releases the next kernel at its start (none of its
// blocks waits for an SM slot the next kernel's blocks could take), so the
// next kernel's blocks load their static weights under this one's wait and
// dots (the batch-1 in_proj's under the o_proj's wait on the decode
// attention, the MLP up's under the out_proj's on the SSD update); a
// larger grid releases after its dots, as `late`. On an H100 (0.56B, batch
// 1; bench/results/session49-calls/, calls 3-5): 490.0 / 489.2, 495.0 /
// 494.5 and 494.8 / 494.2 us a step against late's 500.4 / 499.2, 503.8 /
// 504.3 and 504.0 / 505.1, the same tokens; the 8B shape 5,987 us against
// 6,009, Qwen3.5 0.5B 739.6 against 756.6.
// `tail` (session 49, removed in session 50): as `wave`, and in a larger
// grid the blocks of its last wave released at their start: on the H200
// (0.56B, batch 1) 431.4 / 431.0 / 430.9 us a step against wave's 412.6 /
// 413.9 / 414.4, the same tokens (bench/results/session50-calls/, call1).
// A persistent chain of one-row products (session 59, removed: one block an
// SM walking every link, two 4 KiB weight chunks a warp in flight across a
// link's end, the grid meeting on a counter between links; the same bits as
// entry 5) lost on an H100 to these chained launches: the 0.56B's out_proj,
// MLP up, down and in_proj twice over, 108.3 us against 90.5 (2.33 TB/s
// against 2.79; rows taken from a counter a link, 141.7), commit 8fade5b,
// bench/results/session59-calls/.
// Asked of L2 only where HBM idles under the kernel before (session 60,
// removed: MSTAR_GEMV_L2_AFTER, the out_proj's rows past its first load
// before its wait on the SSD update, the o_proj's on attention; the same
// bits): on an H100 (0.56B, batch 1) the out_proj's exposed time fell
// 6.3 -> 4.9 us but the update's rose 4.9 -> 6.3 (its state and inputs
// queue behind the 16 MB) and the next GEMVs' by ~1 us each: 498.1-500.2
// us a step against 476.2-477.9; the o_proj's within noise (475.8-478.0);
// bench/results/session60-calls/, call2, commit aaad616. Asked once the
// update's sums were done (session 62: MSTAR_SSD_RELEASE=sums, so the 16 MB
// streamed under the update's tail and not beside its state loads), a line
// a lane or one bulk prefetch a row (cp.async.bulk.prefetch.L2), it lost
// more: 501.6-502.7 us a step against 472.5-473.7 (sums alone 473.9-474.6;
// H100, bench/results/session62-calls/, call1, commit 13b8602).
enum class chain_mode { late, loads, prefetch, last, wave };

// set_gemv_chain_late (tests): 1 forces `late`, 0 (or unset) leaves
// MSTAR_GEMV_CHAIN's mode.
std::atomic<int> chain_late_forced{0};

chain_mode gemv_chain_mode() {
  if (chain_late_forced.load(std::memory_order_relaxed) == 1)
    return chain_mode::late;
  static const chain_mode mode = [] {
    const char* e = std::getenv("MSTAR_GEMV_CHAIN");
    const std::string_view v = e != nullptr ? e : "";
    return v == "prefetch" ? chain_mode::prefetch
           : v == "loads"  ? chain_mode::loads
           : v == "last"   ? chain_mode::last
           : v == "late"   ? chain_mode::late
                           : chain_mode::wave;
  }();
  return mode;
}

// MSTAR_GEMV_NORM_PREFETCH=1 (read once; off until measured): the norm
// forms ask L2 for their norm weight before the wait (prefetch_norm). A
// hint: the same bits either way.
bool gemv_norm_prefetch() {
  static const bool on = [] {
    const char* e = std::getenv("MSTAR_GEMV_NORM_PREFETCH");
    return e != nullptr && std::string_view{e} == "1";
  }();
  return on;
}

// The blocks of `Kernel` at `threads` threads and `smem` bytes resident at
// once on the device (the occupancy calculator, cached per shape, times
// the SMs): `wave`'s wave.
template <auto Kernel>
std::int64_t wave_blocks(int threads, std::size_t smem) {
  constexpr std::size_t default_limit = 48 * 1024;
  return std::int64_t{resident_blocks<Kernel>(default_limit, threads, smem)} * sm_count();
}

// A form's kernel at table entry `S`, and the dynamic shared memory it is
// launched with at `k` (the normed or rounded row; none for the plain form).
template <prologue P, int V, gemv_shape S>
constexpr auto kernel_of =
    gemv_bf16_kernel<1, P, V, S.rows, S.unroll, S.split, S.warps, min_blocks(S, P, V)>;
template <prologue P>
constexpr std::size_t smem_of(int k) {
  return P == prologue::none ? 0 : static_cast<std::size_t>(k) * sizeof(std::uint16_t);
}

// Whether a form's launch at entry `S` is one wave (`wave_blocks`).
template <prologue P, int V, gemv_shape S>
bool one_wave(const gemv_args& a) {
  return S.blocks(a.n) <= wave_blocks<kernel_of<P, V, S>>(S.threads(), smem_of<P>(a.k));
}

template <prologue P, int V, gemv_shape S>
cudaError_t launch(const gemv_args& a, const float* gate, const rms_folds& folds,
                   cudaStream_t stream) {
  static_assert(gemv_max_rows == 1, "instantiate gemv_bf16_kernel for more rows");
  const std::size_t smem = smem_of<P>(a.k);
  gemv_args chained = a;
  // Plain launches: neither flag (chain_release is then a no-op anyway).
  const chain_mode mode = chained_launches_on() ? gemv_chain_mode() : chain_mode::loads;
  chained.prefetch = static_cast<std::uint8_t>((mode == chain_mode::prefetch ? prefetch_rows : 0) |
                                               (gemv_norm_prefetch() ? prefetch_norm : 0));
  constexpr auto kernel = kernel_of<P, V, S>;
  const std::int64_t blocks = S.blocks(a.n);
  chained.release = mode == chain_mode::late   ? release_late
                    : mode == chain_mode::last ? release_last
                                               : release_start;
  if (mode == chain_mode::wave)
    chained.release = one_wave<P, V, S>(a) ? release_start : release_late;
  launch_chained(kernel, static_cast<unsigned>(blocks), static_cast<unsigned>(S.threads()), smem,
                 stream, chained, gate, folds);
  return launch_status();
}

// The table (gemv_shape.hpp; entries never change meaning, so sweeps stay
// comparable). Entry 0 is the shape measured best alone
// (bench/results/h200-kernels17.md, session 29); entries 1-5 trade weight
// pieces in flight a lane for warps an SM (98 registers allow two blocks an
// SM). In the 0.56B model at batch 1 (session 32's fifth call) entry 5 took
// 0.526 ms a step where entry 0 took 0.577 (1: 0.551, 2: 0.564, 3: 0.570,
// 4: 0.588): entry 5 (45 registers then) is the default. Entries 6-11 split
// each feature's K over 2-8 warps for narrow products (N 2,048 in the 0.56B
// model: 256 blocks of entry 5 on 132 SMs, its gated form at 23.7% achieved
// occupancy under Nsight Compute, 1.16 TB/s); gemv_split_variant is the
// first guess of which one, unmeasured (bench/h200_gemv_split.sh).
static_assert(gemv_shapes[gemv_default_variant].split == 1);
static_assert(gemv_shapes[gemv_split_variant].split > 1);

// One form's launchers, a table entry each.
using gemv_launch = cudaError_t (*)(const gemv_args&, const float*, const rms_folds&, cudaStream_t);
using gemv_launches = std::array<gemv_launch, gemv_variants>;
template <prologue P, int V, std::size_t... I>
constexpr gemv_launches table(std::index_sequence<I...>) {
  return {launch<P, V, gemv_shapes[I]>...};
}
template <prologue P, int V = 0>
constexpr gemv_launches launches = table<P, V>(std::make_index_sequence<gemv_variants>{});

using gemv_fit = bool (*)(const gemv_args&);
template <prologue P, int V, std::size_t... I>
constexpr std::array<gemv_fit, gemv_variants> fit_table(std::index_sequence<I...>) {
  return {one_wave<P, V, gemv_shapes[I]>...};
}
template <prologue P, int V = 0>
constexpr std::array<gemv_fit, gemv_variants> one_waves =
    fit_table<P, V>(std::make_index_sequence<gemv_variants>{});

// The one-wave pick (session 50; gemv_shape.hpp's gemv_wave_pick): a
// chained launch under `wave` whose entry the rule picked (no request, no
// MSTAR_GEMV_VARIANT), an entry of the one-feature walk (0-5: the same
// bits as each other) whose grid is more than one wave, at K <= 2,048,
// takes the first entry of MSTAR_GEMV_WAVE_PICK's list (read once;
// gemv_wave_pick_list: e.g. "4", "1,0,4,3", "none" for off; unset or not a
// list: "4") whose grid is one wave, so that it too releases the next
// kernel at its start. On an H100 (batch 1,
// bench/results/session50-calls/, calls 2-3): the 0.56B (its MLP up, 8,192
// x 2,048, in entry 4's 256 blocks rather than entry 5's 1,024) 480.1-482.4
// us a step against 487.7-491.9 without, Qwen3.5 0.5B 720.7-722.4 against
// 736.2-738.5, the same tokens; the 8B shape (K 4,096: its q / k / v
// product) 5,919-5,921 against 5,888-5,889, hence the K bound.
const std::vector<int>& wave_pick_order() {
  static const std::vector<int> order = [] {
    const char* e = std::getenv("MSTAR_GEMV_WAVE_PICK");
    auto list = gemv_wave_pick_list(e != nullptr ? e : "");
    return list ? *std::move(list) : std::vector<int>{gemv_wave_pick_default};
  }();
  return order;
}

// `name` as a whole decimal number, else `otherwise` (unset, empty, other text).
int env_int(const char* name, int otherwise) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0')
    return otherwise;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return *end == '\0' && v >= -1 && v < 1000 ? static_cast<int>(v) : otherwise;
}

// MSTAR_GEMV_VARIANT (read once): an entry every launch without its own
// gemv_variant takes; -1 when unset or not a number (gemv_pick passes over
// a number outside the table too).
int forced_variant() {
  static const int v = env_int("MSTAR_GEMV_VARIANT", -1);
  return v;
}

// MSTAR_GEMV_SPLIT (read once): 0 turns the narrow rule off (A/B runs), a
// split entry's number makes narrow products take that entry (sweeps),
// anything else (or unset) leaves gemv_split_variant.
int split_variant() {
  static const int v = [] {
    const int e = env_int("MSTAR_GEMV_SPLIT", gemv_split_variant);
    if (e == 0)
      return -1;
    return e > 0 && e < gemv_variants && gemv_shapes[e].split > 1 ? e : gemv_split_variant;
  }();
  return v;
}

// The launch at the entry `requested` (params' gemv_variant) or the rule
// gives (gemv_variant_for), or, where the rule gave it (no request, no
// MSTAR_GEMV_VARIANT) and the launch is chained under `wave`, the one-wave
// pick's entry.
template <prologue P, int V = 0>
cudaError_t pick_launch(int requested, const gemv_args& a, const float* gate,
                        const rms_folds& folds, cudaStream_t stream) {
  auto i = static_cast<std::size_t>(gemv_variant_for(requested, a.n, a.k));
  const auto in_table = [](int v) { return v >= 0 && v < gemv_variants; };
  const bool by_rule = !in_table(requested) && !in_table(forced_variant());
  if (by_rule && chained_launches_on() && gemv_chain_mode() == chain_mode::wave) {
    const auto one_wave = [&](int e) { return one_waves<P, V>[static_cast<std::size_t>(e)](a); };
    i = static_cast<std::size_t>(
        gemv_wave_pick(static_cast<int>(i), a.k, wave_pick_order(), one_wave));
  }
  return launches<P, V>[i](a, gate, folds, stream);
}
}  // namespace

cudaError_t launch_gemv_bf16(const linear_bf16_params& p, cudaStream_t stream) {
  gemv_args a{};
  a.x = p.x.data;
  a.x_stride = p.x.shape[0] > 1 ? p.x.strides[0] : 0;
  fill_product(a, p.weight, p.bias, p.out_f32, p.out_bf16, p.accumulate, p.weight_static);
  a.m = static_cast<int>(p.x.shape[0]);
  a.k = static_cast<int>(p.x.shape[1]);
  return pick_launch<prologue::none>(p.gemv_variant, a, nullptr, {}, stream);
}

bool gemv_rms_norm_fits(const rms_norm_linear_bf16_params& p) {
  return norm_weight_matrix_fits(p.weight);
}

cudaError_t launch_gemv_rms_norm_bf16(const rms_norm_linear_bf16_params& p, cudaStream_t stream) {
  gemv_args a{};
  a.xn = p.x.data;
  a.xn_stride = p.x.strides[1];
  a.norm_w = p.norm_weight.data;
  a.norm_w_stride = p.norm_weight.strides[0];
  a.eps = p.eps;
  fill_product(a, p.weight, p.bias, p.out_f32, p.out_bf16, p.accumulate, p.weight_static);
  a.m = 1;
  a.k = static_cast<int>(p.weight.shape[1]);
  rms_folds folds{};
  if (p.conv) {
    const conv_step_fold& c = *p.conv;
    folds.conv = {c.w.weight,
                  c.w.bias,
                  c.out,
                  c.state,
                  c.slot_indices.data(),
                  c.has_state.empty() ? nullptr : c.has_state.data(),
                  static_cast<int>(c.first),
                  c.w.channels,
                  c.w.width,
                  c.w.silu};
  }
  if (p.embed) {
    const embedding_fold& e = *p.embed;
    folds.embed = {e.ids.data, e.table.data, e.table.shape[0], e.out};
  }
  if (p.argmax)
    folds.argmax = {p.argmax->out, &p.argmax->state->key, &p.argmax->state->done};
  if (p.append) {
    const kv_append_fold& f = *p.append;
    const kv_geometry& g = f.arena.geometry;
    if (!to_arena_args(f.arena, f.layer, folds.append.arena))
      return cudaErrorInvalidValue;  // rms_norm_linear_bf16 checked it
    folds.append.page = f.table.decode_page.data();
    folds.append.offset = f.table.decode_offset.data();
    folds.append.first = static_cast<int>(f.first);
    folds.append.elems = g.num_kv_heads * g.head_dim;
    folds.append.head_dim = g.head_dim;
    folds.append.bf16 = g.dtype == mstar::dtype::bfloat16;
  }
  const int act = !p.out_activation ? 0 : *p.out_activation == activation::relu2 ? 4 : 8;
  switch ((p.conv ? 1 : 0) | (p.embed ? 2 : 0) | act | (p.argmax ? 16 : 0) | (p.append ? 32 : 0)) {
    case 1:
      return pick_launch<prologue::rms, 1>(p.gemv_variant, a, nullptr, folds, stream);
    case 2:
      return pick_launch<prologue::rms, 2>(p.gemv_variant, a, nullptr, folds, stream);
    case 3:
      return pick_launch<prologue::rms, 3>(p.gemv_variant, a, nullptr, folds, stream);
    case 4:
      return pick_launch<prologue::rms, 4>(p.gemv_variant, a, nullptr, folds, stream);
    case 8:
      return pick_launch<prologue::rms, 8>(p.gemv_variant, a, nullptr, folds, stream);
    case 16:
      return pick_launch<prologue::rms, 16>(p.gemv_variant, a, nullptr, folds, stream);
    case 32:
      return pick_launch<prologue::rms, 32>(p.gemv_variant, a, nullptr, folds, stream);
    case 0:
      return pick_launch<prologue::rms>(p.gemv_variant, a, nullptr, folds, stream);
    default:
      return cudaErrorInvalidValue;  // rms_norm_linear_bf16 refuses the mix
  }
}

bool gemv_gated_rms_norm_fits(const gated_rms_norm_linear_bf16_params& p) {
  const std::int64_t k = p.weight.shape[1];
  const std::int64_t group = p.group_size == 0 ? k : p.group_size;
  // gated_rms_norm's warp-form rules (math.cu), so the GEMV's input is that
  // form's output: whole float4 rows on 16-byte boundaries, V in 1, 2, 4, 8.
  const auto row_ok = [](const view<const float, 2>& v) {
    return !v || (v.strides[1] == 1 && v.strides[0] % 4 == 0 && aligned16(v.data));
  };
  const std::int64_t v = group % 128 == 0 ? group / 128 : 0;
  return norm_weight_matrix_fits(p.weight) && (v == 1 || v == 2 || v == 4 || v == 8) &&
         k % group == 0 && row_ok(p.x) && row_ok(p.gate) && p.norm_weight.strides[0] == 1 &&
         aligned16(p.norm_weight.data);
}

cudaError_t launch_gemv_gated_rms_norm_bf16(const gated_rms_norm_linear_bf16_params& p,
                                            cudaStream_t stream) {
  gemv_args a{};
  a.xn = p.x.data;
  a.xn_stride = 1;
  a.norm_w = p.norm_weight.data;
  a.norm_w_stride = 1;
  a.eps = p.eps;
  fill_product(a, p.weight, p.bias, p.out_f32, p.out_bf16, p.accumulate, p.weight_static);
  a.m = 1;
  a.k = static_cast<int>(p.weight.shape[1]);
  const float* gate = p.gate ? p.gate.data : nullptr;
  switch (p.group_size == 0 ? a.k / 128 : p.group_size / 128) {
    case 1:
      return pick_launch<prologue::gated, 1>(p.gemv_variant, a, gate, {}, stream);
    case 2:
      return pick_launch<prologue::gated, 2>(p.gemv_variant, a, gate, {}, stream);
    case 4:
      return pick_launch<prologue::gated, 4>(p.gemv_variant, a, gate, {}, stream);
    case 8:
      return pick_launch<prologue::gated, 8>(p.gemv_variant, a, gate, {}, stream);
    default:
      return cudaErrorInvalidValue;  // gemv_gated_rms_norm_fits refuses it
  }
}

bool gemv_activation_fits(const activation_linear_bf16_params& p) {
  // activate's quad form's rules (fused.cu), so the GEMV's input is its
  // output: whole float4 rows on 16-byte boundaries.
  const auto row_ok = [](const view<const float, 2>& v) {
    return !v || (v.strides[1] == 1 && aligned16(v.data));
  };
  return norm_weight_matrix_fits(p.weight) && row_ok(p.x) && row_ok(p.up) &&
         (p.fn.has_value() || !p.up);
}

cudaError_t launch_gemv_activation_bf16(const activation_linear_bf16_params& p,
                                        cudaStream_t stream) {
  gemv_args a{};
  a.xn = p.x.data;
  a.xn_stride = 1;
  fill_product(a, p.weight, p.bias, p.out_f32, p.out_bf16, p.accumulate, p.weight_static);
  a.m = 1;
  a.k = static_cast<int>(p.weight.shape[1]);
  const float* up = p.up ? p.up.data : nullptr;
  if (!p.fn)
    return pick_launch<prologue::act, act_none>(p.gemv_variant, a, nullptr, {}, stream);
  switch (*p.fn) {
    case activation::relu2:
      return pick_launch<prologue::act, act_relu2>(p.gemv_variant, a, up, {}, stream);
    case activation::silu:
      return pick_launch<prologue::act, act_silu>(p.gemv_variant, a, up, {}, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace mstar::kernels::cuda::detail

namespace mstar::kernels::cuda {

bool gemv_releases_after_wait() {
  const auto mode = detail::gemv_chain_mode();
  return mode == detail::chain_mode::late || mode == detail::chain_mode::last;
}

void set_gemv_chain_late(bool on) {
  detail::chain_late_forced.store(on ? 1 : 0, std::memory_order_relaxed);
}

int gemv_variant_for(int requested, std::int64_t n, std::int64_t k) {
  return gemv_pick(requested, detail::forced_variant(), detail::split_variant(), n, k,
                   detail::sm_count());
}

}  // namespace mstar::kernels::cuda
