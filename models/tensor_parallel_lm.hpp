#pragma once

// N tensor-parallel ranks of one model behind one `causal_lm`, so that one
// scheduler and one pool bookkeeping drive them all: the conductor
// broadcasts the step; no rank decides alone. Ranks that each ran their own
// engine would have to step identically forever, which requests that come
// and go (mstar-serve, mstar-node, the actor runtime) cannot promise.
//
// The wrapper owns the ranks (each loaded with its communicator of one
// in-process group, parallel/local_group.hpp) and one worker thread per
// rank. Every call that reaches a rank's backend (load, bind, forward,
// launch, finish, begin/end_sequence) runs on that rank's thread, so a
// rank's device calls always come from the thread it was made on (CUDA's
// current device is per thread), and calls that meet in collectives run at
// once. Const queries are rank 0's.
//
// Pools: `pools()` is rank 0's spec with its memory replicated over every
// rank's (kernels/replicated_arena.hpp); each rank binds to its member.
// When a rank fails, the group is aborted (peers blocked in a collective
// return at once), the call fails naming the rank, and every later call
// fails with that error.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "models/causal_lm.hpp"

namespace mstar::models {

class tensor_parallel_lm final : public causal_lm {
 public:
  /// Loads rank r of the model with `run` whose `tensor_parallel` is rank r
  /// of a group (its other fields as the caller gave them).
  using rank_loader = std::function<result<std::unique_ptr<causal_lm>>(const run_options& run)>;

  /// `ranks` ranks (>= 2) over a new in-process group bounded by
  /// `timeout`, rank r loaded by `load` on its own thread (all at once);
  /// the first rank's failure, naming it, when one cannot load.
  [[nodiscard]] static result<std::unique_ptr<tensor_parallel_lm>> make(
      const run_options& run, int ranks, const rank_loader& load,
      std::chrono::milliseconds timeout = std::chrono::milliseconds{60'000});

  ~tensor_parallel_lm() override;

  [[nodiscard]] int ranks() const noexcept { return static_cast<int>(models_.size()); }
  /// Rank r's model (for checks; its calls belong on its thread).
  [[nodiscard]] causal_lm& rank(int r) { return *models_[static_cast<std::size_t>(r)]; }

  [[nodiscard]] const tokenizer* tok() const noexcept override { return models_[0]->tok(); }
  [[nodiscard]] std::int64_t vocab_size() const noexcept override {
    return models_[0]->vocab_size();
  }
  [[nodiscard]] std::int64_t max_context() const noexcept override {
    return models_[0]->max_context();
  }
  [[nodiscard]] std::span<const std::int64_t> eos_token_ids() const noexcept override {
    return models_[0]->eos_token_ids();
  }
  [[nodiscard]] bool prefix_skip_safe() const noexcept override {
    return models_[0]->prefix_skip_safe();
  }
  [[nodiscard]] bool supports_windows() const noexcept override {
    return models_[0]->supports_windows();
  }
  /// Rank 0's spec, its memory replicated over every rank's; invalid_argument
  /// naming the rank and the pool whose shape differs from rank 0's. The
  /// factory makes member r on rank r's thread: it refers to this model and
  /// must not outlive it.
  [[nodiscard]] result<pool_spec> pools(const pool_options& options) const override;
  [[nodiscard]] result<void> bind(resources::kv_pool* kv,
                                  resources::recurrent_state_pool* recurrent) override;
  [[nodiscard]] std::optional<vision_facts> vision() const noexcept override {
    return models_[0]->vision();
  }
  [[nodiscard]] result<void> place_images(std::vector<resources::token_id>& prompt,
                                          std::span<const image_input> images) const override {
    return models_[0]->place_images(prompt, images);
  }
  [[nodiscard]] std::vector<image_span> image_spans(
      std::span<const resources::token_id> prompt,
      std::span<const image_input> images) const override {
    return models_[0]->image_spans(prompt, images);
  }
  [[nodiscard]] std::string preprocess_fingerprint() const override {
    return models_[0]->preprocess_fingerprint();
  }
  void begin_sequence(const resources::request_id& rid, std::span<const resources::token_id> prompt,
                      std::span<const image_input> images) override;
  void end_sequence(const resources::request_id& rid) override;
  [[nodiscard]] step_request declare(std::span<const step_row> rows) const override {
    return models_[0]->declare(rows);
  }
  /// Every rank's forward at once; rank 0's output.
  [[nodiscard]] result<forward_output> forward(std::span<const step_row> rows,
                                               const step_plans& plans,
                                               std::span<const row_sampling> draws) override;
  [[nodiscard]] result<std::uint64_t> launch(std::span<const step_row> rows,
                                             const step_plans& plans,
                                             std::span<const row_sampling> draws,
                                             std::span<const std::int32_t> loopback) override;
  [[nodiscard]] result<forward_output> finish(std::uint64_t ticket) override;
  [[nodiscard]] std::string device_name() const override { return models_[0]->device_name(); }
  [[nodiscard]] mstar::dtype compute_dtype() const noexcept override {
    return models_[0]->compute_dtype();
  }
  /// The weights all ranks hold together (the replicated ones once per rank).
  [[nodiscard]] std::int64_t num_parameters() const noexcept override;
  [[nodiscard]] bool on_gpu() const noexcept override { return models_[0]->on_gpu(); }

 private:
  struct worker;

  tensor_parallel_lm();
  // Runs `job(r)` for every rank at once, each on its rank's thread, and
  // waits for all.
  void run_all(const std::function<void(int)>& job);
  // Runs `job(r)` on each rank's thread in turn.
  void run_each(const std::function<void(int)>& job);
  // Records rank r's failure (the first one wins) and aborts the group so
  // that peers waiting in a collective return.
  void fail(int r, const error& e);
  // The recorded failure, if any.
  [[nodiscard]] std::optional<error> broken() const;

  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<std::shared_ptr<parallel::communicator>> comms_;
  std::vector<std::unique_ptr<causal_lm>> models_;
  mutable std::mutex failure_mutex_;
  std::optional<error> failure_;
  /// Each outstanding launch: rank 0's ticket, then every rank's.
  std::deque<std::vector<std::uint64_t>> tickets_;
};

/// Where each of `ranks` ranks runs for `device`: "cuda" with at least
/// `ranks` visible GPUs puts rank r on cuda:r; anything else ("cpu",
/// "cuda:N", or too few GPUs) puts every rank on `device`.
[[nodiscard]] std::vector<std::string> rank_devices(const std::string& device, int ranks);

/// A model of `ranks` in-process tensor-parallel ranks (a tensor_parallel_lm)
/// when ranks > 1, each loaded by `load` with its rank of a new group; else
/// `load(run)` itself.
[[nodiscard]] result<std::unique_ptr<causal_lm>> make_tensor_parallel(
    const run_options& run, int ranks, const tensor_parallel_lm::rank_loader& load);

}  // namespace mstar::models
