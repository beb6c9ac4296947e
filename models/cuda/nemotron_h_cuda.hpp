#pragma once

// The Nemotron-H forward on a CUDA device: the same walk as the CPU forward
// (models/nemotron_h_forward.cpp), every kernel a kernels/cuda launcher on one
// stream, the weights in device memory as bfloat16 (GEMMs in bf16 with f32
// accumulation, as the reference runs) or float32 (bit-for-bit the CPU's
// GEMM inputs, for parity checks). Activations between kernels, the
// residual stream and the recurrent state stay float32; the KV pages are
// bf16 with bf16 weights, f32 otherwise. The pools run on device arenas
// (kernels/cuda/device_arena.hpp) on the same stream, so a fork or slot copy
// the pools enqueue is ordered before the kernels that read it.
//
// Built in every configuration: without CUDA, `make` says so.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "kernels/arena.hpp"
#include "kernels/attention.hpp"
#include "models/nemotron_h_backend.hpp"
#include "models/nemotron_h_config.hpp"

namespace mstar::models {

/// The device, its stream, cuBLAS handle, weights and work buffers.
class nemotron_h_cuda final : public nemotron_h_backend {
 public:
  /// Opens `device` (an index) with weights in `dtype` (bfloat16 or
  /// float32); unsupported when this build has no CUDA or the machine no
  /// such device.
  [[nodiscard]] static result<std::unique_ptr<nemotron_h_cuda>> make(int device, mstar::dtype dtype,
                                                                     bool graphs = true);
  ~nemotron_h_cuda() override;
  nemotron_h_cuda(const nemotron_h_cuda&) = delete;
  nemotron_h_cuda& operator=(const nemotron_h_cuda&) = delete;

  /// Device arenas on this stream, for the model's pools.
  [[nodiscard]] kernels::arena_factory memory() const override;
  /// The KV pages' dtype for these weights.
  [[nodiscard]] mstar::dtype kv_dtype() const noexcept override { return dtype_; }
  [[nodiscard]] mstar::dtype dtype() const noexcept override { return dtype_; }
  /// The device's name and index, for logs.
  [[nodiscard]] const std::string& name() const noexcept override;

  /// Copies (and converts) the weights to the device; once, before `forward`.
  [[nodiscard]] result<void> upload(const nemotron_h_config& config,
                                    const nemotron_h_host_weights& weights);

  /// One forward over `batch`, blocking until it finished (`launch` then
  /// `finish`, one path for both). With `logits`:
  /// each row's last token's row [R, vocab] f32, copied to the host. With
  /// `sampled` and one `sampling` entry per row: each row's token drawn on
  /// the device (argmax when every row is greedy), only R ids crossing to
  /// the host; -1 for a row whose logits or settings the CPU sampler would
  /// refuse.
  [[nodiscard]] result<void> forward(const nemotron_h_batch& batch, const nemotron_h_state& state,
                                     std::vector<float>* logits, std::vector<std::int32_t>* sampled,
                                     std::span<const row_sampling> sampling) override;

  /// Queues one forward (the plan's upload from pinned memory, the loopback
  /// rows' gather on the device, the kernels or the decode graph, sampling,
  /// the downloads into pinned memory) and returns without waiting; at most
  /// two outstanding, each with its own host buffers (ticket % 2).
  [[nodiscard]] result<std::uint64_t> launch(const nemotron_h_batch& batch,
                                             const nemotron_h_state& state, bool want_logits,
                                             std::span<const row_sampling> sampling,
                                             std::span<const std::int32_t> loopback) override;
  /// Waits on the oldest forward's event (not the whole stream: the next
  /// one may be queued behind it) and copies its output out.
  [[nodiscard]] result<void> finish(std::uint64_t ticket, std::vector<float>* logits,
                                    std::vector<std::int32_t>* sampled) override;

  /// Sets up graphs for a pool of `kv_pages` pages, then `upload`s.
  [[nodiscard]] result<void> load(const nemotron_h_config& config,
                                  const nemotron_h_host_weights& weights,
                                  std::int64_t kv_pages) override;

  /// Joins a tensor-parallel group before `load` (the weights are then the
  /// rank's part): an all-reduce after every layer and the LM head gathered
  /// (nemotron_h_cuda_parallel.cpp), decode graphs off. Any communicator:
  /// device buffers go to a device group, pinned host copies to a host one.
  [[nodiscard]] result<void> set_tensor_parallel(const nemotron_h_tensor_parallel& tp) override;

  /// Decode steps replay a CUDA graph captured once per row count (on by
  /// default): one launch instead of one per kernel. `kv_pages` is the KV
  /// pool's page count, the room each graph leaves for page indices.
  void set_graphs(bool on, std::int64_t kv_pages);

  /// CUDA events before each forward's upload and after its downloads (one
  /// pair per outstanding forward), measured when it finishes.
  void record_timeline(bool on) override;
  [[nodiscard]] std::vector<device_step_time> take_timeline() override;

  struct impl;
  struct graph_cache;

 private:
  nemotron_h_cuda(std::unique_ptr<impl> p, mstar::dtype dtype);
  // `launch` with logits and draws chosen apart (`forward` may ask both).
  [[nodiscard]] result<std::uint64_t> start(const nemotron_h_batch& batch,
                                            const nemotron_h_state& state, bool logits, bool draws,
                                            std::span<const row_sampling> sampling,
                                            std::span<const std::int32_t> loopback);
  // Queues the forward into slot `slot`; nothing is waited for.
  [[nodiscard]] result<void> enqueue(std::size_t slot, const nemotron_h_batch& batch,
                                     const nemotron_h_state& state, bool logits, bool draws,
                                     std::span<const row_sampling> sampling,
                                     std::span<const std::int32_t> loopback);
  std::unique_ptr<impl> impl_;
  mstar::dtype dtype_;
  // Unused in a build without CUDA (its `make` refuses).
  [[maybe_unused]] bool graphs_ = false;
  [[maybe_unused]] std::int64_t kv_pages_ = 0;
  [[maybe_unused]] std::unique_ptr<graph_cache> graphs_cache_;
};

}  // namespace mstar::models
