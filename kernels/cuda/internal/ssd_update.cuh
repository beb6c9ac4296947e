#pragma once

// The SSD decode step with a warp (or half a warp) a state row: ssd_update's
// table (ssd_update.cu) from entry 1 on. A decode step reads and writes each
// row's [H][P][N] f32 state once and little else, so what bounds it is how
// many state bytes the SMs keep in flight, as for the gated delta rule's
// decode (internal/delta_rule_decode.cuh, whose lessons this follows):
// - `lanes` = N / (4 cols) consecutive lanes share one state row [n] of a
//   (head, p), each holding `cols` float4 of it (a warp a row at N 128 and
//   one float4 a lane): a warp's load of one row is 512 contiguous bytes;
// - each thread keeps `rows` state rows (p, p + groups, ...), all their
//   loads issued before any is used, every one at a constant offset from one
//   address, none predicated but on the row's has_state;
// - B and C are the same for every p of a head (per group): a lane loads
//   only its own float4 of each, once, not a copy a state column;
// - x, dt and the head's scalars are asked for ahead of the slot (they do
//   not depend on it), so only the state waits on the slot's round trip;
// - y[p] = C . S[p] is summed over the row's lanes by the halving butterfly
//   (common.cuh), log2(lanes) + rows - 1 shuffles for all of a thread's
//   rows, D x[p] added by lane 0 before the sum;
// - a register cap (`max_regs`, `__maxnreg__`) sets the warps an SM, and
//   the state's loads and stores take cache-streaming hints or not
//   (`stream`), which pays only where the state is far larger than L2.
// Takes N 64 or 128 and P a multiple of the block's rows
// (`update_shape_fits`); the launcher runs entry 0 otherwise. Only
// ssd_update.cu includes it.

#include <cooperative_groups.h>
#include <cstdint>
#include <cuda_runtime.h>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/gated_norm.cuh"

namespace mstar::kernels::cuda::detail {

/// ssd_update's operands as the kernel reads them (strides resolved).
struct update_args {
  const float* dt_bias;  // [H]
  const float* A_log;    // [H]
  const float* D;        // [H] or null
  int heads, head_dim, state_size, heads_per_group;
  float dt_min, dt_max;
  const float* x;   // x[b][h][p] at b * x_stride + h * P + p
  const float* dt;  // dt[b][h] at b * dt_stride + h
  const float* B;   // B[b][g][n] at b * bc_stride + g * N + n
  const float* C;   // as B
  std::int64_t x_stride, dt_stride, bc_stride;
  float* y;                       // [batch][H][P], dense
  float* state;                   // [slots][H][P][N], 16-byte aligned
  const std::int32_t* slots;      // [batch]
  const std::uint8_t* has_state;  // [batch] or null: every row resumes
  bool bc_vector;                 // B and C rows 16-byte aligned: float4 loads
  bool settled;                   // ssd_update_params::state_settled: the slot and
                                  // state are read before the chained wait
  std::uint8_t release;           // when the next kernel is released (update_release)
};

/// When the rows kernel releases the next chained kernel (ssd_update.cu's
/// MSTAR_SSD_RELEASE): at its start, once its state's loads are issued,
/// once its sums are done (the state's loads returned, before the norm
/// fold), or at its end (no release: the next kernel waits for the grid).
enum update_release : std::uint8_t {
  release_at_start = 0,
  release_at_loads = 1,
  release_at_sums = 2,
  release_at_end = 3
};

/// The gated-norm fold's operands (recurrent.hpp's ssd_update_gated_norm):
/// out = bf16(norm(y * silu(gate)) * weight) by groups of the kernel's
/// NormV * 128 channels c = h * P + p, a group's heads one cluster.
struct norm_fold_args {
  const float* gate = nullptr;  // gate[b][c] at b * gate_stride + c, rows 16-byte aligned
  std::int64_t gate_stride = 0;
  const float* weight = nullptr;  // [H * P], 16-byte aligned
  std::uint16_t* out = nullptr;   // [batch][H * P], dense, 8-byte aligned
  float eps = 0.0F;
};

/// Quads (4 channels) of a head the fold's warp 0 norms, one a lane: P / 4.
inline constexpr int norm_fold_max_quads = 32;

/// A launch shape of `ssd_update_rows_kernel`.
struct update_shape {
  int cols = 1;       ///< float4 of a state row a lane holds: lanes a row = N / (4 cols), <= 32
  int threads = 32;   ///< threads a block, a multiple of 32
  int rows = 8;       ///< state rows (p) a thread, a power of two
  int stream = 0;     ///< cache-streaming hints on the state's loads (bit 0) and stores (bit 1)
  int max_regs = 72;  ///< registers a thread (`__maxnreg__`)
};

template <int Stream>
__device__ __forceinline__ float4 load_update_state(const float4* at) {
  if constexpr ((Stream & 1) != 0)
    return __ldcs(at);
  else
    return *at;
}

template <int Stream>
__device__ __forceinline__ void store_update_state(float4* at, float4 v) {
  if constexpr ((Stream & 2) != 0)
    __stcs(at, v);
  else
    *at = v;
}

// Chunk c (float4) of a B or C row; four scalar loads where the rows are not
// 16-byte aligned (the flag is the same for every thread).
__device__ __forceinline__ float4 load_bc(const float* row, int c, bool vector) {
  if (vector)
    return load_coherent(reinterpret_cast<const float4*>(row) + c);
  return make_float4(load_coherent(row + 4 * c), load_coherent(row + 4 * c + 1),
                     load_coherent(row + 4 * c + 2), load_coherent(row + 4 * c + 3));
}

// The gated-norm fold's first step, every thread at the kernel's start: an
// arrival on the cluster barrier that norm_fold_cluster waits on before its
// writes into other blocks' shared memory (they must have started).
__device__ __forceinline__ void cluster_started() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}

