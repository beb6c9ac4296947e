#pragma once

// The Qwen3.5 family's text model (Qwen3_5ForConditionalGeneration's language
// model, or Qwen3_5ForCausalLM): gated delta-net and gated attention layers,
// each followed by a SwiGLU MLP. Per step it declares a `kv_step` for its
// attention layers and a `recurrent_step` for its delta-net layers (the
// recurrent pool's delta-net blocks: "state" [HV, V, K] and "conv"), and runs
// the forward against the pools' plans. The pools belong to whoever drives
// the step (models/causal_lm.hpp). The forward runs on the CPU
// (qwen3_5_cpu.hpp, float32) or a CUDA device (cuda/qwen3_5_cuda.hpp); so
// does the vision tower (qwen3_5_vision.hpp, cuda/qwen3_5_vision_cuda.hpp),
// which hands its rows to the text forward through host memory either way.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "models/cuda/qwen3_5_cuda.hpp"
#include "models/cuda/qwen3_5_vision_cuda.hpp"
#include "models/qwen3_5_config.hpp"
#include "models/qwen3_5_cpu.hpp"
#include "models/qwen3_5_vision.hpp"
#include "models/qwen3_5_weights.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {

/// A loaded Qwen3.5 checkpoint (text model) on the CPU or a CUDA device.
class qwen3_5_model final : public causal_lm {
 public:
  /// Loads `config.json`, the safetensors weights (either layout: `model.language_model.*`
  /// or `model.*`) and the tokenizer of `folder` (none: token-id prompts only). Every
  /// failure names the file and what was wrong. `run.device` picks the CPU
  /// (float32) or a CUDA device (`run.dtype` weights, the vision tower's too).
  [[nodiscard]] static result<std::unique_ptr<qwen3_5_model>> load(
      const std::filesystem::path& folder, const run_options& run = {});

  ~qwen3_5_model() override;
  qwen3_5_model(const qwen3_5_model&) = delete;
  qwen3_5_model& operator=(const qwen3_5_model&) = delete;

  [[nodiscard]] const qwen3_5_config& config() const noexcept { return config_; }

  // causal_lm
  [[nodiscard]] const tokenizer* tok() const noexcept override { return tokenizer_.get(); }
  [[nodiscard]] std::int64_t vocab_size() const noexcept override { return config_.vocab_size; }
  [[nodiscard]] std::int64_t max_context() const noexcept override {
    return config_.max_position_embeddings;
  }
  [[nodiscard]] std::span<const std::int64_t> eos_token_ids() const noexcept override {
    return config_.eos_token_ids;
  }
  /// Without delta-net layers; with them, once `pools` gave the recurrent pool
  /// checkpoint slots (the state at a match boundary is cached too).
  [[nodiscard]] bool prefix_skip_safe() const noexcept override {
    return config_.count(qwen3_5_mixer::delta_net) == 0 || checkpointed_;
  }
  /// The config's marker ids and the tower's patch geometry; nullopt for a
  /// checkpoint without a vision tower.
  [[nodiscard]] std::optional<vision_facts> vision() const noexcept override;
  /// Fits each image's placeholder run (`image_token_id` tokens, one per
  /// merged patch, between vision_start and vision_end) to its grid: a run of
  /// one token is expanded to the image's count, any other length must equal it.
  [[nodiscard]] result<void> place_images(std::vector<resources::token_id>& prompt,
                                          std::span<const image_input> images) const override;
  /// Each placeholder run with its image's advance, max(rows, columns) of
  /// its merged grid (as `begin_sequence` lays positions out).
  [[nodiscard]] std::vector<image_span> image_spans(
      std::span<const resources::token_id> prompt,
      std::span<const image_input> images) const override;
  /// The vision tower's patch geometry; empty without a tower.
  [[nodiscard]] std::string preprocess_fingerprint() const override;
  /// Keeps the prompt's M-RoPE positions (Qwen2-VL's `get_rope_index`) and the
  /// images; the vision tower runs when a step first feeds an image's tokens,
  /// so an image served from cached pages is never encoded.
  void begin_sequence(const resources::request_id& rid, std::span<const resources::token_id> prompt,
                      std::span<const image_input> images) override;
  void end_sequence(const resources::request_id& rid) override;
  /// Images encoded by the vision tower since load (each at most once per
  /// sequence, and only when a step feeds one of its tokens).
  [[nodiscard]] std::int64_t images_encoded() const noexcept { return images_encoded_; }
  /// Not with attention layers: their rotary positions are read off the KV
  /// pages, which a window releases.
  [[nodiscard]] bool supports_windows() const noexcept override {
    return config_.count(qwen3_5_mixer::attention) == 0;
  }
  [[nodiscard]] result<pool_spec> pools(const pool_options& options) const override;
  [[nodiscard]] result<void> bind(resources::kv_pool* kv,
                                  resources::recurrent_state_pool* recurrent) override;
  [[nodiscard]] step_request declare(std::span<const step_row> rows) const override;
  [[nodiscard]] result<forward_output> forward(std::span<const step_row> rows,
                                               const step_plans& plans,
                                               std::span<const row_sampling> draws) override;
  /// On a CUDA device only the work is queued (models/cuda/qwen3_5_cuda.hpp);
  /// on the CPU the forward runs here.
  [[nodiscard]] result<std::uint64_t> launch(std::span<const step_row> rows,
                                             const step_plans& plans,
                                             std::span<const row_sampling> draws,
                                             std::span<const std::int32_t> loopback) override;
  [[nodiscard]] result<forward_output> finish(std::uint64_t ticket) override;
  [[nodiscard]] std::string device_name() const override;
  [[nodiscard]] mstar::dtype compute_dtype() const noexcept override;
  [[nodiscard]] std::int64_t num_parameters() const noexcept override;
  [[nodiscard]] bool on_gpu() const noexcept override;

