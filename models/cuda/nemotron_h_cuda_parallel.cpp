// nemotron_h_cuda's tensor parallelism: the all-reduce after each layer's
// row-parallel projection and the vocabulary-parallel LM head, over any
// parallel::communicator. A device group (NCCL) gets the device buffers; a
// host group (the in-process local_group: tests, and ranks sharing one GPU)
// gets them staged through pinned host memory. Either way a collective is a
// host call that waits for its peers, so the stream is drained before it and
// a tensor-parallel model captures no decode graphs (set_tensor_parallel).
#include "models/cuda/nemotron_h_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "models/cuda/internal/nemotron_h_cuda_impl.hpp"

namespace mstar::models {
namespace {

// Pinned staging grows only with the stream drained: an upload from the old
// memory may still be queued when it is freed.
result<void> grow_staging(nemotron_h_cuda::impl& p, kc::pinned_buffer& b, std::size_t bytes) {
  if (b.size() >= bytes)
    return {};
  if (auto ok = p.check(cudaStreamSynchronize(p.stream.get()), "staging growth"); !ok)
    return ok;
  return nemotron_h_cuda::impl::reserve_pinned(b, bytes);
}

}  // namespace

result<void> nemotron_h_cuda::set_tensor_parallel(const nemotron_h_tensor_parallel& tp) {
  if (tp.comm == nullptr || tp.vocab_rows < 0 || tp.vocab_chunk < tp.vocab_rows) {
    return make_error(errc::invalid_argument,
                      "tensor parallel: no communicator, or a bad LM head part");
  }
  if (!impl_->layers.empty()) {
    return make_error(
        errc::internal,
        fmt::format("{}: tensor parallelism must be set before the weights load", impl_->name));
  }
  impl_->tp = tp;
  // A collective waits on the host mid-step: nothing a graph can hold.
  set_graphs(false, kv_pages_);
  return {};
}

result<void> nemotron_h_cuda::impl::all_reduce(float* data, std::size_t n) {
  if (tp.comm == nullptr || n == 0)
    return {};
  const cudaStream_t s = stream.get();
  const auto what = [&](const error& e) {
    return error(e).with_context(fmt::format("{}: all-reduce of {} floats", name, n));
  };
  if (tp.comm->takes_device_memory()) {
    if (auto ok = check(cudaStreamSynchronize(s), "drain before all-reduce"); !ok)
      return ok;
    if (auto ok = tp.comm->all_reduce_sum({data, n}); !ok)
      return what(ok.error());
    return {};
  }
  const std::size_t bytes = n * sizeof(float);
  if (auto ok = grow_staging(*this, tp_host_part, bytes); !ok)
    return ok;
  auto* host = tp_host_part.as<float>();
  if (auto ok = check(cudaMemcpyAsync(host, data, bytes, cudaMemcpyDeviceToHost, s),
                      "all-reduce download");
      !ok)
    return ok;
  if (auto ok = check(cudaStreamSynchronize(s), "all-reduce download"); !ok)
    return ok;
  if (auto ok = tp.comm->all_reduce_sum({host, n}); !ok)
    return what(ok.error());
  // The next use of `host` is behind this upload on the same stream.
  return check(cudaMemcpyAsync(data, host, bytes, cudaMemcpyHostToDevice, s), "all-reduce upload");
}

result<void> nemotron_h_cuda::impl::lm_head_rows(const float* normed, std::int64_t rows,
                                                 float* dest) {
  if (tp.comm == nullptr)
    return linear(staged(normed), rows, lm_head, dest);
  const cudaStream_t s = stream.get();
  const std::int64_t V = config.vocab_size, chunk = tp.vocab_chunk, mine = tp.vocab_rows;
  const auto n = static_cast<std::int64_t>(tp.comm->size());
  const auto part_floats = static_cast<std::size_t>(rows * chunk);
  const auto all_floats = static_cast<std::size_t>(n) * part_floats;
  const bool on_device = tp.comm->takes_device_memory();
  // This rank's logits [rows, chunk] (columns past `mine` zero), then every
  // rank's gathered rank-major [n][rows][chunk].
  if (auto ok = reserve_buffer(tp_part, part_floats * sizeof(float), false); !ok)
    return ok;
  float* part = tp_part.as<float>();
  if (auto ok = check(cudaMemsetAsync(part, 0, part_floats * sizeof(float), s), "LM head part");
      !ok)
    return ok;
  if (mine > 0) {
    // The GEMM writes [rows, mine] into `dest` (room for [rows, V]), then
    // the rows move to the padded part.
    if (auto ok = linear(staged(normed), rows, lm_head, dest); !ok)
      return ok;
    if (auto ok =
            check(cudaMemcpy2DAsync(part, static_cast<std::size_t>(chunk) * sizeof(float), dest,
                                    static_cast<std::size_t>(mine) * sizeof(float),
                                    static_cast<std::size_t>(mine) * sizeof(float),
                                    static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, s),
                  "LM head part");
        !ok)
      return ok;
  }
  const float* gathered = nullptr;
  cudaMemcpyKind up = cudaMemcpyDeviceToDevice;
  const auto context = [&](const error& e) {
    return error(e).with_context(
        fmt::format("{}: LM head gather of {} x {} logits", name, rows, chunk));
  };
  if (on_device) {
    if (auto ok = reserve_buffer(tp_gathered, all_floats * sizeof(float), false); !ok)
      return ok;
    if (auto ok = check(cudaStreamSynchronize(s), "drain before the LM head gather"); !ok)
      return ok;
    if (auto ok = tp.comm->all_gather({part, part_floats}, {tp_gathered.as<float>(), all_floats});
        !ok)
      return context(ok.error());
    gathered = tp_gathered.as<float>();
  } else {
    if (auto ok = grow_staging(*this, tp_host_part, part_floats * sizeof(float)); !ok)
      return ok;
    if (auto ok = grow_staging(*this, tp_host_gathered, all_floats * sizeof(float)); !ok)
      return ok;
    auto* host = tp_host_part.as<float>();
    if (auto ok = check(
            cudaMemcpyAsync(host, part, part_floats * sizeof(float), cudaMemcpyDeviceToHost, s),
            "LM head download");
        !ok)
      return ok;
    if (auto ok = check(cudaStreamSynchronize(s), "LM head download"); !ok)
      return ok;
    if (auto ok =
            tp.comm->all_gather({host, part_floats}, {tp_host_gathered.as<float>(), all_floats});
        !ok)
      return context(ok.error());
    gathered = tp_host_gathered.as<float>();
    up = cudaMemcpyHostToDevice;
  }
  // Each rank's columns [rank * chunk, rank * chunk + count) of every row.
  for (std::int64_t rank = 0; rank < n; ++rank) {
    const std::int64_t begin = rank * chunk;
    const std::int64_t count = std::max<std::int64_t>(0, std::min(chunk, V - begin));
    if (count == 0)
      continue;
    if (auto ok = check(cudaMemcpy2DAsync(dest + begin, static_cast<std::size_t>(V) * sizeof(float),
                                          gathered + rank * rows * chunk,
                                          static_cast<std::size_t>(chunk) * sizeof(float),
                                          static_cast<std::size_t>(count) * sizeof(float),
                                          static_cast<std::size_t>(rows), up, s),
                        "LM head logits");
        !ok)
      return ok;
  }
  return {};
}

}  // namespace mstar::models

#else  // no CUDA in this build

namespace mstar::models {

result<void> nemotron_h_cuda::set_tensor_parallel(const nemotron_h_tensor_parallel&) {
  return make_error(errc::unsupported, "this build has no CUDA");
}

}  // namespace mstar::models

#endif
