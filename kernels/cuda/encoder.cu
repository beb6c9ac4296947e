// The encoder launchers (kernels/cuda/encoder.hpp): LayerNorm, GELU, the
// weighted gather of a position table, the 2D rope and segment attention.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/encoder.hpp"
#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/host_checks.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::ceil_div;
using detail::matrix;
using detail::to_matrix;

constexpr int row_threads = 256;
constexpr unsigned max_grid_rows = 65535;

dim3 grid_2d(std::int64_t rows, std::int64_t cols) {
  const auto x = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(cols, row_threads), 1024));
  const auto y = static_cast<unsigned>(std::min<std::int64_t>(rows, max_grid_rows));
  return {x, y};
}

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(std::min<std::int64_t>(rows, max_grid_rows));
}

// One block per row (looping past the grid). Each thread reads the same
// columns in the last pass as it writes, and both reductions end in a
// barrier, so `out` may alias `x`.
__global__ void layer_norm_kernel(matrix<const float> x, const float* weight, std::int64_t ws,
                                  const float* bias, std::int64_t bs, matrix<float> out,
                                  float eps) {
  __shared__ float scratch[32];
  const auto n = static_cast<float>(x.cols);
  for (std::int64_t t = blockIdx.x; t < x.rows; t += gridDim.x) {
    float sum = 0.0F;
    for (std::int64_t h = threadIdx.x; h < x.cols; h += blockDim.x)
      sum += x(t, h);
    const float mean = detail::block_sum(sum, scratch) / n;
    float sum_sq = 0.0F;
    for (std::int64_t h = threadIdx.x; h < x.cols; h += blockDim.x) {
      const float d = x(t, h) - mean;
      sum_sq += d * d;
    }
    const float inv = 1.0F / sqrtf(detail::block_sum(sum_sq, scratch) / n + eps);
    for (std::int64_t h = threadIdx.x; h < x.cols; h += blockDim.x) {
      const float normed = (x(t, h) - mean) * inv;
      out(t, h) = normed * weight[h * ws] + (bias != nullptr ? bias[h * bs] : 0.0F);
    }
  }
}

__global__ void gelu_kernel(matrix<const float> x, matrix<float> out, bool erf_form) {
  for (std::int64_t t = blockIdx.y; t < x.rows; t += gridDim.y) {
    for (std::int64_t d = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; d < x.cols;
         d += std::int64_t{gridDim.x} * blockDim.x) {
      const double v = x(t, d);
      const double g =
          erf_form ? 0.5 * v * (1.0 + erf(v * 0.70710678118654752440))
                   : 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
      out(t, d) = static_cast<float>(g);
    }
  }
}

// One block per token; the K taps' weighted sum in order, then added.
__global__ void weighted_gather_add_kernel(matrix<const float> table,
                                           matrix<const std::int32_t> index,
                                           matrix<const float> weight, matrix<float> out) {
  for (std::int64_t t = blockIdx.x; t < out.rows; t += gridDim.x) {
    for (std::int64_t h = threadIdx.x; h < out.cols; h += blockDim.x) {
      float sum = 0.0F;
      for (std::int64_t k = 0; k < index.cols; ++k) {
        const std::int32_t row = index(t, k);
        sum += row >= 0 && row < table.rows ? table(row, h) * weight(t, k)
                                            : __int_as_float(0x7fc00000);
      }
      out(t, h) += sum;
    }
  }
}

// A [T, heads, D] f32 operand with unit stride along D.
template <class T>
struct heads_view {
  T* data = nullptr;
  std::int64_t row = 0;   // element step between tokens
  std::int64_t head = 0;  // element step between heads

  __device__ __forceinline__ T* at(std::int64_t t, std::int64_t h) const {
    return data + t * row + h * head;
  }
};

template <class T>
heads_view<T> to_heads(const view<T, 3>& v) {
  return {v.data, v.strides[0], v.strides[1]};
}

