#include <algorithm>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/ssd_scan.hpp"
#include "kernels/cuda/internal/ssd_update.hpp"
#include "kernels/cuda/recurrent.hpp"

namespace mstar::kernels::cuda {
namespace {

// Thread layout of a (row, head) block: thread (p, s) holds, for head-dim
// index p, the state columns of float4 chunks c = s + k * split, k < K4
// (n = 4c .. 4c + 3). `split` is a power of two <= 32 dividing the warp, so
// y[p]'s sum over n is a shuffle reduction inside the warp.
struct ssd_args {
  const float* dt_bias;
  const float* A_log;
  const float* D;
  int heads, head_dim, state_size, heads_per_group;
  float dt_min, dt_max;
  const float* x;
  const float* dt;
  const float* B;
  const float* C;
  std::int64_t x_stride, dt_stride, bc_stride;
  float* y;
  float* state;
  const std::int32_t* slots;
  const std::uint8_t* has_state;  // null: every row resumes
  int split;
};

__device__ __forceinline__ float dt_of(const ssd_args& a, std::int64_t t, int h) {
  const float v = a.dt[t * a.dt_stride + h] + a.dt_bias[h];
  const float sp = v > 20.0F ? v : log1pf(expf(v));
  return fminf(fmaxf(sp, a.dt_min), a.dt_max);
}

// One token's inputs for thread (p, s): prefetched a token ahead in the scan.
template <int K4>
struct token_in {
  float dt;
  float x;
  float b[K4][4];
  float c[K4][4];
};

template <int K4>
__device__ __forceinline__ void load_token(const ssd_args& a, std::int64_t t, int h, int p, int s,
                                           token_in<K4>& in) {
  const int g = h / a.heads_per_group;
  in.dt = dt_of(a, t, h);
  in.x = a.x[t * a.x_stride + static_cast<std::int64_t>(h) * a.head_dim + p];
  const float* bg = a.B + t * a.bc_stride + static_cast<std::int64_t>(g) * a.state_size;
  const float* cg = a.C + t * a.bc_stride + static_cast<std::int64_t>(g) * a.state_size;
#pragma unroll
  for (int k = 0; k < K4; ++k) {
    const int n0 = 4 * (s + k * a.split);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool ok = n0 + j < a.state_size;
      in.b[k][j] = ok ? bg[n0 + j] : 0.0F;
      in.c[k][j] = ok ? cg[n0 + j] : 0.0F;
    }
  }
}

// Advances the thread's state by one token; returns its share of y[p].
template <int K4>
__device__ __forceinline__ float step(float4 (&st)[K4], const token_in<K4>& in, float decay) {
  const float dtx = in.dt * in.x;
  float acc = 0.0F;
#pragma unroll
  for (int k = 0; k < K4; ++k) {
    st[k].x = decay * st[k].x + dtx * in.b[k][0];
    st[k].y = decay * st[k].y + dtx * in.b[k][1];
    st[k].z = decay * st[k].z + dtx * in.b[k][2];
    st[k].w = decay * st[k].w + dtx * in.b[k][3];
    acc +=
        st[k].x * in.c[k][0] + st[k].y * in.c[k][1] + st[k].z * in.c[k][2] + st[k].w * in.c[k][3];
  }
  return acc;
}

__device__ __forceinline__ float reduce_split(float v, int split) {
  for (int off = split / 2; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffU, v, off, split);
  return v;
}

__device__ __forceinline__ float4* state_at(const ssd_args& a, std::int32_t slot, int h, int p) {
  const std::int64_t row =
      (static_cast<std::int64_t>(slot) * a.heads + h) * a.head_dim + p;  // [slot][h][p]
  return reinterpret_cast<float4*>(a.state + row * a.state_size);
}

template <int K4>
__device__ __forceinline__ void load_state(const ssd_args& a, const float4* sp, int s, bool fresh,
                                           float4 (&st)[K4]) {
  const int chunks = a.state_size / 4;
#pragma unroll
  for (int k = 0; k < K4; ++k) {
    const int c = s + k * a.split;
    st[k] = !fresh && c < chunks ? sp[c] : float4{0.0F, 0.0F, 0.0F, 0.0F};
  }
}

template <int K4>
__device__ __forceinline__ void store_state(const ssd_args& a, float4* sp, int s,
                                            const float4 (&st)[K4]) {
  const int chunks = a.state_size / 4;
#pragma unroll
  for (int k = 0; k < K4; ++k) {
    if (s + k * a.split < chunks)
      sp[s + k * a.split] = st[k];
  }
}

// Threads a block at most: the scan's (plan() keeps to it; K4 = 8 would
// take 201 registers uncapped, too many for the 512 threads head_dim 128
// with state 128 needs: launches failed with "too many resources"; capped,
// 128 and 472 B spilled, a shape no model here has), and the update's
// (its kernels take 64 registers at most, 1024 threads fit).
constexpr int scan_max_threads = 512;
constexpr int update_max_threads = 1024;

// Block (head, row): rows along y. Tokens [begin, end) of the row. Rows
// with chunked[r] >= 0 belong to the chunked path (chunked null: none).
// The chunked path may launch it chained on its chunk table: it waits for
// that before anything (a no-op in a plain launch) and never lets the
// kernel after it start early, so that one starts with the table done.
template <int K4>
__global__ void __launch_bounds__(scan_max_threads)
    ssd_scan_kernel(ssd_args a, const std::int32_t* cu, const std::int32_t* chunked) {
  detail::chain_wait();
  const int h = static_cast<int>(blockIdx.x);
  const int r = static_cast<int>(blockIdx.y);
  if (chunked != nullptr && chunked[r] >= 0)
    return;
  const int s = static_cast<int>(threadIdx.x) % a.split;
  // Threads past head_dim (the block is a whole number of warps) compute on
  // p = 0 and store nothing, so every shuffle sees a full warp.
  const bool live = static_cast<int>(threadIdx.x) / a.split < a.head_dim;
  const int p = live ? static_cast<int>(threadIdx.x) / a.split : 0;
  const std::int64_t begin = cu[r];
  const std::int64_t end = cu[r + 1];
  const std::int32_t slot = a.slots[r];
  float* y = a.y + static_cast<std::int64_t>(h) * a.head_dim + p;
  const std::int64_t y_stride = static_cast<std::int64_t>(a.heads) * a.head_dim;
  if (slot < 0) {
    for (std::int64_t t = begin; t < end && s == 0 && live; ++t)
      y[t * y_stride] = 0.0F;
    return;
  }
  if (end == begin)
    return;
  float4* sp = state_at(a, slot, h, p);
  float4 st[K4];
  load_state<K4>(a, sp, s, a.has_state[r] == 0, st);
  const float neg_a = -expf(a.A_log[h]);
  const float skip = a.D != nullptr ? a.D[h] : 0.0F;
  token_in<K4> cur;
  load_token<K4>(a, begin, h, p, s, cur);
  for (std::int64_t t = begin; t < end; ++t) {
    token_in<K4> next = cur;
    if (t + 1 < end)
      load_token<K4>(a, t + 1, h, p, s, next);
    const float acc = reduce_split(step<K4>(st, cur, expf(cur.dt * neg_a)), a.split);
    if (s == 0 && live)
      y[t * y_stride] = acc + skip * cur.x;
    cur = next;
  }
  if (live)
    store_state<K4>(a, sp, s, st);
}

// Block (head, row) for one token per row.
template <int K4>
__global__ void ssd_update_kernel(ssd_args a) {
  const int h = static_cast<int>(blockIdx.x);
  const int b = static_cast<int>(blockIdx.y);
  const int s = static_cast<int>(threadIdx.x) % a.split;
  const bool live = static_cast<int>(threadIdx.x) / a.split < a.head_dim;  // as in the scan
  const int p = live ? static_cast<int>(threadIdx.x) / a.split : 0;
  const std::int32_t slot = a.slots[b];
  float* y = a.y + (static_cast<std::int64_t>(b) * a.heads + h) * a.head_dim + p;
  if (slot < 0) {
    if (s == 0 && live)
      *y = 0.0F;
    return;
  }
  float4* sp = state_at(a, slot, h, p);
  float4 st[K4];
  load_state<K4>(a, sp, s, a.has_state != nullptr && a.has_state[b] == 0, st);
  token_in<K4> in;
  load_token<K4>(a, b, h, p, s, in);
  const float decay = expf(in.dt * -expf(a.A_log[h]));
  const float acc = reduce_split(step<K4>(st, in, decay), a.split);
  if (!live)
    return;
  store_state<K4>(a, sp, s, st);
  if (s == 0)
    *y = acc + (a.D != nullptr ? a.D[h] : 0.0F) * in.x;
}

// Picks K4 (chunks per thread) and split; false when the geometry does not fit.
bool plan(ssd_args& a, int& k4, int min_k4, int max_threads) {
  const int chunks = a.state_size / 4;
  for (const int limit : {512, max_threads}) {
    for (const int k : {1, 2, 4, 8}) {
      if (k < min_k4)
        continue;
      int split = 1;
      while (split * k < chunks)
        split *= 2;
      if (split <= 32 && (a.head_dim * split + 31) / 32 * 32 <= limit) {
        a.split = split;
        k4 = k;
        return true;
      }
    }
  }
  return false;
}

// The update is one pass over the state: more chunks per thread put more
// loads in flight (measured on an H200: 8 chunks, 0.72 of copy bandwidth,
// against 0.66 with 4 and 0.71 with 16, at N = 128).
int update_min_k4(int state_size) {
  int k = 1;
  while (k < 8 && 4 * k < state_size)
    k *= 2;
  return k;
}

bool prepare(const ssd_weights& w, const ssd_inputs& in, float* y, float* state,
             const std::int32_t* slots, const std::uint8_t* has_state, ssd_args& a, int& k4,
             int min_k4, int max_threads) {
  if (w.num_heads <= 0 || w.head_dim <= 0 || w.n_groups <= 0 || w.num_heads % w.n_groups != 0 ||
      w.state_size <= 0 || w.state_size % 4 != 0 || reinterpret_cast<std::uintptr_t>(state) % 16)
    return false;
  a = ssd_args{w.dt_bias,
               w.A_log,
               w.D,
               w.num_heads,
               w.head_dim,
               w.state_size,
               w.num_heads / w.n_groups,
               w.dt_min,
               w.dt_max,
               in.x,
               in.dt,
               in.B,
               in.C,
               in.x_stride != 0 ? in.x_stride : std::int64_t{w.num_heads} * w.head_dim,
               in.dt_stride != 0 ? in.dt_stride : w.num_heads,
               in.bc_stride != 0 ? in.bc_stride : std::int64_t{w.n_groups} * w.state_size,
               y,
               state,
               slots,
               has_state,
               1};
  return plan(a, k4, min_k4, max_threads);
}

// head_dim * split threads rounded up to whole warps.
unsigned block_threads(const ssd_args& a) {
  return static_cast<unsigned>((a.head_dim * a.split + 31) / 32 * 32);
}

template <template <int> class Launch, class... Args>
cudaError_t dispatch(int k4, Args&&... args) {
  switch (k4) {
    case 1:
      return Launch<1>{}(args...);
    case 2:
      return Launch<2>{}(args...);
    case 4:
      return Launch<4>{}(args...);
    default:
      return Launch<8>{}(args...);
  }
}

template <int K4>
struct launch_scan {
  cudaError_t operator()(const ssd_args& a, const std::int32_t* cu, const std::int32_t* chunked,
                         int rows, bool chained, cudaStream_t st) {
    const dim3 grid{static_cast<unsigned>(a.heads), static_cast<unsigned>(rows)};
    if (chained)
      detail::launch_chained(ssd_scan_kernel<K4>, grid, dim3(block_threads(a)), 0, st, a, cu,
                             chunked);
    else
      ssd_scan_kernel<K4><<<grid, block_threads(a), 0, st>>>(a, cu, chunked);
    return detail::launch_status();
  }
};

template <int K4>
struct launch_update {
  cudaError_t operator()(const ssd_args& a, int batch, cudaStream_t st) {
    const dim3 grid{static_cast<unsigned>(a.heads), static_cast<unsigned>(batch)};
    ssd_update_kernel<K4><<<grid, block_threads(a), 0, st>>>(a);
    return detail::launch_status();
  }
};

}  // namespace

