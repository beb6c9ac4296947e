// The chunked SSD scan's states (kernels/cuda/ssd_chunked.cu has the math):
// every chunk's own end state in parallel, then the only sequential part,
// a walk per (row, head) that passes the state from chunk to chunk,
// elementwise.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/mma_tf32.cuh"
#include "kernels/cuda/internal/ssd_chunk.cuh"

namespace mstar::kernels::cuda::detail::ssd_chunked {
namespace {

// Shared memory of a chunk_state block, in floats: G_t and w_t [chunk] each,
// B of the chunk [chunk][N + 4], x_t w_t [chunk][Cols + 4].
template <int N, int Cols>
constexpr std::size_t state_smem_bytes() {
  return sizeof(float) *
         (2 * static_cast<std::size_t>(chunk) + static_cast<std::size_t>(chunk) * (N + 4) +
          static_cast<std::size_t>(chunk) * (Cols + 4));
}

// Block (table entry c, head h), blockIdx.x = c H + h (a group's heads
// side by side, so B comes from L2): the chunk's decay e^{G_C} into
// `gammas` and its own end state (zero start)
//   S = sum_t w_t x_t B_t^T,  w_t = e^{G_C - G_t} dt_t,
// into `states`, Cols head-dim rows at a time: S[Cols][N] = (x w)^T B, each
// warp a 16-row tile x state_tiles' column tiles (two 8-column mma tiles
// each), the (x w)^T fragment loaded once per 8 tokens for all of them, S
// written from the fragments. Tokens past the row's end are zeros, so the
// products stop at the last real one (rounded up to 8).
template <int N, int Cols>
__global__ void __launch_bounds__(threads) chunk_state_kernel(chunk_args a) {
  using W = state_tiles<N, Cols>;
  constexpr int nt = 2 * W::col_tiles;  // 8-column mma tiles
  constexpr int ks = nt <= 2 ? 2 : 1;   // accumulators over k steps: 2 when few tiles
  constexpr int ld_n = N + 4;
  constexpr int ld_x = Cols + 4;
  const int c = static_cast<int>(blockIdx.x) / a.heads;
  if (c >= *a.n_chunks)
    return;
  const int h = static_cast<int>(blockIdx.x) % a.heads;
  const chunk_span sp = span_of(a, c);
  const int n = sp.n;
  const int g = h / a.heads_per_group;
  const int P = a.head_dim;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  extern __shared__ __align__(128) float smem[];
  float* cum = smem;              // [chunk]
  float* wts = cum + chunk;       // [chunk]: dt_t, then w_t
  float* bs = wts + chunk;        // [chunk][ld_n]
  float* xw = bs + chunk * ld_n;  // [chunk][ld_x]

  chunk_log_decays(a, sp.t0, n, h, cum, wts);
  const float last = cum[chunk - 1];  // G of the last real token: padding adds 0
  if (tid < chunk)
    wts[tid] *= expf(last - cum[tid]);
  if (tid == 0)
    a.gammas[std::int64_t{c} * a.heads + h] = expf(last);
  const std::int64_t bc0 = std::int64_t{g} * N;
  for (int i = tid; i < chunk * N; i += threads) {
    const int t = i / N;
    const int col = i % N;
    bs[t * ld_n + col] = t < n ? a.B[(sp.t0 + t) * a.bc_stride + bc0 + col] : 0.0F;
  }
  __syncthreads();  // wts before its reads below

  float* out = a.states + (std::int64_t{c} * a.heads + h) * P * N;
  const std::int64_t x0 = std::int64_t{h} * P;
  const int rt = W::row(warp);
  const int c0 = W::col0(warp);
  const int k_end = (n + 7) / 8 * 8;
  // A(m, k) = xw[k][16 rt + m]: (x w)^T; B(k, n) = B[k][16 c0 + n].
  const tf32::lane_at ln(tid % 32);
  const float* xa = tf32::a_base<1, ld_x>(xw + rt * 16, ln);
  const float* bb = tf32::b_base<ld_n, 1>(bs + c0 * 16, ln);
  for (int p0 = 0; p0 < P; p0 += Cols) {
    for (int i = tid; i < chunk * Cols; i += threads) {
      const int t = i / Cols;
      const int col = i % Cols;
      xw[t * ld_x + col] = t < n ? a.x[(sp.t0 + t) * a.x_stride + x0 + p0 + col] * wts[t] : 0.0F;
    }
    __syncthreads();
    float acc[nt][ks][4] = {};
#pragma unroll 2
    for (int k0 = 0; k0 < k_end; k0 += 8 * ks) {
#pragma unroll
      for (int e = 0; e < ks; ++e) {
        if (e == 0 || k0 + 8 * e < k_end) {
          std::uint32_t fa[4];
          tf32::load_a<1, ld_x>(fa, xa + (k0 + 8 * e) * ld_x);
#pragma unroll
          for (int j = 0; j < nt; ++j) {
            std::uint32_t fb[2];
            tf32::load_b<ld_n, 1>(fb, bb + (k0 + 8 * e) * ld_n + j * 8);
            tf32::mma(acc[j][e], fa, fb);
          }
        }
      }
    }
    float* o = tf32::c_base<N>(out + std::int64_t{p0 + rt * 16} * N + c0 * 16, ln);
#pragma unroll
    for (int j = 0; j < nt; ++j) {
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[i] = acc[j][0][i];
#pragma unroll
        for (int e = 1; e < ks; ++e)
          v[i] += acc[j][e][i];
      }
      tf32::store_c<N>(o + j * 8, v);
    }
    __syncthreads();  // xw is restaged
  }
}

// Thread: 4 consecutive entries of head h's [P][N] state in row r
// (blockIdx y and z), walked through the row's chunks (consecutive table
// entries from row_first[r]):
//   start_c = h,  h = e^{G_C(c)} h + S_c,
// start_c written over S_c; the walk starts from the slot (zeros when
// has_state is 0) and leaves the last h there. Loads run two chunks ahead.
__global__ void __launch_bounds__(threads) state_pass_kernel(chunk_args a) {
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

template <int N, int Cols>
cudaError_t launch_chunk_state(const chunk_args& a, cudaStream_t stream) {
  constexpr std::size_t bytes = state_smem_bytes<N, Cols>();
  static const cudaError_t attr =
      cudaFuncSetAttribute(chunk_state_kernel<N, Cols>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (attr != cudaSuccess)
    return attr;
  const auto blocks = static_cast<unsigned>(std::int64_t{a.capacity} * a.heads);
  chunk_state_kernel<N, Cols><<<blocks, threads, bytes, stream>>>(a);
  return launch_status();
}

cudaError_t launch_own_states(const chunk_args& a, cudaStream_t stream) {
  const bool wide = cols_for(a.head_dim) == 64;
  if (a.state_size == 64)
    return wide ? launch_chunk_state<64, 64>(a, stream) : launch_chunk_state<64, 32>(a, stream);
  return wide ? launch_chunk_state<128, 64>(a, stream) : launch_chunk_state<128, 32>(a, stream);
}

}  // namespace

cudaError_t launch_states(const chunk_args& a, cudaStream_t stream) {
  if (const cudaError_t err = launch_own_states(a, stream); err != cudaSuccess)
    return err;
  return launch_state_pass(a, stream);
}

cudaError_t launch_state_pass(const chunk_args& a, cudaStream_t stream) {
  const std::int64_t quads = std::int64_t{a.head_dim} * a.state_size / 4;
  const dim3 grid(static_cast<unsigned>((quads + threads - 1) / threads),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.rows));
  state_pass_kernel<<<grid, threads, 0, stream>>>(a);
  return launch_status();
}

}  // namespace mstar::kernels::cuda::detail::ssd_chunked