// Thread (t, i) of the T x head_dim / 2 pairs rotates pair (i, i + D/2) of
// every head of token t.
__global__ void axial_rope_kernel(heads_view<float> x, std::int64_t tokens, std::int64_t heads,
                                  std::int64_t dim, std::int64_t dim_stride,
                                  matrix<const std::int32_t> positions, const float* inv_freq,
                                  std::int64_t freq_stride) {
  const std::int64_t half = dim / 2;
  const std::int64_t quarter = dim / 4;
  const std::int64_t total = tokens * half;
  for (std::int64_t g = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < total;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = g / half;
    const std::int64_t i = g % half;
    const std::int64_t axis = i < quarter ? 0 : 1;
    const float angle =
        static_cast<float>(positions(t, axis)) * inv_freq[(i - axis * quarter) * freq_stride];
    const float c = cosf(angle);
    const float s = sinf(angle);
    for (std::int64_t h = 0; h < heads; ++h) {
      float* row = x.at(t, h);
      const float a = row[i * dim_stride];
      const float b = row[(i + half) * dim_stride];
      row[i * dim_stride] = a * c - b * s;
      row[(i + half) * dim_stride] = b * c + a * s;
    }
  }
}

// Segment attention: block = attn_warps queries (consecutive tokens) of one
// head, a warp per query. The block walks the keys of the union of its
// queries' segments (contiguous: segments are) in tiles of 32, staged in
// shared memory; lane j scores key j of the tile against the warp's query,
// and lane l accumulates output dims l, l + 32, ... (DimsPerLane of them).
constexpr int attn_warps = 8;
constexpr int attn_tile = 32;

struct attention_args {
  heads_view<const float> q, k, v;
  heads_view<float> out;
  std::int64_t tokens = 0;
  int dim = 0;
  const std::int32_t* cu = nullptr;  // [segments + 1]
  int segments = 0;
  float scale = 0.0F;
};

// Floats of shared memory the kernel uses for head_dim `dim`: K tile (rows
// padded to dim + 1, so lanes reading one row each hit distinct banks), V
// tile, one query row per warp.
std::size_t attention_shared_floats(int dim) {
  return static_cast<std::size_t>(attn_tile) * (dim + 1) +
         static_cast<std::size_t>(attn_tile) * dim + static_cast<std::size_t>(attn_warps) * dim;
}