namespace detail {

cudaError_t launch_ssd_scan(const ssd_scan_varlen_params& p, const std::int32_t* chunked_rows,
                            cudaStream_t stream, bool chained) {
  if (p.cu_seqlens.size() < 2)
    return cudaSuccess;
  const int rows = static_cast<int>(p.cu_seqlens.size()) - 1;
  ssd_args a{};
  int k4 = 0;
  if (!prepare(p.w, p.in, p.y, p.state, p.slot_indices.data(), p.has_state.data(), a, k4, 1,
               scan_max_threads) ||
      rows > 65535 || p.slot_indices.size() < static_cast<std::size_t>(rows) ||
      p.has_state.size() < static_cast<std::size_t>(rows)) {
    return cudaErrorInvalidValue;
  }
  return dispatch<launch_scan>(k4, a, p.cu_seqlens.data(), chunked_rows, rows, chained, stream);
}

}  // namespace detail

cudaError_t ssd_scan_varlen(const ssd_scan_varlen_params& p, cudaStream_t stream) {
  return detail::launch_ssd_scan(p, nullptr, stream);
}

cudaError_t detail::launch_ssd_update_blocks(const ssd_update_params& p, cudaStream_t stream) {
  if (p.batch == 0)
    return cudaSuccess;
  ssd_args a{};
  int k4 = 0;
  const std::uint8_t* has_state = p.has_state.empty() ? nullptr : p.has_state.data();
  if (!prepare(p.w, p.in, p.y, p.state, p.slot_indices.data(), has_state, a, k4,
               update_min_k4(p.w.state_size), update_max_threads) ||
      p.batch < 0 || p.batch > 65535 || p.slot_indices.size() < static_cast<std::size_t>(p.batch) ||
      (has_state != nullptr && p.has_state.size() < static_cast<std::size_t>(p.batch))) {
    return cudaErrorInvalidValue;
  }
  return dispatch<launch_update>(k4, a, p.batch, stream);
}

}  // namespace mstar::kernels::cuda
