// mstar-bench-allreduce: the NCCL group's all-reduce (parallel/nccl_group.hpp,
// what a tensor-parallel model calls after its row-parallel projections)
// across the GPUs of one host, nccl-tests style: for each message size, the
// time a call takes on every rank once all ranks are in, its algorithm
// bandwidth (bytes / time) and bus bandwidth (algorithm bandwidth x 2 (n - 1)
// / n, the figure nccl-tests prints), beside the baseline measured in the
// same run: a peer copy from GPU 0 to GPU 1 (cudaMemcpyPeerAsync) of the same
// bytes. The default sizes are Nemotron-H's all-reduces: hidden 2,048 and
// 4,096 (0.56B, 8B) times 1, 64, 256 and 2,048 rows of f32, then 1 MiB to 256
// MiB. One thread per rank, rank r on cuda:r. Issue 18's two-GPU measurement
// (bench/h200x2_parallel.sh); with fewer than two GPUs it says so and
// measures nothing (MSTAR_REQUIRE_GPU set: it fails).
//   mstar-bench-allreduce [--ranks N] [--bytes B ...] [--iters I] [--json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/runtime.hpp"
#include "kernels/device.hpp"
#include "parallel/nccl_group.hpp"

namespace {

using mstar::kernels::cuda::device_buffer;
using mstar::kernels::cuda::event;
using mstar::kernels::cuda::stream;
using mstar::parallel::nccl_group;

std::vector<std::int64_t> default_sizes() {
  std::vector<std::int64_t> out;
  for (const std::int64_t hidden : {2048, 4096}) {
    for (const std::int64_t rows : {1, 64, 256, 2048})
      out.push_back(hidden * rows * 4);
  }
  for (std::int64_t mib = 1; mib <= 256; mib *= 4)
    out.push_back(mib << 20);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Microseconds a peer copy of `bytes` from cuda:0 to cuda:1 takes (median of
// `iters`), or a negative value naming nothing when it cannot be timed.
double peer_copy_us(std::int64_t bytes, int iters) {
  const auto n = static_cast<std::size_t>(bytes);
  if (cudaSetDevice(1) != cudaSuccess)
    return -1;
  auto dst = device_buffer::make(n);
  if (cudaSetDevice(0) != cudaSuccess)
    return -1;
  (void)cudaDeviceEnablePeerAccess(1, 0);  // already enabled, or no P2P: the copy stages
  (void)cudaGetLastError();
  auto src = device_buffer::make(n);
  auto s = stream::make();
  auto start = event::make();
  auto stop = event::make();
  if (!dst || !src || !s || !start || !stop)
    return -1;
  std::vector<double> us;
  for (int i = 0; i < iters + 2; ++i) {
    if (!start->record(s->get()))
      return -1;
    if (cudaMemcpyPeerAsync(dst->data(), 1, src->data(), 0, n, s->get()) != cudaSuccess)
      return -1;
    if (!stop->record(s->get()) || !stop->synchronize())
      return -1;
    auto ms = event::elapsed_ms(*start, *stop);
    if (!ms)
      return -1;
    if (i >= 2)  // two warm-up copies
      us.push_back(*ms * 1000.0);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mstar-bench-allreduce: the NCCL group's all-reduce across this host's GPUs "
      "(nccl-tests' algorithm and bus bandwidth), beside a GPU 0 -> 1 peer copy of the same "
      "bytes timed in the same run"};
  int ranks = 0;
  std::vector<std::int64_t> sizes;
  int iters = 20;
  bool json = false;
  app.add_option("--ranks", ranks, "Ranks, one a GPU (default: every visible GPU)");
  app.add_option("--bytes", sizes, "Message sizes in bytes, f32 (default: Nemotron-H's)");
  app.add_option("--iters", iters, "Timed calls a size (median reported)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_flag("--json", json, "One JSON object per size");
  CLI11_PARSE(app, argc, argv);
  if (sizes.empty())
    sizes = default_sizes();
  for (const auto b : sizes) {
    if (b <= 0 || b % 4 != 0) {
      std::fprintf(stderr, "mstar-bench-allreduce: --bytes %lld is not a positive multiple of 4\n",
                   static_cast<long long>(b));
      return 2;
    }
  }
  const auto report = mstar::kernels::query_cuda_devices();
  const int gpus = static_cast<int>(report.devices.size());
  if (ranks == 0)
    ranks = gpus;
  if (ranks < 2 || gpus < ranks) {
    const bool fail = mstar::kernels::gpu_required();
    std::printf(
        "mstar-bench-allreduce: %d GPU(s) visible (%s), %d rank(s) asked: nothing "
        "measured%s\n",
        gpus, report.reason.c_str(), ranks, fail ? " (MSTAR_REQUIRE_GPU is set: failing)" : "");
    return fail ? 1 : 0;
  }
  auto id = nccl_group::make_unique_id();
  if (!id) {
    std::fprintf(stderr, "mstar-bench-allreduce: %s\n", id.error().message().c_str());
    return 1;
  }
  const std::int64_t most = *std::max_element(sizes.begin(), sizes.end());
  // Per size: each rank's median microseconds a call.
  std::vector<std::vector<double>> us(sizes.size(), std::vector<double>(ranks, 0.0));
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::barrier meet(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto& err = errors[static_cast<std::size_t>(r)];
      // Every rank reaches every barrier, failed or not, so none waits forever.
      const auto fail = [&](const std::string& what) {
        if (err.empty())
          err = what;
      };
      if (cudaSetDevice(r) != cudaSuccess)
        fail("cudaSetDevice");
      auto buf = device_buffer::make(static_cast<std::size_t>(most));
      if (!buf)
        fail(buf.error().message());
      else
        (void)cudaMemset(buf->data(), 0, static_cast<std::size_t>(most));
      auto group = nccl_group::create(r, ranks, *id, r);
      if (!group)
        fail(group.error().message());
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        std::vector<double> t;
        for (int k = 0; k < iters + 3; ++k) {
          meet.arrive_and_wait();  // every rank in before the clock starts
          if (!err.empty())
            continue;
          const auto t0 = std::chrono::steady_clock::now();
          const std::span<float> data{buf->as<float>(), static_cast<std::size_t>(sizes[i] / 4)};
          if (auto ok = (*group)->all_reduce_sum(data); !ok) {
            fail(ok.error().message());
            continue;
          }
          const auto t1 = std::chrono::steady_clock::now();
          if (k >= 3)  // three warm-up calls
            t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        if (!t.empty()) {
          std::sort(t.begin(), t.end());
          us[i][static_cast<std::size_t>(r)] = t[t.size() / 2];
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!errors[static_cast<std::size_t>(r)].empty()) {
      std::fprintf(stderr, "mstar-bench-allreduce: rank %d: %s\n", r,
                   errors[static_cast<std::size_t>(r)].c_str());
      return 1;
    }
  }
  if (!json)
    std::printf("%12s %12s %12s %12s %14s %10s\n", "bytes", "us", "algbw GB/s", "busbw GB/s",
                "peer copy GB/s", "bus/peer");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    // The slowest rank's time: a collective ends when its last rank does.
    const double t = *std::max_element(us[i].begin(), us[i].end());
    const double alg = static_cast<double>(sizes[i]) / t / 1e3;
    const double bus = alg * 2.0 * (ranks - 1) / ranks;
    const double peer_us = peer_copy_us(sizes[i], std::max(3, iters / 4));
    const double peer = peer_us > 0 ? static_cast<double>(sizes[i]) / peer_us / 1e3 : 0.0;
    if (json) {
      nlohmann::json line{{"bench", "allreduce"},
                          {"ranks", ranks},
                          {"bytes", sizes[i]},
                          {"us_per_call", t},
                          {"algbw_GB_per_s", alg},
                          {"busbw_GB_per_s", bus},
                          {"baseline", "peer_copy_0_to_1"},
                          {"baseline_GB_per_s", peer},
                          {"ratio", peer > 0 ? bus / peer : 0.0}};
      std::cout << line.dump() << std::endl;
    } else {
      std::printf("%12lld %12.2f %12.2f %12.2f %14.2f %10.3f\n", static_cast<long long>(sizes[i]),
                  t, alg, bus, peer, peer > 0 ? bus / peer : 0.0);
    }
  }
  return 0;
}