template <int DimsPerLane>
__global__ void __launch_bounds__(attn_warps * 32) segment_attention_kernel(attention_args a) {
  extern __shared__ float smem[];
  const int dim = a.dim;
  float* ks = smem;                        // [attn_tile][dim + 1]
  float* vs = ks + attn_tile * (dim + 1);  // [attn_tile][dim]
  float* qs = vs + attn_tile * dim;        // [attn_warps][dim]
  const int lane = static_cast<int>(threadIdx.x % 32U);
  const int warp = static_cast<int>(threadIdx.x / 32U);
  const std::int64_t head = blockIdx.y;
  const std::int64_t first = std::int64_t{blockIdx.x} * attn_warps;  // < tokens (grid)
  const std::int64_t last = std::min<std::int64_t>(first + attn_warps, a.tokens) - 1;
  const std::int64_t t = first + warp;
  const bool active = t <= last;  // warp-uniform
  // Token ids fit int32 (the launcher checks T).
  const int first_seg = detail::row_of_token(a.cu, a.segments, static_cast<int>(first));
  const int last_seg = detail::row_of_token(a.cu, a.segments, static_cast<int>(last));
  const std::int64_t lo = a.cu[first_seg];
  const std::int64_t hi = a.cu[last_seg + 1];
  std::int64_t own_lo = 0, own_hi = 0;
  if (active) {
    const int seg = detail::row_of_token(a.cu, a.segments, static_cast<int>(t));
    own_lo = a.cu[seg];
    own_hi = a.cu[seg + 1];
    const float* qrow = a.q.at(t, head);
    for (int d = lane; d < dim; d += 32)
      qs[warp * dim + d] = qrow[d] * a.scale;
  }
  float acc[DimsPerLane];
#pragma unroll
  for (int i = 0; i < DimsPerLane; ++i)
    acc[i] = 0.0F;
  float m = -INFINITY;
  float l = 0.0F;
  for (std::int64_t base = lo; base < hi; base += attn_tile) {
    __syncthreads();  // the previous tile is consumed (and, first time, qs written)
    for (int e = static_cast<int>(threadIdx.x); e < attn_tile * dim;
         e += static_cast<int>(blockDim.x)) {
      const int j = e / dim;
      const int d = e % dim;
      const std::int64_t key = base + j;
      const bool in = key < hi;
      ks[j * (dim + 1) + d] = in ? a.k.at(key, head)[d] : 0.0F;
      vs[j * dim + d] = in ? a.v.at(key, head)[d] : 0.0F;
    }
    __syncthreads();
    if (!active)
      continue;
    const std::int64_t key = base + lane;
    const bool mine = key >= own_lo && key < own_hi;
    float s = -INFINITY;
    if (mine) {
      const float* kr = ks + lane * (dim + 1);
      const float* qr = qs + warp * dim;
      float dot = 0.0F;
      for (int d = 0; d < dim; ++d)
        dot += qr[d] * kr[d];
      s = dot;
    }
    const float tile_max = detail::group_max(s);
    if (tile_max == -INFINITY)
      continue;  // no key of this tile in the warp's segment (warp-uniform)
    const float m_new = fmaxf(m, tile_max);
    const float alpha = expf(m - m_new);  // 0 while m is -inf
    const float p = mine ? expf(s - m_new) : 0.0F;
    l = l * alpha + detail::group_sum(p);
#pragma unroll
    for (int i = 0; i < DimsPerLane; ++i)
      acc[i] *= alpha;
    for (int j = 0; j < attn_tile; ++j) {
      const float pj = __shfl_sync(0xffffffffU, p, j);
      const float* vr = vs + j * dim;
#pragma unroll
      for (int i = 0; i < DimsPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < dim)
          acc[i] += pj * vr[d];
      }
    }
    m = m_new;
  }
  if (!active)
    return;
  float* orow = a.out.at(t, head);
  const float inv = 1.0F / l;  // l > 0: a token's segment holds the token itself
#pragma unroll
  for (int i = 0; i < DimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < dim)
      orow[d] = acc[i] * inv;
  }
}

template <int DimsPerLane>
cudaError_t launch_attention(const attention_args& a, std::int64_t heads, cudaStream_t stream) {
  const std::size_t bytes = attention_shared_floats(a.dim) * sizeof(float);
  constexpr std::size_t default_limit = 48 * 1024;
  if (bytes > default_limit) {
    if (const cudaError_t err = cudaFuncSetAttribute(segment_attention_kernel<DimsPerLane>,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(bytes));
        err != cudaSuccess)
      return err;
  }
  const dim3 grid{static_cast<unsigned>(ceil_div(a.tokens, attn_warps)),
                  static_cast<unsigned>(heads)};
  segment_attention_kernel<DimsPerLane><<<grid, attn_warps * 32, bytes, stream>>>(a);
  return detail::launch_status();
}

// Unit stride along head_dim and rows that do not overlap, as the CPU asks.
template <class T>
bool head_rows_ok(const view<T, 3>& v) {
  const std::int64_t dim = v.shape[2];
  return (dim <= 1 || v.strides[2] == 1) && (v.shape[0] <= 1 || v.strides[0] >= dim);
}

}  // namespace

