#pragma once

// The Nemotron-H family (NemotronHForCausalLM): Mamba-2, attention and MLP
// blocks in a hybrid pattern, each `h += mixer(rms_norm(h))`, then a final
// norm and the LM head. The model owns its walk: per step it declares a
// `kv_step` for its attention layers and a `recurrent_step` for its Mamba-2
// layers, runs admit and plan through the step runner, its kernels against
// the plans, then commit.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "kernels/attention.hpp"
#include "models/nemotron_h_config.hpp"
#include "models/tokenizer.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "resources/step/step_runner.hpp"

namespace mstar::models {

class nemotron_h_cuda;
struct row_sampling;

/// One block's weights, float32, in the checkpoint's layouts.
struct nemotron_h_layer {
  layer_kind kind = layer_kind::mlp;
  std::int32_t sub_index = 0;  ///< index among layers of its kind (KV / recurrent pool layer)
  std::vector<float> norm;     ///< [hidden]
  // Mamba-2
  std::vector<float> in_proj;   ///< [d_inner + conv_dim + H, hidden]
  std::vector<float> conv_w;    ///< [conv_dim, W]
  std::vector<float> conv_b;    ///< [conv_dim] (empty without conv bias)
  std::vector<float> dt_bias;   ///< [H]
  std::vector<float> a_log;     ///< [H]
  std::vector<float> d;         ///< [H]
  std::vector<float> gnorm;     ///< [d_inner]
  std::vector<float> out_proj;  ///< [hidden, d_inner]
  // attention
  std::vector<float> q, k, v, o;  ///< [Hq*D, hidden], [Hkv*D, hidden] x2, [hidden, Hq*D]
  // MLP
  std::vector<float> up, down;  ///< [inter, hidden], [hidden, inter]
};

/// How the pools a model runs on are sized.
struct pool_options {
  std::int64_t page_size = 16;
  std::int64_t max_num_pages = 4096;
  std::int64_t max_slots = 64;  ///< recurrent slots, the sink included
  bool prefix_cache = true;     ///< honoured only by prefix-skip-safe models
  std::string salt;             ///< prefix-cache salt (tenant)
};

/// Where and in what precision a model runs.
struct run_options {
  /// "cpu", or "cuda" / "cuda:N" (device N): the forward's kernels, the
  /// weights and the pools' arenas all live there.
  std::string device = "cpu";
  /// Weights and GEMM inputs on CUDA: bfloat16 (the reference's serving
  /// precision) or float32 (the CPU's numbers, for parity). The CPU always
  /// runs float32.
  mstar::dtype dtype = mstar::dtype::bfloat16;
  /// On CUDA, decode steps replay a graph captured once per batch size.
  bool cuda_graphs = true;
};

/// Parses "cpu", "cuda" or "cuda:N" into the device index (-1 for cpu), or
/// invalid_argument naming the text.
[[nodiscard]] result<int> parse_device(const std::string& text);

/// A request's rows for one step: the tokens it feeds now.
struct step_row {
  resources::request_id rid;
  std::span<const resources::token_id> tokens;
};

/// What a step produced, or why the pools refused it.
struct step_outcome {
  std::optional<resources::admit_refusal> refused;  ///< set: nothing ran, nothing changed
  std::string refused_by;                           ///< the refusing pool's key
  std::vector<float> logits;                        ///< [rows, vocab]: each row's last token
  /// With sampling settings on a GPU: each row's token drawn on the device
  /// (-1 where the CPU sampler would refuse the row), and no logits.
  std::vector<std::int32_t> sampled;
};

/// A loaded Nemotron-H checkpoint and the pools it runs on.
class nemotron_h_model {
 public:
  /// Loads `config.json`, the safetensors weights (F32/BF16/F16, converted
  /// to float32) and the tokenizer of `folder`, and builds its pools. Every
  /// failure names the file and what was wrong.
  [[nodiscard]] static result<std::unique_ptr<nemotron_h_model>> load(
      const std::filesystem::path& folder, const pool_options& pools = {},
      const run_options& run = {});

  /// A model with random weights (normal, std 0.02; Mamba-2's A_log, D and
  /// dt_bias at their usual initial values) and a byte tokenizer: for
  /// benchmarks and tests at sizes no fixture holds.
  [[nodiscard]] static result<std::unique_ptr<nemotron_h_model>> random(
      nemotron_h_config config, std::uint64_t seed, const pool_options& pools = {},
      const run_options& run = {});

  [[nodiscard]] const nemotron_h_config& config() const noexcept { return config_; }
  /// Number of weights.
  [[nodiscard]] std::int64_t num_parameters() const noexcept;
  /// Each linear layer's [out, in] shape, once per use in a forward over
  /// every layer (the GEMMs a step runs), for the BLAS floor of benchmarks.
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>> gemm_shapes() const;
  [[nodiscard]] const tokenizer& tok() const noexcept { return *tokenizer_; }