 private:
  qwen3_5_model() = default;
  [[nodiscard]] result<void> load_weights(const std::filesystem::path& folder);
  [[nodiscard]] qwen3_5_host_weights host_weights() const {
    return {&embeddings_, &norm_, &lm_head_, layers_};
  }
  /// What a sequence with images needs beyond its tokens.
  struct image_sequence {
    std::int64_t prompt_length = 0;
    std::vector<std::int32_t> positions;  ///< [3][prompt_length]: t, h, w positions
    std::int64_t delta = 0;               ///< position - slot after the prompt
    std::vector<std::int32_t> image_row;  ///< [prompt_length]: embedding row, -1 for text
    std::vector<image_input> images;      ///< each image's patches, emptied once encoded
    std::vector<std::int64_t> first_row;  ///< [images + 1]: each image's first embedding row
    std::vector<bool> encoded;            ///< [images]: whether its rows are in `embeds`
    std::vector<float> embeds;            ///< [image tokens, hidden], an image's once encoded
  };
  /// Each token's rotary positions [3][T] from the KV plan and, for sequences
  /// with images, their M-RoPE table; image tokens' embedding rows.
  [[nodiscard]] result<void> fill_positions(std::span<const step_row> rows,
                                            const resources::kv_label_plan& plan);
  /// The step's packed rows, positions and addressing (host spans into
  /// this model's buffers, valid until the next call).
  [[nodiscard]] result<qwen3_5_step> prepare(std::span<const step_row> rows,
                                             const step_plans& plans,
                                             std::span<const row_sampling> draws);
  /// Embedding row `row` of `seq`'s images, encoding its image on first use.
  [[nodiscard]] result<const float*> embeds_of(image_sequence& seq, std::int64_t row);

  qwen3_5_config config_;
  std::unique_ptr<tokenizer> tokenizer_;
  std::string fingerprint_;
  mutable bool checkpointed_ = false;
  std::vector<float> embeddings_, norm_, lm_head_;
  std::vector<qwen3_5_layer> layers_;
  qwen3_5_cpu cpu_;
  std::unique_ptr<qwen3_5_cuda> cuda_;  ///< null: the CPU forward
  /// Launched CUDA forwards, oldest first: (ticket, draws asked).
  std::vector<std::pair<std::uint64_t, bool>> launched_;
  kernels::kv_arena_view kv_view_{};
  std::int32_t page_size_ = 0;
  std::vector<float*> conv_state_, delta_state_;  ///< per delta-net layer: the pool's block
  bool bound_ = false;
  std::vector<std::int32_t> ids_, cu_, positions_;
  std::vector<const float*> embed_rows_;  ///< [T]: an image token's embedding, else null
  std::optional<qwen3_5_vision> vision_;  ///< multimodal checkpoints only
  /// The tower on the device, with a CUDA text model; null: `vision_` encodes.
  std::unique_ptr<qwen3_5_vision_cuda> vision_cuda_;
  std::map<resources::request_id, image_sequence> image_sequences_;
  std::int64_t images_encoded_ = 0;
};

}  // namespace mstar::models