cudaError_t layer_norm(const layer_norm_params& p, cudaStream_t stream) {
  if (!detail::all_ok({check_view(p.x, "x", {any_extent, any_extent}),
                       check_view(p.weight, "weight", {p.x.shape[1]}),
                       check_view(p.bias, "bias", p.bias ? std::array{p.x.shape[1]} : p.bias.shape),
                       check_view(p.out, "out", p.x.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  layer_norm_kernel<<<row_blocks(p.x.shape[0]), row_threads, 0, stream>>>(
      to_matrix(p.x), p.weight.data, p.weight.strides[0], p.bias.data,
      p.bias ? p.bias.strides[0] : 0, to_matrix(p.out), p.eps);
  return detail::launch_status();
}

cudaError_t gelu(const gelu_params& p, cudaStream_t stream) {
  if (!detail::all_ok(
          {check_view(p.x, "x", {any_extent, any_extent}), check_view(p.out, "out", p.x.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  bool erf_form = false;
  switch (p.form) {
    case gelu_form::tanh:
      erf_form = false;
      break;
    case gelu_form::erf:
      erf_form = true;
      break;
  }
  gelu_kernel<<<grid_2d(p.x.shape[0], p.x.shape[1]), row_threads, 0, stream>>>(
      to_matrix(p.x), to_matrix(p.out), erf_form);
  return detail::launch_status();
}

cudaError_t weighted_gather_add(const weighted_gather_add_params& p, cudaStream_t stream) {
  if (!detail::all_ok({check_view(p.table, "table", {any_extent, any_extent}),
                       check_view(p.index, "index", {any_extent, any_extent}),
                       check_view(p.weight, "weight", p.index.shape),
                       check_view(p.out, "out", {p.index.shape[0], p.table.shape[1]})})) {
    return cudaErrorInvalidValue;
  }
  if (p.out.numel() == 0)
    return cudaSuccess;
  weighted_gather_add_kernel<<<row_blocks(p.out.shape[0]), row_threads, 0, stream>>>(
      to_matrix(p.table), to_matrix(p.index), to_matrix(p.weight), to_matrix(p.out));
  return detail::launch_status();
}

cudaError_t axial_rope(const axial_rope_params& p, cudaStream_t stream) {
  const std::int64_t dim = p.x.shape[2];
  if (!detail::all_ok({check_view(p.x, "x", {any_extent, any_extent, any_extent}),
                       check_view(p.positions, "positions", {p.x.shape[0], 2}),
                       check_view(p.inv_freq, "inv_freq", {dim / 4})}) ||
      dim % 4 != 0) {
    return cudaErrorInvalidValue;
  }
  const std::int64_t pairs = p.x.shape[0] * (dim / 2);
  if (pairs == 0 || p.x.shape[1] == 0)
    return cudaSuccess;
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>(ceil_div(pairs, row_threads), std::int64_t{1} << 20));
  axial_rope_kernel<<<blocks, row_threads, 0, stream>>>(to_heads(p.x), p.x.shape[0], p.x.shape[1],
                                                        dim, p.x.strides[2], to_matrix(p.positions),
                                                        p.inv_freq.data, p.inv_freq.strides[0]);
  return detail::launch_status();
}

cudaError_t segment_attention(const segment_attention_params& p, cudaStream_t stream) {
  const auto& shape = p.q.shape;
  if (!detail::all_ok({check_view(p.q, "q", {any_extent, any_extent, any_extent}),
                       check_view(p.k, "k", shape), check_view(p.v, "v", shape),
                       check_view(p.out, "out", shape)}) ||
      !head_rows_ok(p.q) || !head_rows_ok(p.k) || !head_rows_ok(p.v) || !head_rows_ok(p.out) ||
      !p.scores.empty() || p.cu_seqlens.size() < 2 || shape[2] > 256 || shape[1] > 65535 ||
      shape[0] > 0x7fffffff - attn_warps) {
    return cudaErrorInvalidValue;
  }
  if (p.q.numel() == 0)
    return cudaSuccess;
  attention_args a;
  a.q = to_heads(p.q);
  a.k = to_heads(p.k);
  a.v = to_heads(p.v);
  a.out = to_heads(p.out);
  a.tokens = shape[0];
  a.dim = static_cast<int>(shape[2]);
  a.cu = p.cu_seqlens.data();
  a.segments = static_cast<int>(p.cu_seqlens.size() - 1);
  a.scale = p.scale != 0.0F ? p.scale : 1.0F / std::sqrt(static_cast<float>(shape[2]));
  if (shape[2] <= 32)
    return launch_attention<1>(a, shape[1], stream);
  if (shape[2] <= 64)
    return launch_attention<2>(a, shape[1], stream);
  if (shape[2] <= 128)
    return launch_attention<4>(a, shape[1], stream);
  return launch_attention<8>(a, shape[1], stream);
}

}  // namespace mstar::kernels::cuda
