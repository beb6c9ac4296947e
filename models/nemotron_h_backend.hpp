#pragma once

// Where a Nemotron-H forward runs: one interface, a CPU implementation
// (models/nemotron_h_cpu.hpp, the reference) and a CUDA one
// (models/cuda/nemotron_h_cuda.hpp). The model picks one at load and never
// branches on the device again.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "kernels/arena.hpp"
#include "kernels/attention.hpp"
#include "models/nemotron_h_weights.hpp"
#include "parallel/communicator.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"

namespace mstar::models {

/// How one row draws its next token on the device (kernels/sampling.hpp's
/// rules): the draw part of a request's sampling parameters plus its counter.
struct row_sampling {
  float temperature = 0.0F;   ///< 0: greedy
  std::int32_t top_k = 0;     ///< 0: all tokens
  float top_p = 1.0F;         ///< nucleus mass in (0, 1]
  std::uint64_t seed = 0;     ///< the request's seed
  std::uint64_t counter = 0;  ///< draws the request made so far
};

/// One step's rows as the forward reads them.
struct nemotron_h_batch {
  std::span<const std::int32_t> ids;  ///< [T] token ids, rows packed
  std::span<const std::int32_t> cu;   ///< [R+1] cumulative tokens per row
  bool decode = false;                ///< every row feeds one token
};

/// Where the step's state lives: the pools' plans and blocks (memory of the
/// backend's device).
struct nemotron_h_state {
  const resources::kv_label_plan* kv_plan = nullptr;
  const resources::recurrent_addressing* rec = nullptr;
  kernels::kv_arena_view kv{};
  std::span<float* const> conv_state;  ///< per Mamba-2 layer
  std::span<float* const> ssm_state;   ///< per Mamba-2 layer
};

/// One forward as the device ran it (a backend that keeps a timeline): how
/// long the device was busy with the step, from its first upload to its last
/// download, and how long it sat idle before it, since the previous forward's
/// last download. Microseconds, from the device's own clock (CUDA events).
struct device_step_time {
  double idle_before_us = 0;  ///< 0 for the first forward recorded
  double busy_us = 0;
};

/// One rank's place in a tensor-parallel group, as its backend needs it:
/// the communicator for the all-reduces after the row-parallel projections
/// and the logits' all-gather, and its part of the vocabulary-parallel head.
struct nemotron_h_tensor_parallel {
  parallel::communicator* comm = nullptr;  ///< borrowed; outlives the backend's forwards
  std::int64_t vocab_rows = 0;             ///< LM head rows this rank holds
  std::int64_t vocab_chunk = 0;            ///< rows per rank, padded: ceil(vocab / size)
};

/// A device that runs the Nemotron-H forward. Not thread-safe: the worker
/// that owns the model calls it.
class nemotron_h_backend {
 public:
  virtual ~nemotron_h_backend() = default;

  /// Where the pools this backend addresses must keep their bytes.
  [[nodiscard]] virtual kernels::arena_factory memory() const = 0;
  /// The KV pages' dtype for these weights.
  [[nodiscard]] virtual mstar::dtype kv_dtype() const noexcept = 0;
  /// The weights' precision in the forward.
  [[nodiscard]] virtual mstar::dtype dtype() const noexcept = 0;
  /// "cpu", or the device's name and index, for logs.
  [[nodiscard]] virtual const std::string& name() const noexcept = 0;

  /// Takes the weights (borrowed by the CPU, copied by a device); once,
  /// before `forward`. `kv_pages` is the KV pool's page count (0 without
  /// one), the room captured graphs leave for page indices.
  [[nodiscard]] virtual result<void> load(const nemotron_h_config& config,
                                          const nemotron_h_host_weights& weights,
                                          std::int64_t kv_pages) = 0;

