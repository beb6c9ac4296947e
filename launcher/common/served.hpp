#pragma once

// What the HTTP front end says about the model it serves, from the model
// and the flags: shared by mstar-serve and a deployment's front node.

#include <cstdint>
#include <memory>
#include <string>

#include "models/causal_lm.hpp"
#include "serve/openai_request.hpp"

namespace mstar::launcher {

/// The served model: `served_name` (empty: "mstar-embedded" for the
/// embedded model, else the folder's name), the longest sequence (the
/// model's, `max_model_len` when > 0, and what `kv_tokens` KV tokens hold
/// when > 0), the vocabulary and tokenizer.
[[nodiscard]] serve::served_model served_model_of(const models::causal_lm& model,
                                                  const std::string& model_dir,
                                                  std::string served_name,
                                                  std::int64_t max_model_len,
                                                  std::int64_t kv_tokens, bool has_chat_template);

/// The chat endpoint's images for `model`: decoded and preprocessed with its
/// folder's preprocessor_config.json (launcher/common/images.hpp).
struct image_setup {
  std::shared_ptr<const serve::image_support> support;  ///< null: image parts are refused
  std::string describe;                                 ///< for the start-up log
};

/// The image support of `model` loaded from `model_dir`; none (said in
/// `describe`) for a model without a vision tower or a folder whose image
/// processor config is missing or does not fit the tower.
[[nodiscard]] image_setup load_images(const std::string& model_dir, const models::causal_lm& model);

}  // namespace mstar::launcher
