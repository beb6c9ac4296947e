#pragma once

// The Qwen3.5 family's text model (Qwen3_5ForConditionalGeneration's language
// model, or Qwen3_5ForCausalLM): gated delta-net and gated attention layers,
// each followed by a SwiGLU MLP. Per step it declares a `kv_step` for its
// attention layers and a `recurrent_step` for its delta-net layers (the
// recurrent pool's delta-net blocks: "state" [HV, V, K] and "conv"), and runs
// the forward against the pools' plans. The pools belong to whoever drives
// the step (models/causal_lm.hpp). The CPU runs it today; the vision tower
// and the CUDA path come next (issue 16).

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
#include "models/qwen3_5_config.hpp"
#include "models/qwen3_5_cpu.hpp"
#include "models/qwen3_5_vision.hpp"
#include "models/qwen3_5_weights.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {

/// A loaded Qwen3.5 checkpoint (text model) on the CPU.
class qwen3_5_model final : public causal_lm {
 public:
  /// Loads `config.json`, the safetensors weights (either layout: `model.language_model.*`
  /// or `model.*`) and the tokenizer of `folder` (none: token-id prompts only). Every
  /// failure names the file and what was wrong; a device other than the CPU is refused.
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
  /// Keeps the prompt's M-RoPE positions (Qwen2-VL's `get_rope_index`) and the
  /// images; the vision tower runs when a step first feeds an image's tokens,
  /// so an image served from cached pages is never encoded.
  void begin_sequence(const resources::request_id& rid, std::span<const resources::token_id> prompt,
                      std::span<const image_input> images) override;
  void end_sequence(const resources::request_id& rid) override;
  /// Images encoded by the vision tower since load (each once per sequence).
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
  [[nodiscard]] std::string device_name() const override { return "cpu"; }
  [[nodiscard]] mstar::dtype compute_dtype() const noexcept override {
    return mstar::dtype::float32;
  }
  [[nodiscard]] std::int64_t num_parameters() const noexcept override;
  [[nodiscard]] bool on_gpu() const noexcept override { return false; }

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
    std::vector<image_input> images;      ///< emptied once encoded
    std::vector<float> embeds;            ///< [image tokens, hidden] once encoded
  };
  /// Each token's rotary positions [3][T] from the KV plan and, for sequences
  /// with images, their M-RoPE table; image tokens' embedding rows.
  [[nodiscard]] result<void> fill_positions(std::span<const step_row> rows,
                                            const resources::kv_label_plan& plan);
  /// The embeddings of `seq`'s images, encoding them on first use.
  [[nodiscard]] result<const float*> embeds_of(image_sequence& seq);

  qwen3_5_config config_;
  std::unique_ptr<tokenizer> tokenizer_;
  std::string fingerprint_;
  mutable bool checkpointed_ = false;
  std::vector<float> embeddings_, norm_, lm_head_;
  std::vector<qwen3_5_layer> layers_;
  qwen3_5_cpu cpu_;
  kernels::kv_arena_view kv_view_{};
  std::int32_t page_size_ = 0;
  std::vector<float*> conv_state_, delta_state_;  ///< per delta-net layer: the pool's block
  bool bound_ = false;
  std::vector<std::int32_t> ids_, cu_, positions_;
  std::vector<const float*> embed_rows_;  ///< [T]: an image token's embedding, else null
  std::optional<qwen3_5_vision> vision_;  ///< multimodal checkpoints only
  std::map<resources::request_id, image_sequence> image_sequences_;
  std::int64_t images_encoded_ = 0;
};

}  // namespace mstar::models
