#pragma once

// Shared by the chunked SSD kernels (ssd_chunked.cu: the chunk table, the
// in-chunk kernel, the launcher; ssd_chunk_recurrence.cu: the state carried
// through each row's chunks): the chunk geometry, the kernels' arguments,
// the workspace's per-chunk layout, TF32 fragments. Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>
#include <mma.h>

namespace mstar::kernels::cuda::detail::ssd_chunked {

namespace wmma = nvcuda::wmma;

constexpr int chunk = 64;
constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int slice = 32;        // head-dim rows per recurrence block, columns per staging
constexpr int ld_m = chunk + 4;  // shared [64][64]
constexpr int ld_p = slice + 4;  // shared [64][32]
constexpr int dec_stride = 2 * chunk + 4;  // per (chunk, head): gamma_t, w_t, gamma_C, padding
constexpr unsigned full_mask = 0xffffffffU;

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
  // [capacity][H][dec_stride]: gamma_t = e^{G_t} (64), w_t = e^{G_C - G_t} dt_t
  // (64), gamma_C = e^{G_C}; G_t the running sum of dt * A inside the chunk.
  float* decays;
};

/// dt as the sequential kernel computes it: softplus (torch's threshold 20)
/// of raw + bias, then the clamp.
__device__ __forceinline__ float dt_of(const chunk_args& a, std::int64_t t, int h) {
  const float v = a.dt[t * a.dt_stride + h] + a.dt_bias[h];
  const float sp = v > 20.0F ? v : log1pf(expf(v));
  return fminf(fmaxf(sp, a.dt_min), a.dt_max);
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

/// Enqueues chunk_recurrence_kernel<N> (N 64 or 128): a block per (32
/// head-dim rows, head, row); rows the table does not hold return at once.
[[nodiscard]] cudaError_t launch_recurrence(const chunk_args& a, cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
