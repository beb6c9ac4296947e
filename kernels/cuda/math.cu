#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/gated_norm.cuh"
#include "kernels/cuda/internal/host_checks.hpp"
#include "kernels/cuda/math.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::ceil_div;
using detail::matrix;
using detail::silu_of;
using detail::to_matrix;

constexpr int row_threads = 256;

// Rows along grid y (looping past 65535), columns along grid x.
template <class Fn>
__global__ void unary_kernel(matrix<const float> x, matrix<float> out, Fn fn) {
  for (std::int64_t t = blockIdx.y; t < x.rows; t += gridDim.y) {
    for (std::int64_t d = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; d < x.cols;
         d += std::int64_t{gridDim.x} * blockDim.x) {
      out(t, d) = fn(x(t, d));
    }
  }
}

template <class Fn>
__global__ void binary_kernel(matrix<const float> a, matrix<const float> b, matrix<float> out,
                              Fn fn) {
  for (std::int64_t t = blockIdx.y; t < a.rows; t += gridDim.y) {
    for (std::int64_t d = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; d < a.cols;
         d += std::int64_t{gridDim.x} * blockDim.x) {
      out(t, d) = fn(a(t, d), b(t, d));
    }
  }
}

dim3 grid_2d(std::int64_t rows, std::int64_t cols) {
  const auto x = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(cols, row_threads), 1024));
  const auto y = static_cast<unsigned>(std::min<std::int64_t>(rows, 65535));
  return {x, y};
}

