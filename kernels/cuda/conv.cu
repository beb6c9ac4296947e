#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/internal/conv_fast.cuh"
#include "kernels/cuda/recurrent.hpp"

namespace mstar::kernels::cuda {
namespace {

using conv_args = detail::conv::args;
using detail::ceil_div;

constexpr int threads = 256;
constexpr int max_width = 64;
constexpr int max_fast_width = 4;

__device__ __forceinline__ float finish(const conv_args& a, float y) {
  return detail::conv::finish(a.silu, y);
}

// The generic kernels (widths 5..64): thread per (token, channel), striding
// the step's cu[rows] tokens.
__global__ void conv_out_kernel(conv_args a, const std::int32_t* cu, int rows) {
  const std::int64_t keep = a.width - 1;
  const std::int64_t total = std::int64_t{cu[rows]} * a.channels;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(i / a.channels);
    const int c = static_cast<int>(i % a.channels);
    const int r = detail::row_of_token(cu, rows, t);
    const std::int32_t slot = a.slots[r];
    if (slot < 0) {
      a.out[i] = 0.0F;
      continue;
    }
    const int begin = cu[r];
    const bool resume = a.has_state == nullptr || a.has_state[r] != 0;
    const float* w = a.weight + static_cast<std::int64_t>(c) * a.width;
    const float* st = a.state + (static_cast<std::int64_t>(slot) * a.channels + c) * keep;
    float y = a.bias != nullptr ? a.bias[c] : 0.0F;
    for (int j = 0; j < a.width; ++j) {
      const int tau = t - static_cast<int>(keep) + j;  // input position of tap j
      float in = 0.0F;
      if (tau >= begin)
        in = a.x[static_cast<std::int64_t>(tau) * a.x_stride + c];
      else if (resume)
        in = st[keep + (tau - begin)];
      y += w[j] * in;
    }
    a.out[i] = finish(a, y);
  }
}

// Thread per (row, channel): the slot keeps the row's last W-1 inputs; older
// columns shift in when the row is shorter. Ascending j reads column j + n
// before anything writes it.
__global__ void conv_state_kernel(conv_args a, const std::int32_t* cu, int rows) {
  const int keep = a.width - 1;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const std::int32_t slot = a.slots[r];
    const int begin = cu[r];
    const int n = cu[r + 1] - begin;
    if (c >= a.channels || slot < 0 || n == 0)
      continue;
    const bool resume = a.has_state == nullptr || a.has_state[r] != 0;
    float* st = a.state + (static_cast<std::int64_t>(slot) * a.channels + c) * keep;
    for (int j = 0; j < keep; ++j) {
      const int tau = begin + n - keep + j;
      float v = 0.0F;
      if (tau >= begin)
        v = a.x[static_cast<std::int64_t>(tau) * a.x_stride + c];
      else if (resume)
        v = st[j + n];
      st[j] = v;
    }
  }
}

// Thread per (row, channel): out = conv(window ++ x), then shift in place.
__global__ void conv_update_kernel(conv_args a, int batch) {
  const int keep = a.width - 1;
  const std::int64_t total = static_cast<std::int64_t>(batch) * a.channels;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const int b = static_cast<int>(i / a.channels);
    const int c = static_cast<int>(i % a.channels);
    const std::int32_t slot = a.slots[b];
    if (slot < 0) {
      a.out[i] = 0.0F;
      continue;
    }
    const bool resume = a.has_state == nullptr || a.has_state[b] != 0;
    const float* w = a.weight + static_cast<std::int64_t>(c) * a.width;
    float* st = a.state + (static_cast<std::int64_t>(slot) * a.channels + c) * keep;
    const float xv = a.x[static_cast<std::int64_t>(b) * a.x_stride + c];
    float y = a.bias != nullptr ? a.bias[c] : 0.0F;
    for (int j = 0; j < keep; ++j) {
      const float old = resume ? st[j] : 0.0F;
      y += w[j] * old;
    }
    y += w[keep] * xv;
    a.out[i] = finish(a, y);
    for (int j = 0; j + 1 < keep; ++j)
      st[j] = resume ? st[j + 1] : 0.0F;
    st[keep - 1] = xv;
  }
}

bool valid(const conv_weights& w) {
  return w.weight != nullptr && w.channels > 0 && w.width >= 2 && w.width <= max_width;
}

conv_args args_of(const conv_weights& w, const float* x, std::int64_t x_stride, float* out,
                  float* state, const std::int32_t* slots, const std::uint8_t* has_state) {
  return {w.weight, w.bias, w.channels, w.width,  w.silu, x, x_stride != 0 ? x_stride : w.channels,
          out,      state,  slots,      has_state};
}