// The gated-norm fold's end of block (h, b), every thread, once `ys`
// holds the head's y (P floats): warp 0's lane l < P / 4 gates quad l
// (`zq`, the gate's, loaded under the update) and sends its squares to
// every block of the cluster (the group's heads, rank k the group's k-th
// head: quad k P / 4 + l of the group); after the cluster barrier each
// block's warp 0 sums them as gated_norm_group does (lane l: quads l, l +
// 32, ... in order from 0, then group_sum's butterfly), so the scale has
// gated_rms_norm's warp form's bits, and stores its own quads normed
// (store_normed with the weight's quad `wq`). `sq` is the block's
// [NormV * 32] of shared memory; nothing is read remotely, so no block
// waits on another after the barrier.
template <int V>
__device__ __forceinline__ void norm_fold_cluster(const update_args& a, const norm_fold_args& f,
                                                  int b, int h, const float* ys, float* sq,
                                                  float4 zq, float4 wq) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int quads = a.head_dim / 4;
  const int l = static_cast<int>(threadIdx.x);
  // Every block of the cluster has started (cluster_started's arrival, at
  // the kernel's start) before any writes another's shared memory.
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  __syncthreads();  // ys whole
  float4 v = make_float4(0.F, 0.F, 0.F, 0.F);
  if (l < quads) {
    v = gated_quad(reinterpret_cast<const float4*>(ys)[l], zq);
    const float sum = squares_of(v);
    const int at = static_cast<int>(cluster.block_rank()) * quads + l;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r)
      cluster.map_shared_rank(sq, r)[at] = sum;
  }
  cluster.sync();
  if (l >= 32)
    return;
  float sum_sq = 0.0F;
#pragma unroll
  for (int j = 0; j < V; ++j)
    sum_sq += sq[j * 32 + l];
  sum_sq = group_sum(sum_sq);
  const float scale = rsqrtf(sum_sq / static_cast<float>(V * 128) + f.eps);
  if (l < quads) {
    store_normed(v, scale, wq, nullptr, f.out + static_cast<std::int64_t>(b) * a.heads * a.head_dim,
                 h * quads + l);
  }
#endif
}