using detail::relu2_fn;  // internal/activation.cuh: activate's and the GEMV's too
using detail::silu_fn;
struct add_fn {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct mul_fn {
  __device__ float operator()(float a, float b) const { return a * b; }
};

template <class Fn>
cudaError_t launch_unary(const unary_params& p, Fn fn, cudaStream_t stream) {
  if (!detail::all_ok(
          {check_view(p.x, "x", {any_extent, any_extent}), check_view(p.out, "out", p.x.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  unary_kernel<<<grid_2d(p.x.shape[0], p.x.shape[1]), row_threads, 0, stream>>>(
      to_matrix(p.x), to_matrix(p.out), fn);
  return detail::launch_status();
}

template <class Fn>
cudaError_t launch_binary(const binary_params& p, Fn fn, cudaStream_t stream) {
  if (!detail::all_ok({check_view(p.a, "a", {any_extent, any_extent}),
                       check_view(p.b, "b", p.a.shape), check_view(p.out, "out", p.a.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.a.numel() == 0)
    return cudaSuccess;
  binary_kernel<<<grid_2d(p.a.shape[0], p.a.shape[1]), row_threads, 0, stream>>>(
      to_matrix(p.a), to_matrix(p.b), to_matrix(p.out), fn);
  return detail::launch_status();
}

__global__ void embedding_kernel(const std::int32_t* ids, std::int64_t ids_stride,
                                 matrix<const float> table, matrix<float> out) {
  detail::chain_start();
  for (std::int64_t t = blockIdx.x; t < out.rows; t += gridDim.x) {
    const std::int32_t id = ids[t * ids_stride];
    const bool valid = id >= 0 && id < table.rows;
    for (std::int64_t h = threadIdx.x; h < out.cols; h += blockDim.x)
      out(t, h) = valid ? table(id, h) : __int_as_float(0x7fc00000);
  }
}

__global__ void rms_norm_kernel(matrix<const float> x, const float* weight,
                                std::int64_t weight_stride, matrix<float> out, float eps) {
  detail::chain_start();
  __shared__ float scratch[32];
  for (std::int64_t t = blockIdx.x; t < x.rows; t += gridDim.x) {
    float sum_sq = 0.0F;
    for (std::int64_t h = threadIdx.x; h < x.cols; h += blockDim.x)
      sum_sq += x(t, h) * x(t, h);
    sum_sq = detail::block_sum(sum_sq, scratch);
    const float scale = rsqrtf(sum_sq / static_cast<float>(x.cols) + eps);
    for (std::int64_t h = threadIdx.x; h < x.cols; h += blockDim.x)
      out(t, h) = x(t, h) * scale * weight[h * weight_stride];
  }
}

// Block b is (row b / groups, group b % groups). Each thread reads and writes
// the same elements in both passes, so out may alias x or gate. Each output
// is written when present (null data: absent).
__global__ void gated_rms_norm_kernel(matrix<const float> x, matrix<const float> gate,
                                      const float* weight, std::int64_t weight_stride,
                                      matrix<float> out, matrix<std::uint16_t> out_bf16,
                                      std::int64_t group, float eps) {
  detail::chain_start();
  __shared__ float scratch[32];
  const std::int64_t groups = x.cols / group;
  for (std::int64_t b = blockIdx.x; b < x.rows * groups; b += gridDim.x) {
    const std::int64_t t = b / groups;
    const std::int64_t c0 = (b % groups) * group;
    float sum_sq = 0.0F;
    for (std::int64_t c = threadIdx.x; c < group; c += blockDim.x) {
      const float v = gate.data != nullptr ? x(t, c0 + c) * silu_of(gate(t, c0 + c)) : x(t, c0 + c);
      sum_sq += v * v;
    }
    sum_sq = detail::block_sum(sum_sq, scratch);
    const float scale = rsqrtf(sum_sq / static_cast<float>(group) + eps);
    for (std::int64_t c = threadIdx.x; c < group; c += blockDim.x) {
      const float v = gate.data != nullptr ? x(t, c0 + c) * silu_of(gate(t, c0 + c)) : x(t, c0 + c);
      const float o = v * scale * weight[(c0 + c) * weight_stride];
      if (out.data != nullptr)
        out(t, c0 + c) = o;
      if (out_bf16.data != nullptr)
        out_bf16(t, c0 + c) = detail::to_bf16(o);
    }
  }
}

// gated_rms_norm's fast form: a warp per (row, group) of V * 128 contiguous
// channels (internal/gated_norm.cuh), each lane holding V float4 of x (times
// silu(gate)) in registers, so x and the gate are read once, silu is taken
// once, and the sum needs no barrier; the block form reads both twice and
// meets two barriers per item (bench/results/h200-kernels17.md: 1.4 TB/s in
// the 0.6B prefill). Out may alias x or gate as in the block form. Only the
// order of the squares' sum differs. The gated GEMV (gemv.cu) norms its
// input row with the same warp body.
template <int V>
__global__ void __launch_bounds__(row_threads)
    gated_rms_norm_warp_kernel(matrix<const float> x, matrix<const float> gate, const float* weight,
                               matrix<float> out, matrix<std::uint16_t> out_bf16,
                               std::int64_t groups, float eps) {
  detail::chain_start();
  constexpr int group = V * 128;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps_per_block = blockDim.x / 32;
  const std::int64_t items = x.rows * groups;
  for (std::int64_t item = std::int64_t{blockIdx.x} * warps_per_block + threadIdx.x / 32;
       item < items; item += std::int64_t{gridDim.x} * warps_per_block) {
    const std::int64_t t = item / groups;
    const std::int64_t c0 = (item % groups) * group;
    detail::gated_norm_group<V>(
        x.data + t * x.row_stride + c0,
        gate.data != nullptr ? gate.data + t * gate.row_stride + c0 : nullptr, weight + c0, eps,
        out.data != nullptr ? out.data + t * out.row_stride + c0 : nullptr,
        out_bf16.data != nullptr ? out_bf16.data + t * out_bf16.row_stride + c0 : nullptr, lane);
  }
}

// The warp form with every load of a warp's item in flight before any use
// (internal/gated_norm.cuh's gated_norm_group_loaded: the same products and
// sum, so the same bits) and its first item's weight quads loaded before the
// chained wait: the weight is no kernel's output (math.hpp, chained_launches),
// so they overlap the previous kernel's tail. The launcher sizes blocks so
// the items spread over every SM (warps_for_sms).
template <int V>
__global__ void __launch_bounds__(row_threads)
    gated_rms_norm_warp2_kernel(matrix<const float> x, matrix<const float> gate,
                                const float* weight, matrix<float> out,
                                matrix<std::uint16_t> out_bf16, std::int64_t groups, float eps) {
  constexpr int group = V * 128;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t warps_per_block = blockDim.x / 32;
  const std::int64_t items = x.rows * groups;
  const std::int64_t step = std::int64_t{gridDim.x} * warps_per_block;
  std::int64_t item = std::int64_t{blockIdx.x} * warps_per_block + threadIdx.x / 32;
  float4 w[V];
  if (item < items)
    detail::load_group_quads<V, true>(weight + (item % groups) * group, lane, w);
  detail::chain_start();
  for (; item < items; item += step) {
    const std::int64_t t = item / groups;
    const std::int64_t c0 = (item % groups) * group;
    detail::gated_norm_group_loaded<V>(
        x.data + t * x.row_stride + c0,
        gate.data != nullptr ? gate.data + t * gate.row_stride + c0 : nullptr, w, eps,
        out.data != nullptr ? out.data + t * out.row_stride + c0 : nullptr,
        out_bf16.data != nullptr ? out_bf16.data + t * out_bf16.row_stride + c0 : nullptr, lane);
    if (item + step < items)
      detail::load_group_quads<V, true>(weight + ((item + step) % groups) * group, lane, w);
  }
}

__global__ void softmax_kernel(matrix<const float> x, matrix<float> out) {
  __shared__ float scratch[32];
  for (std::int64_t t = blockIdx.x; t < x.rows; t += gridDim.x) {
    float top = -INFINITY;
    for (std::int64_t i = threadIdx.x; i < x.cols; i += blockDim.x)
      top = fmaxf(top, x(t, i));
    top = detail::block_max(top, scratch);
    float sum = 0.0F;
    if (top != -INFINITY) {
      for (std::int64_t i = threadIdx.x; i < x.cols; i += blockDim.x)
        sum += expf(x(t, i) - top);
    }
    sum = detail::block_sum(sum, scratch);
    const float inv = top == -INFINITY ? 0.0F : 1.0F / sum;
    for (std::int64_t i = threadIdx.x; i < x.cols; i += blockDim.x)
      out(t, i) = top == -INFINITY ? 0.0F : expf(x(t, i) - top) * inv;
  }
}

struct rope_args {
  float* x;
  std::int64_t tokens, heads, ts, hs, cs;  // shape [T, heads, *] and strides
  const std::int32_t* positions;
  std::int64_t pos_stride;
  const float* inv_freq;
  std::int64_t freq_stride;
  double theta;
  std::int64_t rotary;
  bool interleaved;
};

// Thread (t, i) rotates pair i of every head of token t.
__global__ void rope_kernel(rope_args a) {
  detail::chain_start();
  const std::int64_t half = a.rotary / 2;
  for (std::int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
    for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < half;
         i += std::int64_t{gridDim.x} * blockDim.x) {
      const double freq =
          a.inv_freq != nullptr
              ? double{a.inv_freq[i * a.freq_stride]}
              : pow(a.theta, -2.0 * static_cast<double>(i) / static_cast<double>(a.rotary));
      const double angle = static_cast<double>(a.positions[t * a.pos_stride]) * freq;
      double s = 0.0;
      double c = 0.0;
      sincos(angle, &s, &c);
      const auto cosf_ = static_cast<float>(c);
      const auto sinf_ = static_cast<float>(s);
      const std::int64_t ca = a.interleaved ? 2 * i : i;
      const std::int64_t cb = a.interleaved ? 2 * i + 1 : i + half;
      for (std::int64_t h = 0; h < a.heads; ++h) {
        float* row = a.x + t * a.ts + h * a.hs;
        const float va = row[ca * a.cs];
        const float vb = row[cb * a.cs];
        row[ca * a.cs] = va * cosf_ - vb * sinf_;
        row[cb * a.cs] = vb * cosf_ + va * sinf_;
      }
    }
  }
}

__global__ void to_bf16_kernel(const float* in, std::uint16_t* out, std::int64_t n) {
  detail::chain_start();
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = detail::to_bf16(in[i]);
  }
}

__global__ void from_bf16_kernel(const std::uint16_t* in, float* out, std::int64_t n) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = detail::from_bf16(in[i]);
  }
}

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 20));
}

unsigned flat_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::min<std::int64_t>(ceil_div(n, row_threads), 1 << 16));
}

}  // namespace

