#pragma once

// The text model of a Qwen3.5 checkpoint (`qwen3_5`: Qwen3_5ForConditionalGeneration,
// the text part under `text_config`; `qwen3_5_text`: Qwen3_5ForCausalLM, flat).
// Each decoder layer is a token mixer, a gated delta net (`linear_attention`)
// or gated full attention (`full_attention`), then a SwiGLU MLP, each behind a
// zero-centred RMSNorm (scale 1 + weight).

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "resources/recurrent/geometry.hpp"

namespace mstar::models {

/// The token mixer of one Qwen3.5 decoder layer.
enum class qwen3_5_mixer : std::uint8_t {
  delta_net,  ///< "linear_attention": gated delta rule over a conv of [q | k | v]
  attention,  ///< "full_attention": gated GQA with q/k norms and partial M-RoPE
};

/// The fields of a Qwen3.5 config.json the text model runs on. Defaults are
/// transformers 5.24's.
struct qwen3_5_config {
  std::int64_t vocab_size = 248320;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 12288;  ///< SwiGLU MLP width
  std::vector<qwen3_5_mixer> layers;       ///< `layer_types`, or every 4th full attention

  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 4;
  std::int64_t head_dim = 256;
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.25;                    ///< rotated share of each head
  std::array<std::int64_t, 3> mrope_section{11, 11, 10};  ///< t / h / w frequency pairs
  bool mrope_interleaved = true;  ///< sections interleaved over frequencies (t h w t h w ...)

  std::int64_t linear_num_key_heads = 16;    ///< HK
  std::int64_t linear_num_value_heads = 32;  ///< HV, a multiple of HK
  std::int64_t linear_key_head_dim = 128;    ///< K
  std::int64_t linear_value_head_dim = 128;  ///< V
  std::int64_t linear_conv_kernel_dim = 4;   ///< W

  double rms_norm_eps = 1e-6;
  std::int64_t max_position_embeddings = 32768;
  bool tie_word_embeddings = false;
  std::vector<std::int64_t> eos_token_ids;  ///< `eos_token_id`: an id, a list or null
  std::string weights_dtype;                ///< `dtype` / `torch_dtype` as written

  /// Multimodal checkpoints (`qwen3_5` with a `vision_config`): the marker ids.
  bool multimodal = false;
  std::int64_t image_token_id = 248056;
  std::int64_t vision_start_token_id = 248053;
  std::int64_t vision_end_token_id = 248054;

  /// Parses config.json text; `label` prefixes every message, which names the
  /// field ("config.json: field 'text_config.head_dim': must be positive, got 0").
  [[nodiscard]] static result<qwen3_5_config> parse(std::string_view json_text,
                                                    std::string_view label = "config.json");
  /// Reads `path` (a config.json, or a folder holding one) and parses it.
  [[nodiscard]] static result<qwen3_5_config> load(const std::filesystem::path& path);

  /// Checks the fields against each other (heads divide, the rotary span is even, the
  /// M-RoPE sections cover it); the first problem is the error.
  [[nodiscard]] result<void> validate() const;

  [[nodiscard]] std::int64_t num_layers() const noexcept {
    return static_cast<std::int64_t>(layers.size());
  }
  [[nodiscard]] std::int64_t count(qwen3_5_mixer kind) const noexcept;
  /// Channels of each head the rotary embedding turns (the rest pass through).
  [[nodiscard]] std::int64_t rotary_dim() const noexcept {
    return static_cast<std::int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  }
  /// The delta-net layers' state geometry (the recurrent pool's blocks).
  [[nodiscard]] resources::delta_net_geometry delta_net() const noexcept {
    return {linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
            linear_value_head_dim, linear_conv_kernel_dim};
  }
  [[nodiscard]] std::int64_t key_dim() const noexcept {
    return linear_num_key_heads * linear_key_head_dim;
  }
  [[nodiscard]] std::int64_t value_dim() const noexcept {
    return linear_num_value_heads * linear_value_head_dim;
  }
};

/// The `model_type` of the config.json in `folder` ("" when it has none), for
/// picking the model family; an unreadable file is the error.
[[nodiscard]] result<std::string> read_model_type(const std::filesystem::path& folder);

}  // namespace mstar::models
