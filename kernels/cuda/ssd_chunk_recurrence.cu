// The chunked SSD scan's only sequential part in MSTAR_SSD_VARIANT=0's
// path (kernels/cuda/ssd_chunked.cu has the math; by default
// ssd_chunk_walk.cu makes the states and walks them in one kernel): after
// every chunk's own end state (ssd_chunk_staged.cu), a walk per (row,
// head) that passes the state from chunk to chunk, elementwise.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

// Thread: 4 consecutive entries of head h's [P][N] state in row r
// (blockIdx y and z), walked through the row's chunks (consecutive table
// entries from row_first[r]):
//   start_c = h,  h = e^{G_C(c)} h + S_c,
// start_c written over S_c; the walk starts from the slot (zeros when
// has_state is 0) and leaves the last h there. Loads run two chunks ahead.
__global__ void __launch_bounds__(threads) state_pass_kernel(chunk_args a) {
  chain_start();  // (variant 2's chained launch) reads the own states first
  const int r = static_cast<int>(blockIdx.z);
  const int first = a.row_first[r];
  if (first < 0)
    return;
  const int h = static_cast<int>(blockIdx.y);
  const std::int64_t quads = std::int64_t{a.head_dim} * a.state_size / 4;
  const std::int64_t q = std::int64_t{blockIdx.x} * threads + threadIdx.x;
  if (q >= quads)
    return;
  const int len = a.cu[r + 1] - a.cu[r];
  const int nc = (len + chunk - 1) / chunk;
  float4* pool =
      reinterpret_cast<float4*>(a.state) + (std::int64_t{a.slots[r]} * a.heads + h) * quads + q;
  float4 hv = a.has_state[r] != 0 ? *pool : make_float4(0.0F, 0.0F, 0.0F, 0.0F);
  const std::int64_t step = std::int64_t{a.heads} * quads;  // float4s from a chunk to the next
  float4* s = reinterpret_cast<float4*>(a.states) + (std::int64_t{first} * a.heads + h) * quads + q;
  const float* gam = a.gammas + std::int64_t{first} * a.heads + h;
  float4 ahead0 = s[0];
  float4 ahead1 = nc > 1 ? s[step] : make_float4(0.0F, 0.0F, 0.0F, 0.0F);
  for (int cc = 0; cc < nc; ++cc) {
    const float4 local = ahead0;
    const float gc = gam[std::int64_t{cc} * a.heads];
    ahead0 = ahead1;
    if (cc + 2 < nc)
      ahead1 = s[(cc + 2) * step];
    s[cc * step] = hv;
    hv.x = gc * hv.x + local.x;
    hv.y = gc * hv.y + local.y;
    hv.z = gc * hv.z + local.z;
    hv.w = gc * hv.w + local.w;
  }
  *pool = hv;
}

}  // namespace

cudaError_t launch_state_pass(const chunk_args& a, bool chained, cudaStream_t stream) {
  const std::int64_t quads = std::int64_t{a.head_dim} * a.state_size / 4;
  const dim3 grid(static_cast<unsigned>((quads + threads - 1) / threads),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.rows));
  if (chained)
    launch_chained(state_pass_kernel, grid, dim3(threads), 0, stream, a);
  else
    state_pass_kernel<<<grid, threads, 0, stream>>>(a);
  return launch_status();
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