unsigned flat_grid(std::int64_t items) {
  const std::int64_t cap = std::int64_t{detail::sm_count()} * 16;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(ceil_div(items, threads), cap)));
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Whether the fast kernels may take 4 channels per lane with 16-byte
// accesses: C and the x stride multiples of 4, every array 16-byte aligned.
bool wide(const conv_args& a) {
  return a.channels % 4 == 0 && a.x_stride % 4 == 0 && aligned16(a.x) && aligned16(a.out) &&
         aligned16(a.state) && aligned16(a.weight) && aligned16(a.bias);
}

// Calls fn.template operator()<V, W>() with the fast kernels' lanes per
// channel group and width; false for a width they do not take.
template <class Fn>
[[nodiscard]] bool with_fast_shape(const conv_args& a, Fn&& fn) {
  auto by_width = [&]<int V>() {
    if (a.width == 2)
      fn.template operator()<V, 2>();
    else if (a.width == 3)
      fn.template operator()<V, 3>();
    else if (a.width == 4)
      fn.template operator()<V, 4>();
    return a.width <= max_fast_width;
  };
  return wide(a) ? by_width.template operator()<4>() : by_width.template operator()<1>();
}

// Resident blocks per SM of one prefill instantiation (the occupancy
// calculator, asked once: devices of one kind assumed); 2 if the runtime
// cannot say.
template <int V, int W>
int tile_blocks_per_sm() {
  static std::atomic<int> cached{0};
  int n = cached.load(std::memory_order_relaxed);
  if (n > 0)
    return n;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, detail::conv::conv_tile_kernel<V, W>,
                                                    detail::conv::tile_threads, 0) != cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 2;
  }
  cached.store(n, std::memory_order_relaxed);
  return n;
}

cudaError_t launch_generic_varlen(const conv_args& a, const causal_conv_varlen_params& p, int rows,
                                  cudaStream_t stream) {
  // The token count lives on the device; the persistent grid covers any.
  const std::int64_t bound = std::int64_t{detail::sm_count()} * 16 * threads;
  conv_out_kernel<<<flat_grid(bound), threads, 0, stream>>>(a, p.cu_seqlens.data(), rows);
  if (const cudaError_t err = detail::launch_status(); err != cudaSuccess)
    return err;
  const dim3 grid{static_cast<unsigned>(ceil_div(p.w.channels, threads)),
                  static_cast<unsigned>(std::min(rows, 65535))};
  conv_state_kernel<<<grid, threads, 0, stream>>>(a, p.cu_seqlens.data(), rows);
  return detail::launch_status();
}

}  // namespace

cudaError_t causal_conv_varlen(const causal_conv_varlen_params& p, cudaStream_t stream) {
  if (!valid(p.w))
    return cudaErrorInvalidValue;
  if (p.cu_seqlens.size() < 2)
    return cudaSuccess;
  const int rows = static_cast<int>(p.cu_seqlens.size()) - 1;
  if (p.slot_indices.size() < static_cast<std::size_t>(rows) ||
      p.has_state.size() < static_cast<std::size_t>(rows)) {
    return cudaErrorInvalidValue;
  }
  const conv_args a =
      args_of(p.w, p.x, p.x_stride, p.out, p.state, p.slot_indices.data(), p.has_state.data());
  const std::int32_t* cu = p.cu_seqlens.data();
  const bool fast = with_fast_shape(a, [&]<int V, int W>() {
    // Persistent: the step's items are known only on the device.
    const int grid = detail::sm_count() * tile_blocks_per_sm<V, W>();
    detail::conv::conv_tile_kernel<V, W>
        <<<grid, detail::conv::tile_threads, 0, stream>>>(a, cu, rows);
  });
  return fast ? detail::launch_status() : launch_generic_varlen(a, p, rows, stream);
}

cudaError_t causal_conv_update(const causal_conv_update_params& p, cudaStream_t stream) {
  if (!valid(p.w) || p.batch < 0)
    return cudaErrorInvalidValue;
  if (p.batch == 0)
    return cudaSuccess;
  if (p.slot_indices.size() < static_cast<std::size_t>(p.batch) ||
      (!p.has_state.empty() && p.has_state.size() < static_cast<std::size_t>(p.batch))) {
    return cudaErrorInvalidValue;
  }
  const conv_args a = args_of(p.w, p.x, p.x_stride, p.out, p.state, p.slot_indices.data(),
                              p.has_state.empty() ? nullptr : p.has_state.data());
  const bool fast = with_fast_shape(a, [&]<int V, int W>() {
    constexpr int per_block = detail::conv::step_threads * V;
    const dim3 grid{static_cast<unsigned>(ceil_div(a.channels, per_block)),
                    static_cast<unsigned>(std::min(p.batch, 65535))};
    detail::launch_chained(detail::conv::conv_step_kernel<V, W>, grid, detail::conv::step_threads,
                           0, stream, a, p.batch);
  });
  if (!fast) {
    conv_update_kernel<<<flat_grid(std::int64_t{p.batch} * p.w.channels), threads, 0, stream>>>(
        a, p.batch);
  }
  return detail::launch_status();
}

}  // namespace mstar::kernels::cuda
