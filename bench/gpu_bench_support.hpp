#pragma once
// What every mstar-gpu-bench case shares (bench/gpu_bench.cpp): device
// buffers filled with random data, CUDA-event timing, the device-to-device
// copy measured beside each case, interleaved round by round, medians.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "kernels/cuda/launch.hpp"

namespace mstar::bench::gpu {

namespace cuda = mstar::kernels::cuda;

// Exits with the message when a CUDA call fails: a benchmark has no recovery.
inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "gpu bench: %s\n", cuda::cuda_error(err, what).to_string().c_str());
    std::exit(1);
  }
}

template <class T>
T must(mstar::result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "gpu bench: %s: %s\n", what, r.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

inline cuda::device_buffer alloc(std::size_t bytes) {
  return must(cuda::device_buffer::make(bytes), "cudaMalloc");
}

// Fills `bytes` of device memory with random floats in [-1, 1) (or their bf16
// halves): a random block uploaded once, then tiled (never zeros, METHOD.md).
inline void fill_random(void* dst, std::size_t bytes, bool bf16, std::uint64_t seed) {
  constexpr std::size_t block = 16U << 20U;
  std::vector<float> host(block / sizeof(float));
  std::mt19937_64 engine{seed};
  std::uniform_real_distribution<float> dist{-1.0F, 1.0F};
  for (auto& v : host)
    v = dist(engine);
  auto staging = alloc(block);
  if (bf16) {
    auto wide = alloc(block * 2);
    check(cudaMemcpy(wide.data(), host.data(), block, cudaMemcpyHostToDevice), "upload");
    check(cuda::to_bf16(wide.as<float>(), staging.as<std::uint16_t>(),
                        static_cast<std::int64_t>(host.size()), nullptr),
          "to_bf16");
  } else {
    check(cudaMemcpy(staging.data(), host.data(), block, cudaMemcpyHostToDevice), "upload");
  }
  const std::size_t tile = bf16 ? block / 2 : block;
  for (std::size_t off = 0; off < bytes; off += tile) {
    check(cudaMemcpy(static_cast<std::byte*>(dst) + off, staging.data(),
                     std::min(tile, bytes - off), cudaMemcpyDeviceToDevice),
          "tile");
  }
  check(cudaDeviceSynchronize(), "fill");
}

template <class T>
cuda::device_buffer upload(const std::vector<T>& host) {
  auto d = alloc(std::max<std::size_t>(host.size() * sizeof(T), 1));
  check(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "upload");
  return d;
}

// Milliseconds per call of `fn`, timed with events over `reps` calls:
// launched one by one, or (`graphs`) captured into one CUDA graph and
// launched as one, so a call's time is the device's alone, not the host's
// launch cost (the way a model's decode step runs, captured). A call that
// cannot be captured is timed launched one by one; `graphed` says which ran.
struct timer {
  cuda::stream stream = must(cuda::stream::make(), "stream");
  cuda::event start = must(cuda::event::make(), "event");
  cuda::event stop = must(cuda::event::make(), "event");
  bool graphs = false;
  bool graphed = false;
  /// Launch each captured graph once before the timed launch (the default);
  /// false: only upload it, so operands rotating through more copies than
  /// one graph's calls touch stay cold (bench/gpu_bench_small.cpp).
  bool warm_graphs = true;

  double ms_per_call(const std::function<cudaError_t(cudaStream_t)>& fn, int reps) {
    graphed = false;
    if (graphs) {
      if (const double ms = graph_ms_per_call(fn, reps); ms >= 0.0) {
        graphed = true;
        return ms;
      }
    }
    check(cudaEventRecord(start.get(), stream.get()), "record");
    for (int i = 0; i < reps; ++i)
      check(fn(stream.get()), "launch");
    check(cudaEventRecord(stop.get(), stream.get()), "record");
    check(cudaEventSynchronize(stop.get()), "sync");
    return double{must(cuda::event::elapsed_ms(start, stop), "elapsed")} / reps;
  }

  // -1 when the calls cannot be captured (the capture is abandoned cleanly).
  double graph_ms_per_call(const std::function<cudaError_t(cudaStream_t)>& fn, int reps) {
    check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), "capture");
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < reps && err == cudaSuccess; ++i)
      err = fn(stream.get());
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream.get(), &graph);
    cudaGraphExec_t exec = nullptr;
    if (err == cudaSuccess && end == cudaSuccess &&
        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      if (warm_graphs)
        check(cudaGraphLaunch(exec, stream.get()), "graph warm-up");
      else
        check(cudaGraphUpload(exec, stream.get()), "graph upload");
      check(cudaEventRecord(start.get(), stream.get()), "record");
      check(cudaGraphLaunch(exec, stream.get()), "graph launch");
      check(cudaEventRecord(stop.get(), stream.get()), "record");
      check(cudaEventSynchronize(stop.get()), "sync");
      check(cudaGraphExecDestroy(exec), "graph exec destroy");
      check(cudaGraphDestroy(graph), "graph destroy");
      return double{must(cuda::event::elapsed_ms(start, stop), "elapsed")} / reps;
    }
    if (graph != nullptr)
      cudaGraphDestroy(graph);
    cudaGetLastError();  // the failed capture's error is reported as "eager"
    return -1.0;
  }
};

inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Call i of a rotating case uses copy i of its operands (mod their copies);
// a captured graph records each call's own copy.
struct call_counter {
  std::shared_ptr<std::size_t> next = std::make_shared<std::size_t>(0);
  std::size_t operator()() const { return (*next)++; }
};

// The bytes a cold case's rotating copies pass: `mib` MiB, or (0) twice the
// device's L2 (at least 100 MiB).
inline std::size_t cold_bytes_of(std::size_t mib) {
  if (mib != 0)
    return mib << 20U;
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
  return 2 * static_cast<std::size_t>(std::max(l2, 50 << 20));
}

// The copy ceiling beside every case: one large device-to-device copy.
struct copy_baseline {
  std::size_t bytes;
  cuda::device_buffer src, dst;
  explicit copy_baseline(std::size_t n) : bytes(n), src(alloc(n)), dst(alloc(n)) {
    fill_random(src.data(), n, false, 7);
  }
  cudaError_t operator()(cudaStream_t s) const {
    return cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s);
  }
  [[nodiscard]] double moved() const { return 2.0 * static_cast<double>(bytes); }
};

// Times `subject` (moving `bytes` per call) against the copy, interleaved.
inline comparison measure(timer& t, copy_baseline& copy, const std::string& name,
                          const std::string& metric, double bytes,
                          const std::function<cudaError_t(cudaStream_t)>& subject, int rounds) {
  const double probe = t.ms_per_call(subject, 1);  // also the warm-up
  const int reps = std::clamp(static_cast<int>(5.0 / std::max(probe, 1e-3)), 3, 200);
  const double copy_probe = t.ms_per_call(std::cref(copy), 1);
  const int copy_reps = std::clamp(static_cast<int>(5.0 / std::max(copy_probe, 1e-3)), 3, 200);
  std::vector<double> ms, copy_ms;
  for (int r = 0; r < rounds; ++r) {
    ms.push_back(t.ms_per_call(subject, reps));
    copy_ms.push_back(t.ms_per_call(std::cref(copy), copy_reps));
  }
  const double m = median(ms);
  const double cm = median(copy_ms);
  comparison c{
      "gpu", name, metric, "B/s", "d2d_copy", bytes / (m * 1e-3), copy.moved() / (cm * 1e-3), {}};
  c.extra["us_per_call"] = m * 1e3;
  c.extra["graph"] = t.graphed ? 1.0 : 0.0;
  c.extra["GB_per_s"] = c.value / 1e9;
  c.extra["copy_GB_per_s"] = c.baseline_value / 1e9;
  return c;
}
}  // namespace mstar::bench::gpu
