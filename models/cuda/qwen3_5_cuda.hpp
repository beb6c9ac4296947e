#pragma once

// The Qwen3.5 text forward on a CUDA device: the walk of the CPU forward
// (models/qwen3_5_cpu.cpp), every kernel a kernels/cuda launcher on one
// stream, weights in device memory as bfloat16 (GEMMs with f32
// accumulation) or float32 (the CPU's GEMM inputs, for parity checks).
// Activations between kernels, the residual stream and the delta-net and
// conv state stay float32; the KV pages are bf16 with bf16 weights, f32
// otherwise. The pools run on device arenas on the same stream. The step
// protocol is Nemotron-H's (models/cuda/nemotron_h_cuda.hpp): `launch`
// queues a forward (two may be outstanding), `finish` waits on its event,
// decode steps replay a CUDA graph per row count, tokens are drawn on the
// device, and a decode row may feed the previous forward's draw (loopback).
// Image embeddings come from the host (the vision tower, on this device too
// (qwen3_5_vision_cuda.hpp), hands its rows back once per image) and are
// copied over their placeholder tokens' rows.
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
#include "models/nemotron_h_backend.hpp"
#include "models/qwen3_5_config.hpp"
#include "models/qwen3_5_cpu.hpp"
#include "models/qwen3_5_weights.hpp"

namespace mstar::models {

/// The device, its stream, cuBLAS handle, weights and work buffers.
class qwen3_5_cuda {
 public:
  /// Opens `device` (an index) with weights in `dtype` (bfloat16 or
  /// float32); unsupported when this build has no CUDA or the machine no
  /// such device.
  [[nodiscard]] static result<std::unique_ptr<qwen3_5_cuda>> make(int device, mstar::dtype dtype,
                                                                  bool graphs = true);
  ~qwen3_5_cuda();
  qwen3_5_cuda(const qwen3_5_cuda&) = delete;
  qwen3_5_cuda& operator=(const qwen3_5_cuda&) = delete;

  /// Device arenas on this stream, for the model's pools.
  [[nodiscard]] kernels::arena_factory memory() const;
  /// The weights' dtype, also the KV pages'.
  [[nodiscard]] mstar::dtype dtype() const noexcept { return dtype_; }
  /// The device's name and index, for logs.
  [[nodiscard]] const std::string& name() const noexcept;

  /// Copies (and converts) the weights to the device; `kv_pages` is the KV
  /// pool's page count, the room decode graphs leave for page indices.
  [[nodiscard]] result<void> load(const qwen3_5_config& config, const qwen3_5_host_weights& weights,
                                  std::int64_t kv_pages);

  /// Queues one forward over `step` (device pools; `embed_rows` host
  /// pointers) and returns its ticket without waiting; at most two
  /// outstanding. `want_logits`: the output is each row's last-token logits;
  /// otherwise one draw per row under `sampling`. `loopback`: as
  /// nemotron_h_backend::launch.
  [[nodiscard]] result<std::uint64_t> launch(const qwen3_5_step& step, bool want_logits,
                                             std::span<const row_sampling> sampling,
                                             std::span<const std::int32_t> loopback);
  /// Waits for the oldest outstanding forward, which must be `ticket`, and
  /// gives its logits ([R, vocab] f32) or its drawn ids.
  [[nodiscard]] result<void> finish(std::uint64_t ticket, std::vector<float>* logits,
                                    std::vector<std::int32_t>* sampled);

  struct impl;

 private:
  qwen3_5_cuda(std::unique_ptr<impl> p, mstar::dtype dtype);
  std::unique_ptr<impl> impl_;
  mstar::dtype dtype_;
};

}  // namespace mstar::models