  /// Whether a request whose front came from cached pages can skip that
  /// compute: only without Mamba-2 layers, whose state at the match boundary
  /// is not cached (reference kv §5.8).
  [[nodiscard]] bool prefix_skip_safe() const noexcept {
    return config_.count(layer_kind::mamba2) == 0;
  }

  /// Registers a request (with its prompt's page keys when prefix reuse is
  /// on) and returns how many prompt tokens cached pages already hold.
  [[nodiscard]] std::int64_t ingest(const resources::request_id& rid,
                                    std::span<const resources::token_id> prompt);
  /// Feeds sampled ids to the prefix chain so generated pages become
  /// reusable by a later turn.
  void extend(const resources::request_id& rid, std::span<const resources::token_id> ids);
  /// Forgets a request; its cached pages stay in the index.
  void remove(const resources::request_id& rid);

  /// Runs one step over `rows` (each feeding >= 1 token): admit, plan,
  /// kernels, commit. A refusal is an outcome, not an error; errors are
  /// broken invariants.
  /// With `sampling` (one entry per row) a GPU model draws each row's next
  /// token on the device and returns `sampled` instead of the logits; the
  /// CPU returns logits either way (the caller samples).
  [[nodiscard]] result<step_outcome> step(std::span<const step_row> rows,
                                          std::span<const row_sampling> sampling = {});

  /// "cpu", or the CUDA device's name.
  [[nodiscard]] std::string device_name() const;
  /// The weights' precision in the forward (float32 on the CPU).
  [[nodiscard]] mstar::dtype compute_dtype() const noexcept;

  [[nodiscard]] resources::kv_pool* kv() noexcept { return kv_.get(); }
  [[nodiscard]] resources::recurrent_state_pool* recurrent() noexcept { return rec_.get(); }
  /// Whole-page tokens of prompts served from cache so far (a metric).
  [[nodiscard]] std::int64_t matched_tokens_total() const noexcept { return matched_total_; }

  /// Runs one throwaway request (a one-token prefill, then one decode step
  /// with the device drawing the token) and removes it, so library set-up
  /// (cuBLAS, the batch-1 decode graph) is not paid by the first real
  /// request. The pools end as they were, but for which free page or slot
  /// is handed out next. Nothing to do on the CPU.
  [[nodiscard]] result<void> warm_up();

 private:
  /// Per-step work buffers, reused across layers and steps (only grown), so
  /// a step does not allocate per layer.
  struct scratch {
    std::vector<float> zxbcdt, xbc, y, q, k, v, o, inter;
  };
  nemotron_h_model();
 public:
  ~nemotron_h_model();
  nemotron_h_model(const nemotron_h_model&) = delete;
  nemotron_h_model& operator=(const nemotron_h_model&) = delete;

 private:
  [[nodiscard]] result<void> load_weights(const std::filesystem::path& folder);
  [[nodiscard]] result<void> make_pools(const pool_options& pools, const std::string& fingerprint);
  /// Opens the device `run` names (nothing for the CPU); before make_pools.
  [[nodiscard]] result<void> open_device(const run_options& run);
  /// Copies the weights to the device, if any; after the weights are read.
  [[nodiscard]] result<void> upload_weights();
  /// The CPU forward over the packed rows (`cu`: cumulative tokens per row).
  void forward(std::span<const std::int32_t> ids, std::span<const std::int32_t> cu, bool decode,
               const resources::kv_label_plan* kv_plan, const resources::recurrent_addressing* rec,
               std::vector<float>& logits);
  void mamba_layer(const nemotron_h_layer& l, const float* x, float* out, std::int64_t tokens,
                   std::span<const std::int32_t> cu, bool decode,
                   const resources::recurrent_addressing& rec);
  void attention_layer(const nemotron_h_layer& l, const float* x, float* out,
                       std::int64_t tokens, const resources::kv_label_plan& plan);

  nemotron_h_config config_;
  std::unique_ptr<tokenizer> tokenizer_;
  std::vector<float> embeddings_;  ///< [vocab, hidden]
  std::vector<float> norm_f_;      ///< [hidden]
  std::vector<float> lm_head_;     ///< [vocab, hidden] (the embeddings when tied)
  std::vector<nemotron_h_layer> layers_;
  std::unique_ptr<resources::kv_pool> kv_;
  std::unique_ptr<resources::recurrent_state_pool> rec_;
  std::unique_ptr<resources::step_runner> runner_;
  kernels::kv_arena_view kv_view_{};
  std::vector<float*> conv_state_, ssm_state_;  ///< per Mamba-2 layer: the pool's block
  scratch scratch_;
  std::unique_ptr<nemotron_h_cuda> cuda_;  ///< set: the forward runs there
  bool cuda_graphs_ = true;
  std::int64_t page_size_ = 16;
  std::int64_t matched_total_ = 0;
};

}  // namespace mstar::models
