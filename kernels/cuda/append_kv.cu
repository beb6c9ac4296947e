#include <algorithm>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/internal/paged.cuh"

namespace mstar::kernels::cuda {
namespace {

using detail::arena_args;
using detail::table_args;

struct append_args {
  arena_args arena;
  table_args table;
  const float* k;
  const float* v;
  int kv_heads;
  int head_dim;
};

template <bool Bf16>
__device__ __forceinline__ void store_head(std::byte* dst, const float* src, int d) {
  if constexpr (Bf16)
    reinterpret_cast<std::uint16_t*>(dst)[d] = detail::to_bf16(src[d]);
  else
    reinterpret_cast<float*>(dst)[d] = src[d];
}

// Block per token (striding): find its page and slot, then every kv head's
// K and V elements across the threads.
template <bool Bf16>
__global__ void append_kernel(append_args a) {
  detail::chain_start();
  const int tokens = detail::step_tokens(a.table);
  const int ps = a.arena.page_size;
  const int elems = a.kv_heads * a.head_dim;
  for (int token = blockIdx.x; token < tokens; token += gridDim.x) {
    std::int32_t page = 0;
    std::int32_t slot = 0;
    if (a.table.decode) {
      page = a.table.decode_page[token];
      slot = a.table.decode_offset[token];
    } else {
      const int r = detail::row_of_token(a.table.qo, a.table.rows, token);
      const detail::row_info s = detail::row_at(a.table, ps, r);
      const int pos = s.length - s.new_tokens + (token - s.first_token);
      page = a.table.kv_indices[s.first_page + pos / ps];
      slot = pos % ps;
    }
    const float* k = a.k + static_cast<std::size_t>(token) * elems;
    const float* v = a.v + static_cast<std::size_t>(token) * elems;
    for (int e = threadIdx.x; e < elems; e += blockDim.x) {
      const int h = e / a.head_dim;
      const int d = e % a.head_dim;
      store_head<Bf16>(a.arena.at(0, page, slot, h), k + h * a.head_dim, d);
      store_head<Bf16>(a.arena.at(1, page, slot, h), v + h * a.head_dim, d);
    }
  }
}

}  // namespace

cudaError_t append_kv(const append_kv_params& p, cudaStream_t stream) {
  append_args a{};
  if (!detail::to_arena_args(p.arena, p.layer, a.arena))
    return cudaErrorInvalidValue;
  a.table = detail::to_table_args(p.table);
  a.k = p.k;
  a.v = p.v;
  a.kv_heads = p.arena.geometry.num_kv_heads;
  a.head_dim = p.arena.geometry.head_dim;
  const std::int64_t bound = detail::token_bound(p.table, p.arena.geometry.page_size);
  if (a.table.rows <= 0 || bound <= 0)
    return cudaSuccess;
  const auto blocks = static_cast<unsigned>(
      a.table.decode ? bound : std::min<std::int64_t>(bound, std::int64_t{detail::sm_count()} * 8));
  const int threads = std::min(256, std::max(32, a.kv_heads * a.head_dim));
  if (p.arena.geometry.dtype == mstar::dtype::bfloat16)
    detail::launch_chained(append_kernel<true>, blocks, threads, 0, stream, a);
  else
    detail::launch_chained(append_kernel<false>, blocks, threads, 0, stream, a);
  return detail::launch_status();
}

}  // namespace mstar::kernels::cuda
