#pragma once

// Shared by the chunked gated-delta-rule kernels (delta_rule_chunked.cu: the
// math, the chunk table, the launcher; delta_rule_chunk_prepare.cu;
// delta_rule_chunk_recurrence.cu): the chunk geometry, the kernels'
// arguments, the workspace's per-chunk layout, TF32 fragments. Only .cu
// files include it.

#include <cstdint>
#include <cuda_runtime.h>
#include <mma.h>

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
  float* blob;              // [capacity][HV][per_head]: W, Qe, U1, Oi, then e^{G_C-G_t}, gamma_C
  float* keys;              // [capacity][HK][64][K]: normalised k
};

__host__ __device__ constexpr std::int64_t per_head(int k, int v) {
  return 2 * chunk * std::int64_t{k} + 2 * chunk * std::int64_t{v} + 128;
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

/// Enqueues chunk_prepare_kernel<K> (K 64 or 128): a block per table entry
/// (a.capacity, the unused ones return at once) and value head.
[[nodiscard]] cudaError_t launch_prepare(const chunk_args& a, int k, cudaStream_t stream);

/// Enqueues chunk_recurrence_kernel<K>: a block per (32 value rows, value
/// head, row); rows the table does not hold return at once.
[[nodiscard]] cudaError_t launch_recurrence(const chunk_args& a, int k, cudaStream_t stream);

}  // namespace mstar::kernels::cuda::detail::chunked
