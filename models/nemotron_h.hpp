#pragma once

// The Nemotron-H family (NemotronHForCausalLM): Mamba-2, attention and MLP
// blocks in a hybrid pattern, each `h += mixer(rms_norm(h))`, then a final
// norm and the LM head. The model owns its walk: per step it declares a
// `kv_step` for its attention layers and a `recurrent_step` for its Mamba-2
// layers, and runs its backend's kernels against the pools' plans. The
// pools belong to whoever drives the step (models/causal_lm.hpp).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "models/nemotron_h_backend.hpp"
#include "models/nemotron_h_config.hpp"
#include "models/nemotron_h_shard.hpp"
#include "models/nemotron_h_weights.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {

/// A loaded Nemotron-H checkpoint and the backend it runs on.
class nemotron_h_model final : public causal_lm {
 public:
  /// Loads `config.json`, the safetensors weights (F32/BF16/F16, converted
  /// to float32) and the tokenizer of `folder` (none: token-id prompts
  /// only), and opens the device `run` names. Every failure names the file
  /// and what was wrong. With `run.tensor_parallel` (a group of more than
  /// one) only the rank's part of each weight is kept, sliced as each
  /// tensor is read, and a config that does not split is refused.
  [[nodiscard]] static result<std::unique_ptr<nemotron_h_model>> load(
      const std::filesystem::path& folder, const run_options& run = {});

  /// A model with random weights (normal, std 0.02; Mamba-2's A_log, D and
  /// dt_bias at their usual initial values) and a byte tokenizer: for
  /// benchmarks and tests at sizes no fixture holds.
  [[nodiscard]] static result<std::unique_ptr<nemotron_h_model>> random(
      nemotron_h_config config, std::uint64_t seed, const run_options& run = {});

  ~nemotron_h_model() override;
  nemotron_h_model(const nemotron_h_model&) = delete;
  nemotron_h_model& operator=(const nemotron_h_model&) = delete;

  /// The checkpoint's config (whole-model sizes, on every rank).
  [[nodiscard]] const nemotron_h_config& config() const noexcept { return config_; }
  /// This rank's part of the model; empty without tensor parallelism.
  [[nodiscard]] const std::optional<nemotron_h_shard_plan>& shard() const noexcept {
    return shard_;
  }
  /// Each linear layer's [out, in] shape, once per use in a forward over
  /// every layer (the GEMMs a step runs), for the BLAS floor of benchmarks.
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>> gemm_shapes() const;

  // causal_lm
  [[nodiscard]] const tokenizer* tok() const noexcept override { return tokenizer_.get(); }
  [[nodiscard]] std::int64_t vocab_size() const noexcept override { return config_.vocab_size; }
  [[nodiscard]] std::int64_t max_context() const noexcept override {
    return config_.max_position_embeddings;
  }
  [[nodiscard]] std::span<const std::int64_t> eos_token_ids() const noexcept override {
    return config_.eos_token_ids;
  }
  /// Without Mamba-2 layers; with them, once `pools` gave the recurrent
  /// pool checkpoint slots, so the state at a match boundary is cached too
  /// (reference kv §5.8).
  [[nodiscard]] bool prefix_skip_safe() const noexcept override {
    return config_.count(layer_kind::mamba2) == 0 || checkpointed_;
  }
  [[nodiscard]] result<pool_spec> pools(const pool_options& options) const override;
  [[nodiscard]] result<void> bind(resources::kv_pool* kv,
                                  resources::recurrent_state_pool* recurrent) override;
  [[nodiscard]] step_request declare(std::span<const step_row> rows) const override;
  [[nodiscard]] result<forward_output> forward(std::span<const step_row> rows,
                                               const step_plans& plans,
                                               std::span<const row_sampling> draws) override;
  [[nodiscard]] result<std::uint64_t> launch(std::span<const step_row> rows,
                                             const step_plans& plans,
                                             std::span<const row_sampling> draws,
                                             std::span<const std::int32_t> loopback) override;
  [[nodiscard]] result<forward_output> finish(std::uint64_t ticket) override;
  [[nodiscard]] std::string device_name() const override { return backend_->name(); }
  [[nodiscard]] mstar::dtype compute_dtype() const noexcept override { return backend_->dtype(); }
  [[nodiscard]] std::int64_t num_parameters() const noexcept override;
  [[nodiscard]] bool on_gpu() const noexcept override { return backend_->name() != "cpu"; }
  /// The device timeline of the forwards (benchmarks: the idle gap between
  /// steps); empty on the CPU. Call from the thread that drives the engine,
  /// between steps.
  void record_device_timeline(bool on) { backend_->record_timeline(on); }
  [[nodiscard]] std::vector<device_step_time> take_device_timeline() {
    return backend_->take_timeline();
  }

 private:
  nemotron_h_model() = default;
  [[nodiscard]] result<void> load_weights(const std::filesystem::path& folder);
  /// Opens the device `run` names: the CPU or a CUDA device; with a
  /// tensor-parallel group, plans this rank's part (after `config_` is set).
  [[nodiscard]] result<void> open_device(const run_options& run);
  [[nodiscard]] result<void> join_group(const run_options& run);
  /// `l` (full size) as this rank keeps it.
  void keep_part(nemotron_h_layer& l) const {
    if (shard_)
      l = shard_layer(*shard_, config_, l);
  }
  [[nodiscard]] nemotron_h_host_weights host_weights() const {
    return {&embeddings_, &norm_f_, &lm_head_, layers_};
  }

  nemotron_h_config config_;
  std::optional<nemotron_h_shard_plan> shard_;
  std::shared_ptr<parallel::communicator> group_;  ///< kept alive while the backend uses it
  std::unique_ptr<tokenizer> tokenizer_;
  std::string fingerprint_;
  mutable bool checkpointed_ = false;  ///< `pools` gave the recurrent pool checkpoints
  std::vector<float> embeddings_;      ///< [vocab, hidden]
  std::vector<float> norm_f_;          ///< [hidden]
  std::vector<float> lm_head_;         ///< [vocab, hidden] (the embeddings when tied)
  std::vector<nemotron_h_layer> layers_;
  std::unique_ptr<nemotron_h_backend> backend_;
  // Bound by `bind`: the pools' arenas as the kernels address them.
  kernels::kv_arena_view kv_view_{};
  std::vector<float*> conv_state_, ssm_state_;  ///< per Mamba-2 layer: the pool's block
  bool bound_ = false;
  // Packing buffers, reused across steps.
  std::vector<std::int32_t> ids_, cu_;
  /// The outstanding forwards, oldest first: ticket, whether it draws.
  std::vector<std::pair<std::uint64_t, bool>> draws_;
};

}  // namespace mstar::models
