#pragma once

// Shared by the chunked SSD kernels (ssd_chunked.cu: the chunk table, the
// output kernel, the launcher; ssd_chunk_recurrence.cu: the chunks' own end
// states and the walk that passes states between chunks): the chunk
// geometry, the kernels' arguments, the decays of a chunk, TF32 fragments.
// Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>
#include <mma.h>

namespace mstar::kernels::cuda::detail::ssd_chunked {

namespace wmma = nvcuda::wmma;

constexpr int chunk = 128;
constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int slice = 32;                     // head-dim columns per staging
constexpr int out_rows = 64;                  // tokens per output block
constexpr int out_blocks = chunk / out_rows;  // output blocks per (chunk, head)
constexpr int ld_p = slice + 4;               // shared [tokens][32]
constexpr unsigned full_mask = 0xffffffffU;
static_assert(chunk % out_rows == 0 && chunk <= threads && chunk % 32 == 0);
static_assert(warps == (out_rows / 16) * (slice / 16), "one 16x16 output tile per warp");

struct chunk_args {
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
  const std::int32_t* cu;
  float* state;
  const std::int32_t* slots;
  const std::uint8_t* has_state;
  int rows, chunked_from, capacity;
  std::int32_t* row_first;  // [R]: the row's first chunk, -1 when it is not chunked
  std::int32_t* n_chunks;   // [1]: chunks in the table
  int2* table;              // [capacity]: (row, chunk of the row)
  float* gammas;            // [capacity][H]: e^{G_C}, the chunk's whole decay
  // [capacity][H][P][N]: the chunk's own end state (zero start), replaced by
  // the walk with the state at the chunk's start.
  float* states;
};

/// dt as the sequential kernel computes it: softplus (torch's threshold 20)
/// of raw + bias, then the clamp.
__device__ __forceinline__ float dt_of(const chunk_args& a, std::int64_t t, int h) {
  const float v = a.dt[t * a.dt_stride + h] + a.dt_bias[h];
  const float sp = v > 20.0F ? v : log1pf(expf(v));
  return fminf(fmaxf(sp, a.dt_min), a.dt_max);
}

/// dt of the chunk's tokens into dts[chunk] and G_t, the running sum of
/// dt A (tokens past the row's end, t >= n, add 0), into cum[chunk]: the
/// first chunk / 32 warps scan 32 entries each, then each entry adds the
/// totals of the warps before it. Called by the whole block; ends synced.
__device__ __forceinline__ void chunk_log_decays(const chunk_args& a, std::int64_t t0, int n, int h,
                                                 float* cum, float* dts) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  if (tid < chunk) {
    const float dtv = tid < n ? dt_of(a, t0 + tid, h) : 0.0F;
    float la = dtv * -expf(a.A_log[h]);
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const float v = __shfl_up_sync(full_mask, la, off);
      if (lane >= off)
        la += v;
    }
    dts[tid] = dtv;
    cum[tid] = la;
  }
  __syncthreads();
  float before = 0.0F;
  if (tid < chunk) {
    for (int w = 0; w < tid / 32; ++w)
      before += cum[32 * w + 31];
  }
  __syncthreads();
  if (tid < chunk)
    cum[tid] += before;
  __syncthreads();
}

using frag_acc = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
using frag_a_row =
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using frag_a_col =
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using frag_b_row =
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using frag_b_col =
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;

template <class Frag>
__device__ __forceinline__ void load_tf32(Frag& f, const float* src, int ld) {
  wmma::load_matrix_sync(f, src, static_cast<unsigned>(ld));
#pragma unroll
  for (int i = 0; i < f.num_elements; ++i)
    f.x[i] = wmma::__float_to_tf32(f.x[i]);
}

/// Enqueues the states' half (ssd_chunk_recurrence.cu): chunk_state_kernel<N>
/// (N 64 or 128), a block per (chunk, head) writing `gammas` and the
/// chunk's own end state, then the walk, a thread per 4 state entries of a
/// (row, head), leaving each chunk's start state in `states` and the row's
/// last state in its slot. Rows the table does not hold are left alone.
[[nodiscard]] cudaError_t launch_states(const chunk_args& a, cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