cudaError_t embedding(const embedding_params& p, cudaStream_t stream) {
  if (!detail::all_ok({check_view(p.ids, "ids", {any_extent}),
                       check_view(p.table, "table", {any_extent, any_extent}),
                       check_view(p.out, "out", {p.ids.shape[0], p.table.shape[1]})})) {
    return cudaErrorInvalidValue;
  }
  if (p.out.numel() == 0)
    return cudaSuccess;
  detail::launch_chained(embedding_kernel, row_blocks(p.ids.shape[0]), row_threads, 0, stream,
                         p.ids.data, p.ids.strides[0], to_matrix(p.table), to_matrix(p.out));
  return detail::launch_status();
}

cudaError_t rms_norm(const rms_norm_params& p, cudaStream_t stream) {
  if (!detail::all_ok({check_view(p.x, "x", {any_extent, any_extent}),
                       check_view(p.weight, "weight", {p.x.shape[1]}),
                       check_view(p.out, "out", p.x.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  detail::launch_chained(rms_norm_kernel, row_blocks(p.x.shape[0]), row_threads, 0, stream,
                         to_matrix(p.x), p.weight.data, p.weight.strides[0], to_matrix(p.out),
                         p.eps);
  return detail::launch_status();
}

namespace {

// The form `gated_rms_norm` takes (gated_rms_norm_variant's table):
// MSTAR_GATED_NORM_WARP "0" the block kernel, "v1" the warp kernel, unset
// or "v2" the loaded-warp kernel, a table index ("0" .. "6") that entry;
// read once. v2 since 2026-12-04 (H200, bench/h200_small.sh: 1.3-2.6x form
// 1's time at the 0.56B and 8B widths, 1 / 64 / 256 rows, graphs).
int gated_norm_default() {
  static const int v = [] {
    const char* e = std::getenv("MSTAR_GATED_NORM_WARP");
    constexpr int today = 2;
    if (e == nullptr)
      return today;
    const std::string_view s{e};
    if (s == "v1")
      return 1;
    if (s == "v2")
      return 2;
    if (s.size() == 1 && s[0] >= '0' && s[0] < '0' + gated_rms_norm_variants)
      return s[0] - '0';
    return today;
  }();
  return v;
}

// Warps a block for `items` warp items: the most (up to a block of
// row_threads) that still leaves a block for every SM, so a 64-row decode
// step's 512 items (0.56B: 8 groups a row) run 256 blocks of 2 warps on 132
// SMs, not 64 of 8.
int warps_for_sms(std::int64_t items) {
  const int sms = detail::sm_count();
  int warps = row_threads / 32;
  while (warps > 1 && ceil_div(items, warps) < sms)
    warps /= 2;
  return warps;
}

template <int V>
void launch_gated_warp(const gated_rms_norm_params& p, int variant, std::int64_t groups,
                       cudaStream_t stream) {
  const std::int64_t items = p.x.shape[0] * groups;
  const int warps = variant == 1   ? row_threads / 32
                    : variant == 2 ? warps_for_sms(items)
                                   : 1 << (variant - 3);
  // Form 1 as it was; the others a grid of at most 2,048 threads an SM (a
  // wave at full occupancy), looping past it: a prefill's items reuse the
  // warps, each loading its next item's weight while it stores the current.
  const std::int64_t cap = variant == 1 ? std::int64_t{1} << 20
                                        : std::int64_t{detail::sm_count()} * (2048 / (32 * warps));
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(items, warps), cap));
  detail::launch_chained(
      variant == 1 ? gated_rms_norm_warp_kernel<V> : gated_rms_norm_warp2_kernel<V>, blocks,
      warps * 32, 0, stream, to_matrix(p.x), to_matrix(p.gate), p.weight.data, to_matrix(p.out),
      to_matrix(p.out_bf16), groups, p.eps);
}

}  // namespace

bool gated_rms_norm_warp_form() {
  return gated_norm_default() != 0;
}

cudaError_t gated_rms_norm(const gated_rms_norm_params& p, cudaStream_t stream) {
  return gated_rms_norm_variant(p, -1, stream);
}

cudaError_t gated_rms_norm_variant(const gated_rms_norm_params& p, int variant,
                                   cudaStream_t stream) {
  if (variant < -1 || variant >= gated_rms_norm_variants)
    return cudaErrorInvalidValue;
  if (variant < 0)
    variant = gated_norm_default();
  if (!detail::all_ok(
          {check_view(p.x, "x", {any_extent, any_extent}),
           check_view(p.gate, "gate", p.gate ? p.x.shape : p.gate.shape),
           check_view(p.weight, "weight", {p.x.shape[1]}),
           check_view(p.out, "out", p.out ? p.x.shape : p.out.shape),
           check_view(p.out_bf16, "out_bf16", p.out_bf16 ? p.x.shape : p.out_bf16.shape)}) ||
      (p.x.numel() > 0 && !p.out && !p.out_bf16)) {
    return cudaErrorInvalidValue;
  }
  const std::int64_t channels = p.x.shape[1];
  const std::int64_t group = p.group_size == 0 ? channels : p.group_size;
  if (group <= 0 || channels % group != 0)
    return cudaErrorInvalidValue;
  if (p.x.numel() == 0)
    return cudaSuccess;
  const std::int64_t groups = channels / group;
  const std::int64_t items = p.x.shape[0] * groups;
  // The warp forms want contiguous rows of whole float4s (uint2s for bf16)
  // at 16- (8-) byte aligned addresses and a group of 128..1024 channels.
  const auto rows_of = [](const auto& v, std::int64_t per) {
    return !v || (v.strides[1] == 1 && v.strides[0] % per == 0 &&
                  reinterpret_cast<std::uintptr_t>(v.data) % (per * sizeof(*v.data)) == 0);
  };
  const int v4 =
      variant != 0 && group % 128 == 0 && group <= 1024 ? static_cast<int>(group / 128) : 0;
  if ((v4 == 1 || v4 == 2 || v4 == 4 || v4 == 8) && rows_of(p.x, 4) && rows_of(p.gate, 4) &&
      rows_of(p.out, 4) && rows_of(p.out_bf16, 4) && p.weight.strides[0] == 1 &&
      reinterpret_cast<std::uintptr_t>(p.weight.data) % 16 == 0) {
    switch (v4) {
      case 1:
        launch_gated_warp<1>(p, variant, groups, stream);
        break;
      case 2:
        launch_gated_warp<2>(p, variant, groups, stream);
        break;
      case 4:
        launch_gated_warp<4>(p, variant, groups, stream);
        break;
      default:
        launch_gated_warp<8>(p, variant, groups, stream);
        break;
    }
    return detail::launch_status();
  }
  detail::launch_chained(gated_rms_norm_kernel, row_blocks(items), row_threads, 0, stream,
                         to_matrix(p.x), to_matrix(p.gate), p.weight.data, p.weight.strides[0],
                         to_matrix(p.out), to_matrix(p.out_bf16), group, p.eps);
  return detail::launch_status();
}

cudaError_t silu(const unary_params& p, cudaStream_t stream) {
  return launch_unary(p, silu_fn{}, stream);
}

cudaError_t relu2(const unary_params& p, cudaStream_t stream) {
  return launch_unary(p, relu2_fn{}, stream);
}

cudaError_t add(const binary_params& p, cudaStream_t stream) {
  return launch_binary(p, add_fn{}, stream);
}

cudaError_t mul(const binary_params& p, cudaStream_t stream) {
  return launch_binary(p, mul_fn{}, stream);
}

cudaError_t softmax(const softmax_params& p, cudaStream_t stream) {
  if (!detail::all_ok(
          {check_view(p.x, "x", {any_extent, any_extent}), check_view(p.out, "out", p.x.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (p.x.numel() == 0)
    return cudaSuccess;
  softmax_kernel<<<row_blocks(p.x.shape[0]), row_threads, 0, stream>>>(to_matrix(p.x),
                                                                       to_matrix(p.out));
  return detail::launch_status();
}

cudaError_t rope(const rope_params& p, cudaStream_t stream) {
  const std::int64_t head_dim = p.x.shape[2];
  const std::int64_t rotary = p.rotary_dim == 0 ? head_dim : p.rotary_dim;
  if (!detail::all_ok({check_view(p.x, "x", {any_extent, any_extent, any_extent}),
                       check_view(p.positions, "positions", {p.x.shape[0]}),
                       check_view(p.inv_freq, "inv_freq",
                                  p.inv_freq ? std::array{rotary / 2} : p.inv_freq.shape)})) {
    return cudaErrorInvalidValue;
  }
  if (rotary <= 0 || rotary % 2 != 0 || rotary > head_dim)
    return cudaErrorInvalidValue;
  if (p.x.numel() == 0)
    return cudaSuccess;
  const rope_args a{p.x.data,
                    p.x.shape[0],
                    p.x.shape[1],
                    p.x.strides[0],
                    p.x.strides[1],
                    p.x.strides[2],
                    p.positions.data,
                    p.positions.strides[0],
                    p.inv_freq.data,
                    p.inv_freq ? p.inv_freq.strides[0] : 0,
                    double{p.theta},
                    rotary,
                    p.style == rope_style::interleaved};
  constexpr int threads = 64;
  const dim3 grid{static_cast<unsigned>(ceil_div(rotary / 2, threads)),
                  static_cast<unsigned>(std::min<std::int64_t>(p.x.shape[0], 65535))};
  detail::launch_chained(rope_kernel, grid, threads, 0, stream, a);
  return detail::launch_status();
}

cudaError_t to_bf16(const float* in, std::uint16_t* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0)
    return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  detail::launch_chained(to_bf16_kernel, flat_blocks(n), row_threads, 0, stream, in, out, n);
  return detail::launch_status();
}

cudaError_t from_bf16(const std::uint16_t* in, float* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0)
    return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  from_bf16_kernel<<<flat_blocks(n), row_threads, 0, stream>>>(in, out, n);
  return detail::launch_status();
}

}  // namespace mstar::kernels::cuda
