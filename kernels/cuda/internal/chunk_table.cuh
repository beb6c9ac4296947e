#pragma once

// The (row, chunk) table of the chunked recurrences (the gated delta rule's
// and the SSD scan's): one warp counts every row's chunks, takes a prefix
// sum and writes each chunk's (row, chunk of the row). `Args` has the
// fields the two chunk_args share: cu, slots, rows, chunked_from, capacity,
// row_first, table, n_chunks. Only .cu files include it.

#include <cuda_runtime.h>

namespace mstar::kernels::cuda::detail {

// Run by one warp. A row that would overflow the table (a wrong `tokens`)
// gets row_first -1 and stays sequential; rows without a slot or shorter
// than `chunked_from` too.
template <int Chunk, class Args>
__device__ __forceinline__ void fill_chunk_table(const Args& p) {
  constexpr unsigned all = 0xffffffffU;
  const int lane = static_cast<int>(threadIdx.x);
  int running = 0;
  int used = 0;
  for (int base = 0; base < p.rows; base += 32) {
    const int r = base + lane;
    int n = 0;
    if (r < p.rows) {
      const int len = p.cu[r + 1] - p.cu[r];
      if (p.slots[r] >= 0 && len > 0 && len >= p.chunked_from)
        n = (len + Chunk - 1) / Chunk;
    }
    int incl = n;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = __shfl_up_sync(all, incl, off);
      if (lane >= off)
        incl += y;
    }
    const int first = running + incl - n;
    const bool fits = n > 0 && first + n <= p.capacity;
    if (r < p.rows)
      p.row_first[r] = fits ? first : -1;
    used = max(used, fits ? first + n : 0);
    for (int i = 0; i < 32; ++i) {
      const int fi = __shfl_sync(all, fits ? first : -1, i);
      const int ni = __shfl_sync(all, n, i);
      for (int j = lane; fi >= 0 && j < ni; j += 32)
        p.table[fi + j] = make_int2(base + i, j);
    }
    running += __shfl_sync(all, incl, 31);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
    used = max(used, __shfl_xor_sync(all, used, off));
  if (lane == 0)
    *p.n_chunks = used;
}

}  // namespace mstar::kernels::cuda::detail