  /// Makes this backend one rank of a tensor-parallel group, before `load`:
  /// the weights it is then given are the rank's part
  /// (models/nemotron_h_shard.hpp) and its forward joins the group's
  /// collectives. The default refuses (a device backend needs a collective
  /// library of its own: NCCL on CUDA).
  [[nodiscard]] virtual result<void> set_tensor_parallel(const nemotron_h_tensor_parallel& tp);

  /// One forward over `batch`, blocking until it finished. With `logits`:
  /// each row's last token's row [R, vocab] f32 on the host. With `sampled`
  /// and one `sampling` entry per row: each row's token drawn where the
  /// logits are (-1 for a row whose logits or settings the sampler refuses).
  [[nodiscard]] virtual result<void> forward(const nemotron_h_batch& batch,
                                             const nemotron_h_state& state,
                                             std::vector<float>* logits,
                                             std::vector<std::int32_t>* sampled,
                                             std::span<const row_sampling> sampling) = 0;

  /// Starts one forward over `batch` without waiting for it and returns its
  /// ticket; `finish` gives its output. A backend with a device queue (CUDA)
  /// only enqueues the work, so the host may build and launch the next step
  /// while this one runs; the default (the CPU) runs `forward` here.
  /// Forwards run in launch order; at most `max_outstanding` may be launched
  /// and not finished. `want_logits`: the output is each row's logits;
  /// otherwise one draw per row under `sampling`. `loopback` is empty or one
  /// entry per row: an entry j >= 0 makes the row (one token) feed the id
  /// the previously launched forward drew for its row j, read where that
  /// forward left it (on a device: no host round trip); its entry in
  /// `batch.ids` is ignored. -1: the row feeds `batch.ids`.
  [[nodiscard]] virtual result<std::uint64_t> launch(const nemotron_h_batch& batch,
                                                     const nemotron_h_state& state,
                                                     bool want_logits,
                                                     std::span<const row_sampling> sampling,
                                                     std::span<const std::int32_t> loopback);
  /// Waits for the oldest outstanding forward, which must be `ticket`, and
  /// gives its logits ([R, vocab] f32) or its drawn ids (one per row; -1 for
  /// a row the sampler refused).
  [[nodiscard]] virtual result<void> finish(std::uint64_t ticket, std::vector<float>* logits,
                                            std::vector<std::int32_t>* sampled);
  /// How many forwards may be launched and not finished.
  static constexpr std::size_t max_outstanding = 2;
  /// Starts (or stops) keeping a device timeline of the forwards; a backend
  /// without a device clock (the CPU) keeps none.
  virtual void record_timeline(bool /*on*/) {}
  /// The forwards recorded since the last call, in order.
  [[nodiscard]] virtual std::vector<device_step_time> take_timeline() { return {}; }

 private:
  // The default launch's results, oldest first, and the ids the last launch
  // drew (what a loopback row of the next one feeds).
  struct ran {
    std::uint64_t ticket = 0;
    std::vector<float> logits;
    std::vector<std::int32_t> sampled;
  };
  std::vector<ran> ran_;
  std::vector<std::int32_t> last_drawn_;
  std::vector<std::int32_t> ids_;
  std::uint64_t next_ticket_ = 0;
};

/// The ids `batch` feeds once each looped-back row takes the id `drawn`
/// (the previous forward's draws) holds for it; invalid_argument when a
/// loopback entry names no drawn row or its row feeds more than one token.
[[nodiscard]] result<void> resolve_loopback(const nemotron_h_batch& batch,
                                            std::span<const std::int32_t> loopback,
                                            std::span<const std::int32_t> drawn,
                                            std::vector<std::int32_t>& ids);
/// Checks `loopback` against `batch` (one entry per row, each looped-back
/// row feeding one token, j < `previous_rows`).
[[nodiscard]] result<void> check_loopback(const nemotron_h_batch& batch,
                                          std::span<const std::int32_t> loopback,
                                          std::size_t previous_rows);

}  // namespace mstar::models