// Block (x, h, b): state rows p of head h of batch row b from x * block_rows
// on. `lanes` consecutive lanes share a row, float4 lane + j * lanes each;
// a block has `groups` of them side by side and a thread's `Rows` rows are
// `groups` apart, so a block's rows are contiguous. The shape's fields come
// as separate template arguments (nvcc's kernel stubs take no class-type
// ones). `NormV` > 0: the gated-norm fold (norm_fold_cluster): block (h,
// b) takes the whole head, `Sub` sub-blocks of `Threads` threads each
// doing what block (sub, h, b) of the unfolded launch does (the same rows,
// lanes and sums, so the same bits), in clusters of a norm group's heads;
// 0: `f` is unused and Sub 1.
template <int N4, int Cols, int Threads, int Rows, int Stream, int MaxRegs, int NormV, int Sub>
__global__ void __launch_bounds__(Threads* Sub) __maxnreg__(MaxRegs)
    ssd_update_rows_kernel(update_args a, norm_fold_args f) {
  constexpr bool Fold = NormV > 0;
  static_assert(Fold || Sub == 1);
  constexpr int lanes = N4 / Cols;
  constexpr int groups = Threads / lanes;
  constexpr int block_rows = groups * Rows;
  static_assert(lanes * Cols == N4 && lanes <= 32 && (lanes & (lanes - 1)) == 0);
  static_assert(Threads % 32 == 0 && Rows > 0 && (Rows & (Rows - 1)) == 0);
  const int b = static_cast<int>(Fold ? blockIdx.y : blockIdx.z);
  const int h = static_cast<int>(Fold ? blockIdx.x : blockIdx.y);
  const int tid = static_cast<int>(Fold ? threadIdx.x % Threads : threadIdx.x);
  const int bx = static_cast<int>(Fold ? threadIdx.x / Threads : blockIdx.x);
  const int lane = tid % lanes;
  const int p0 = bx * block_rows + tid / lanes;
  // The fold: the head's y, and the group's quads' squares (norm_fold_cluster).
  __shared__ __align__(16) float ys[Fold ? Sub * block_rows : 1];
  __shared__ float sq[Fold ? NormV * 32 : 1];
  if constexpr (Fold)
    cluster_started();
  if (a.release == release_at_start)
    chain_release();
  // The head's parameters before the wait (a chained launch: no kernel
  // writes them).
  const float dt_bias = load_weight(a.dt_bias + h);
  const float a_log = load_weight(a.A_log + h);
  const float skip = a.D != nullptr ? load_weight(a.D + h) : 0.0F;
  const bool quad_lane = Fold && static_cast<int>(threadIdx.x) < a.head_dim / 4;
  float4 wq{};  // the fold: this lane's quad of the norm weight, and of the gate
  float4 zq{};
  if (quad_lane) {
    wq = load_weight(reinterpret_cast<const float4*>(f.weight) + h * (a.head_dim / 4) +
                     static_cast<int>(threadIdx.x));
  }
  // The row's metadata, then its state (one branch, the same for the whole
  // block, around all of the loads): before the wait where they are settled.
  std::int32_t slot = -1;
  bool carried = false;
  float4* first = nullptr;  // the thread's first float4 of its first row
  float4 s[Rows][Cols];
  const auto read_slot = [&] {
    slot = a.slots[b];
    carried = a.has_state == nullptr || a.has_state[b] != 0;
  };
  const auto load_state = [&] {
    if (slot < 0)
      return;
    first = reinterpret_cast<float4*>(a.state) +
            ((static_cast<std::int64_t>(slot) * a.heads + h) * a.head_dim + p0) * N4 + lane;
    if (carried) {
#pragma unroll
      for (int m = 0; m < Rows; ++m) {
#pragma unroll
        for (int j = 0; j < Cols; ++j)
          s[m][j] = load_update_state<Stream>(first + (m * groups * N4 + j * lanes));
      }
    } else {
#pragma unroll
      for (int m = 0; m < Rows; ++m) {
#pragma unroll
        for (int j = 0; j < Cols; ++j)
          s[m][j] = make_float4(0.F, 0.F, 0.F, 0.F);
      }
    }
  };
  if (a.settled) {
    read_slot();
    load_state();
    if (a.release == release_at_loads)
      chain_release();
  }
  chain_wait();
  // Otherwise the metadata first, then every input that does not depend on
  // the slot, so that they are in flight while the slot comes back.
  if (!a.settled)
    read_slot();
  if (quad_lane) {
    zq = load_coherent(reinterpret_cast<const float4*>(f.gate + b * f.gate_stride) +
                       h * (a.head_dim / 4) + static_cast<int>(threadIdx.x));
  }
  const float* x_row = a.x + b * a.x_stride + static_cast<std::int64_t>(h) * a.head_dim + p0;
  float xs[Rows];
#pragma unroll
  for (int m = 0; m < Rows; ++m)
    xs[m] = load_coherent(x_row + m * groups);
  const float raw = load_coherent(a.dt + b * a.dt_stride + h) + dt_bias;
  const std::int64_t g_off =
      b * a.bc_stride + static_cast<std::int64_t>(h / a.heads_per_group) * a.state_size;
  float4 bv[Cols];
  float4 cv[Cols];
#pragma unroll
  for (int j = 0; j < Cols; ++j) {
    bv[j] = load_bc(a.B + g_off, lane + j * lanes, a.bc_vector);
    cv[j] = load_bc(a.C + g_off, lane + j * lanes, a.bc_vector);
  }
  float* const y = a.y + (static_cast<std::int64_t>(b) * a.heads + h) * a.head_dim + p0;
  if (slot < 0) {
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < Rows; ++m)
        y[m * groups] = 0.0F;
    }
    if constexpr (Fold) {
      if (lane == 0) {
#pragma unroll
        for (int m = 0; m < Rows; ++m)
          ys[p0 + m * groups] = 0.0F;
      }
      norm_fold_cluster<NormV>(a, f, b, h, ys, sq, zq, wq);
    }
    return;
  }
  if (!a.settled) {
    load_state();
    if (a.release == release_at_loads)
      chain_release();
  }
  // softplus as torch takes it (threshold 20), then the clamp.
  const float sp = raw > 20.0F ? raw : log1pf(expf(raw));
  const float dt = fminf(fmaxf(sp, a.dt_min), a.dt_max);
  const float decay = expf(dt * -expf(a_log));
  float acc[Rows];
