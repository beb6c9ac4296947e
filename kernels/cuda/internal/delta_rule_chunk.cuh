#pragma once

// Shared by the chunked gated-delta-rule kernels (delta_rule_chunked.cu: the
// math, the chunk table, the launcher; delta_rule_chunk_prepare.cu;
// delta_rule_chunk_recurrence.cu; delta_rule_chunk_output.cu): the chunk
// geometry, the kernels' arguments, the workspace's per-chunk layout, TF32
// fragments, cp.async. Only .cu files include it.

#include <cstdint>
#include <cuda_runtime.h>
#include <mma.h>

#include "kernels/cuda/internal/cp_async.cuh"

namespace mstar::kernels::cuda::detail::chunked {

namespace wmma = nvcuda::wmma;

constexpr int chunk = 64;
constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int slice = 32;        // value rows per recurrence block
constexpr int ld_c = chunk + 4;  // shared [64][64] matrices
constexpr int ld_s = slice + 4;  // shared [64][32] staging
constexpr unsigned full_mask = 0xffffffffU;

struct chunk_args {
  const float* a_log;
  const float* dt_bias;
  int hk, hv, v_dim, group;
  float scale;
  const float* qkv;
  std::int64_t qkv_stride;
  const float* a;
  const float* b;
  std::int64_t ab_stride;
  float* out;
  const std::int32_t* cu;
  float* state;
  const std::int32_t* slots;
  const std::uint8_t* has_state;
  int rows, chunked_from, capacity;
  std::int32_t* row_first;  // [R]: the row's first chunk, -1 when it is not chunked
  std::int32_t* n_chunks;   // [1]: chunks in the table
  int2* table;              // [capacity]: (row, chunk of the row)
  // [capacity][HV][per_head]: e W, Qe, e U1, Oi (e_t = e^{G_C - G_t}), then
  // e_t and gamma_C = e^{G_C} (tail_floats)
  float* blob;
  float* keys;    // [capacity][HK][64][K]: normalised k
  float* states;  // [capacity][HV][V][K]: the state each chunk starts from
};

constexpr int tail_floats = 128;

__host__ __device__ constexpr std::int64_t per_head(int k, int v) {
  return 2 * chunk * std::int64_t{k} + 2 * chunk * std::int64_t{v} + tail_floats;
}

// Offsets inside one (chunk, value head) blob.
__host__ __device__ constexpr std::int64_t qe_at(int k) {
  return chunk * std::int64_t{k};
}
__host__ __device__ constexpr std::int64_t u1_at(int k) {
  return 2 * chunk * std::int64_t{k};
}
__host__ __device__ constexpr std::int64_t oi_at(int k, int v) {
  return u1_at(k) + chunk * std::int64_t{v};
}
__host__ __device__ constexpr std::int64_t tail_at(int k, int v) {
  return oi_at(k, v) + chunk * std::int64_t{v};
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
__device__ __forceinline__ void load_tf32(Frag& f, const float* src, int ld, float sign = 1.0F) {
  wmma::load_matrix_sync(f, src, static_cast<unsigned>(ld));
#pragma unroll
  for (int i = 0; i < f.num_elements; ++i)
    f.x[i] = wmma::__float_to_tf32(sign * f.x[i]);
}

/// Asks L2 for the 128-byte line at `ptr`.
__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

// `rows` rows of `cols` floats (a multiple of 4, 16-byte aligned rows) from
// global (row stride ld_src) to shared (row stride ld_dst), by all threads.
template <int Threads>
__device__ __forceinline__ void stage_rows(float* dst, int ld_dst, const float* src,
                                           std::int64_t ld_src, int rows, int cols, int tid) {
  const int per_row = cols / 4;
  for (int i = tid; i < rows * per_row; i += Threads) {
    const int row = i / per_row;
    const int col = 4 * (i % per_row);
    cp_async16(dst + row * ld_dst + col, src + row * ld_src + col);
  }
}

/// Enqueues chunk_prepare_kernel<K> (K 64 or 128): a block per table entry
/// (a.capacity, the unused ones return at once) and value head.
[[nodiscard]] cudaError_t launch_prepare(const chunk_args& a, int k, cudaStream_t stream);

/// Enqueues chunk_recurrence_kernel<K, Stages>: a block per (32 value rows,
/// value head, row); rows the table does not hold return at once. `deep`:
/// each chunk's operands staged two chunks ahead (176 KiB of shared memory
/// at K 128, one block an SM) rather than one (101 KiB, two blocks an SM).
[[nodiscard]] cudaError_t launch_recurrence(const chunk_args& a, int k, bool deep,
                                            cudaStream_t stream);

/// Enqueues chunk_output_kernel<K>: a block per table entry (a.capacity,
/// the unused ones return at once) and value head; O = Oi + Qe S_c^T.
[[nodiscard]] cudaError_t launch_output(const chunk_args& a, int k, cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail::chunked
