#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "resources/recurrent/geometry.hpp"

namespace mstar::models {

/// What one Nemotron-H layer (block) holds besides its pre-norm.
enum class layer_kind : std::uint8_t {
  mamba2,     ///< `M`, "mamba" / "linear_attention": a Mamba-2 mixer
  attention,  ///< `*`, "attention" / "full_attention": causal GQA attention, no RoPE
  mlp,        ///< `-`, "mlp": up -> activation -> down
  moe,        ///< `E`, "moe": mixture of experts (parsed, refused by validate)
};

/// The pattern character of `kind`: 'M', '*', '-' or 'E'.
[[nodiscard]] char pattern_char(layer_kind kind) noexcept;

/// The legacy list name of `kind`: "mamba", "attention", "mlp" or "moe".
[[nodiscard]] std::string_view to_string(layer_kind kind) noexcept;

/// The `config.json` of a `NemotronHForCausalLM` checkpoint.
///
/// Field names and defaults follow transformers 5.24's NemotronHConfig: a
/// field that is absent or null takes that default, the legacy `mamba_*`
/// aliases (`mamba_n_groups`, `mamba_d_conv`, `mamba_chunk_size`, ...) are
/// read, unknown fields are ignored. The layer pattern is read from either
/// spelling: the `hybrid_override_pattern` string of published checkpoints or
/// the `layers_block_type` list (legacy or new type names); when both are
/// present they must agree. Non-finite numbers may be written as strings or
/// as {"__float__": "Infinity"} objects. Every bad field is an error naming it.
struct nemotron_h_config {
  std::int64_t vocab_size = 0;     ///< required
  std::int64_t hidden_size = 0;    ///< required
  std::vector<layer_kind> layers;  ///< required, in either spelling

  std::int64_t num_attention_heads = 32;  ///< query heads of attention layers
  std::int64_t num_key_value_heads = 8;   ///< null means num_attention_heads
  std::int64_t head_dim = 128;            ///< per attention head (also read as attention_head_dim)
  std::int64_t max_position_embeddings = 4096;  ///< informational: no positional encoding
  bool attention_bias = false;  ///< read; transformers 5.24 builds q/k/v/o without bias anyway

  std::int64_t intermediate_size = 21504;  ///< MLP hidden width
  std::string mlp_hidden_act = "relu2";    ///< "relu2" (squared ReLU) or "silu"
  bool mlp_bias = false;                   ///< bias on up_proj and down_proj

  std::int64_t mamba_num_heads = 128;     ///< H
  std::int64_t mamba_head_dim = 64;       ///< P
  std::int64_t ssm_state_size = 128;      ///< N
  std::int64_t n_groups = 8;              ///< G: B/C groups, also the gated-norm groups
  std::int64_t conv_kernel = 4;           ///< W
  std::int64_t chunk_size = 128;          ///< SSD chunk length of the reference scan
  std::int64_t expand = 2;                ///< read for completeness; d_inner is H·P
  std::string mamba_hidden_act = "silu";  ///< activation after the conv; only "silu"
  double time_step_min = 0.001;           ///< transformers clamps prefill dt below at this
  double time_step_max = 0.1;             ///< initialisation only
  double time_step_floor = 1e-4;          ///< initialisation only
  /// dt clamp the config declares; transformers 5.24 ignores it (see time_step_min).
  std::array<double, 2> time_step_limit{0.0, std::numeric_limits<double>::infinity()};
  bool use_conv_bias = true;     ///< bias on the depthwise conv
  bool use_bias = false;         ///< bias of the Mamba in_proj / out_proj in transformers 5.24
  bool mamba_proj_bias = false;  ///< read; unused by transformers 5.24 (it uses use_bias)
  mstar::dtype mamba_ssm_cache_dtype = mstar::dtype::float32;  ///< the SSM state's dtype

  double layer_norm_epsilon = 1e-5;      ///< every RMSNorm, the gated one included
  bool tie_word_embeddings = false;      ///< transformers 5.24 never ties (lm_head is saved)
  bool residual_in_fp32 = false;         ///< read; unused by transformers 5.24's forward
  bool rescale_prenorm_residual = true;  ///< initialisation only
  std::optional<std::int64_t> pad_token_id = 0;  ///< null gives nullopt
  std::optional<std::int64_t> bos_token_id = 1;  ///< null gives nullopt
  std::vector<std::int64_t> eos_token_ids{2};    ///< `eos_token_id`: an id, a list or null
  std::string weights_dtype;  ///< `dtype` / `torch_dtype` as written; empty when absent

  /// Parses the JSON text of a config; `label` names it in messages. Runs validate().
  [[nodiscard]] static result<nemotron_h_config> parse(std::string_view json_text,
                                                       std::string_view label = "config.json");

  /// Reads `path`: a config.json file, or a folder holding one.
  [[nodiscard]] static result<nemotron_h_config> load(const std::filesystem::path& path);

  /// Checks what the runtime relies on: positive sizes for the layer kinds
  /// present, head counts that divide, supported activations, no MoE layer
  /// ("MoE layers (E) are not supported yet"). Errors name the field.
  [[nodiscard]] result<void> validate() const;

  /// The layers as a pattern string, e.g. "M*M-M*-".
  [[nodiscard]] std::string pattern() const;

  /// How many layers are of `kind`.
  [[nodiscard]] std::int64_t count(layer_kind kind) const noexcept;

  /// Number of layers.
  [[nodiscard]] std::int64_t num_layers() const noexcept {
    return static_cast<std::int64_t>(layers.size());
  }

  /// Mamba-2 inner width H·P (the gate z and the x part of the conv).
  [[nodiscard]] std::int64_t d_inner() const noexcept { return mamba_num_heads * mamba_head_dim; }

  /// Channels of the Mamba-2 depthwise conv over [x | B | C]: H·P + 2·G·N.
  [[nodiscard]] std::int64_t conv_dim() const noexcept {
    return d_inner() + 2 * n_groups * ssm_state_size;
  }

  /// Output width of the Mamba-2 in_proj, split as [z | x B C | dt]: d_inner + conv_dim + H.
  [[nodiscard]] std::int64_t in_proj_size() const noexcept {
    return d_inner() + conv_dim() + mamba_num_heads;
  }

  /// Channels per group of the gated RMSNorm: d_inner / G.
  [[nodiscard]] std::int64_t gated_norm_group_size() const noexcept {
    return n_groups > 0 ? d_inner() / n_groups : 0;
  }

  /// The recurrent-pool geometry of the Mamba-2 layers.
  [[nodiscard]] resources::mamba2_geometry to_mamba2_geometry() const noexcept {
    return {mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups, conv_kernel};
  }
};

}  // namespace mstar::models