#pragma unroll
  for (int m = 0; m < Rows; ++m) {
    const float dtx = dt * xs[m];
    acc[m] = lane == 0 ? skip * xs[m] : 0.0F;
#pragma unroll
    for (int j = 0; j < Cols; ++j) {
      float4& v = s[m][j];
      v.x = fmaf(dtx, bv[j].x, decay * v.x);
      v.y = fmaf(dtx, bv[j].y, decay * v.y);
      v.z = fmaf(dtx, bv[j].z, decay * v.z);
      v.w = fmaf(dtx, bv[j].w, decay * v.w);
      store_update_state<Stream>(first + (m * groups * N4 + j * lanes), v);
      acc[m] = dot4(v, cv[j], acc[m]);
    }
  }
  // Lane l of a row's lanes is left with the sums of its rows l * Rows /
  // lanes + i (each held by lanes / Rows lanes where Rows < lanes: the
  // first of them writes).
  halving_sums<lanes>(acc, lane);
  constexpr int held = Rows >= lanes ? Rows / lanes : 1;
  constexpr int share = Rows >= lanes ? 1 : lanes / Rows;
  if (lane % share == 0) {
    const int r0 = lane * Rows / lanes;
#pragma unroll
    for (int i = 0; i < held; ++i) {
      y[(r0 + i) * groups] = acc[i];
      if constexpr (Fold)
        ys[p0 + (r0 + i) * groups] = acc[i];
    }
  }
  if (a.release == release_at_sums)
    chain_release();
  if constexpr (Fold)
    norm_fold_cluster<NormV>(a, f, b, h, ys, sq, zq, wq);
}

/// State rows (p) a block of shape `S` covers at N = 4 N4.
template <int N4, update_shape S>
constexpr int update_block_rows() {
  return S.threads / (N4 / S.cols) * S.rows;
}

/// Whether shape `S` at N = 4 N4 takes the step: P a multiple of its
/// block's rows and the grid within bounds.
template <int N4, update_shape S>
bool update_rows_fit(const update_args& a, int batch) {
  return a.head_dim % update_block_rows<N4, S>() == 0 && a.heads <= 65535 && batch <= 65535;
}

/// Launches shape `S` at N = 4 N4 where update_rows_fit; false (nothing
/// launched) otherwise.
template <int N4, update_shape S>
bool launch_update_rows(const update_args& a, int batch, cudaStream_t stream) {
  constexpr int block_rows = update_block_rows<N4, S>();
  if (!update_rows_fit<N4, S>(a, batch))
    return false;
  const dim3 grid(static_cast<unsigned>(a.head_dim / block_rows), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(batch));
  launch_chained(ssd_update_rows_kernel<N4, S.cols, S.threads, S.rows, S.stream, S.max_regs, 0, 1>,
                 grid, S.threads, 0, stream, a, norm_fold_args{});
  return true;
}

/// Shape `S` at the arguments' N (64 or 128); false where it does not take them.
template <update_shape S>
bool launch_update_shape(const update_args& a, int batch, cudaStream_t stream) {
  if (a.state_size == 128)
    return launch_update_rows<32, S>(a, batch, stream);
  if (a.state_size == 64)
    return launch_update_rows<16, S>(a, batch, stream);
  return false;
}

/// The gated-norm fold in shape `S` at N = 4 N4, groups of NormV * 128
/// channels: a block a (head, row) of P / block_rows sub-blocks, clusters
/// of `cluster` heads (a norm group). The caller checked the shape
/// (ssd_update_gated_norm_fits).
template <int N4, update_shape S, int NormV, int Sub>
void launch_update_fold(const update_args& a, int batch, unsigned cluster, cudaStream_t stream,
                        const norm_fold_args& f) {
  const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>(batch));
  launch_chained_clusters(
      ssd_update_rows_kernel<N4, S.cols, S.threads, S.rows, S.stream, S.max_regs, NormV, Sub>, grid,
      S.threads * Sub, cluster, 0, stream, a, f);
}

/// The rows a block of shape `S` covers at N `state_size` (64 or 128; 0 otherwise).
template <update_shape S>
constexpr int update_block_rows_at(int state_size) {
  return state_size == 128  ? update_block_rows<32, S>()
         : state_size == 64 ? update_block_rows<16, S>()
                            : 0;
}

}  // namespace mstar::kernels::cuda::detail
